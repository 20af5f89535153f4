// Types for suite.mjs, for the TypeScript callers (tests).
export type CheckResult = {
  id: string;
  promise: string;
  ok: boolean;
  failure?: string;
  evidence: string[];
  ms: number;
};
export function runConformance(options: {
  url: string;
  adminToken: string;
  upstream: { controlUrl: string; publicUrl: string };
  only?: string[] | null;
  onResult?: (result: CheckResult) => void;
}): Promise<{ ok: boolean; results: CheckResult[]; tenantId: string }>;
export function formatResults(results: CheckResult[]): string;
