// Types for dev-server.mjs, for the TypeScript callers (the console's end-to-end test).
export const ROOT: string;
export const DEV_VARS: Record<string, string>;
export const DEMO_SHOP_API_KEY: string;
export function startWrangler(options: {
  config?: string;
  port: number;
  inspectorPort?: number;
  vars?: Record<string, string>;
  persistTo?: string;
  quiet?: boolean;
  readyTimeoutMs?: number;
}): Promise<{ url: string; stop: () => void }>;
export function call(
  url: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: any; headers: Headers }>;
export function registerUserDemo(url: string, upstreamUrl: string, key: string): Promise<string>;
export function demoTools(upstreamUrl: string): Array<Record<string, unknown> & { name: string }>;
export const DEMO_SCOPES: string[];
export function createDemoTenant(url: string): Promise<{ tenantId: string; key: string }>;
export function registerDemo(
  url: string,
  upstreamUrl: string,
  options?: {
    runContext?: Record<string, unknown>;
    budgets?: Record<string, number>;
    mode?: "live" | "shadow";
    tenant?: { tenantId: string; key: string };
  },
): Promise<{
  tenantId: string;
  key: string;
  run: { run_id: string; run_token: string; expires_at: string; tools: unknown };
}>;
export function createRun(
  url: string,
  key: string,
  tools: string[],
  context?: Record<string, unknown>,
  budgets?: Record<string, number>,
  mode?: "live" | "shadow",
): Promise<{ run_id: string; run_token: string }>;
export function verifyDemo(
  url: string,
  key: string,
  sandboxUrl: string,
): Promise<Array<{ name: string; verification: { status: string } & Record<string, unknown> }>>;
