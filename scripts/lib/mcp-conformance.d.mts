// Types for mcp-conformance.mjs, for the TypeScript caller (test/e2e/mcp.test.ts).
export const BASELINE: string;
export function conformanceRun(
  url: string,
  key: string,
  upstreamUrl: string,
): Promise<{ run_id: string; run_token: string; expires_at: string; tools: unknown }>;
export function startMcpProxy(
  targetUrl: string,
  runToken: string,
): Promise<{ url: string; close: () => Promise<void> }>;
export function runConformance(
  mcpUrl: string,
  outputDir: string,
  extraArgs?: string[],
  print?: boolean,
): Promise<{ code: number; report: string }>;
