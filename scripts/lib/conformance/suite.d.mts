// Types for suite.mjs, for the TypeScript callers (tests).
export type CheckResult = {
  id: string;
  promise: string;
  ok: boolean;
  failure?: string;
  evidence: string[];
  ms: number;
};
export type CleanupReport = {
  failures: Array<{ step: string; status?: number; detail?: string }>;
  /** The tenants the run created: no route deletes a tenant. */
  tenants: string[];
};
export function runConformance(options: {
  url: string;
  adminToken: string;
  upstream: { controlUrl: string; publicUrl: string };
  only?: string[] | null;
  onResult?: (result: CheckResult) => void;
}): Promise<{ ok: boolean; results: CheckResult[]; tenantId: string; cleanup: CleanupReport }>;
export function formatResults(results: CheckResult[]): string;
export function formatCleanup(
  cleanup: CleanupReport,
  options?: { upstreamUrl?: string | null },
): string;
export function exitCodeOf(report: { ok: boolean; cleanup: CleanupReport }): 0 | 1 | 3;
