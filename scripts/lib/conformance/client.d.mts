// Types for client.mjs, for the TypeScript callers (tests).
export function targetProblem(url: string): string | null;
export function deploymentClient(
  baseUrl: string,
  options?: { timeoutMs?: number },
): {
  url: string;
  seen: string[];
  call(
    method: string,
    path: string,
    token: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; text: string }>;
};
export function upstreamNamespace(controlUrl: string, publicUrl: string, ns: string): unknown;
export const sleep: (ms: number) => Promise<void>;
