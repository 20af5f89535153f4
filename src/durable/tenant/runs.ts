// The tenant's list of its runs (issue 38, audit I1): the source of truth a tenant index rebuild
// walks (index/rebuild.ts), so an index whose rows or storage were lost, or that missed a run's
// events, can still find every run. One row per run, written by the creating request's one tenant
// read (TenantObject.runTools, which POST /v1/runs makes anyway: no extra RPC, nothing on a turn's
// path) and deleted by the run's retention just before the run is pruned (run/retention.ts).
// A row whose run was never made (the request died between the two) answers null to the rebuild,
// which forgets it once it is older than ORPHAN_AFTER_MS.
import type { SqlStore } from "../store/sql-store.ts";

/** How long a run lives: its `expiresAtMs` is its creation plus this (http/runs-routes.ts). */
export const RUN_TTL_MS = 24 * 60 * 60_000;
/**
 * A run recorded at `at_ms` has expired by `at_ms + RUN_TTL_MS + RECORDED_BEFORE_MS`: it is
 * recorded in the read that precedes its creation, within one request's time (issue 34: such a
 * run makes no more calls, so a freeze's tell skips it).
 */
const RECORDED_BEFORE_MS = 10 * 60_000;
export const liveSinceMs = (nowMs: number) => nowMs - RUN_TTL_MS - RECORDED_BEFORE_MS;

/** A run id recorded this long ago whose run does not exist was never made: the rebuild forgets it. */
export const ORPHAN_AFTER_MS = 60 * 60_000;

/** Inside runTools, for a run about to be created; a resend of the same request changes nothing. */
export function recordRun(store: SqlStore, runId: string, nowMs: number): void {
  store.ensureTable("tenant_runs");
  store.run(
    "INSERT INTO tenant_runs (run_id, at_ms) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING",
    runId,
    nowMs,
  );
}

/** A page of the tenant's runs in id order, after `afterRunId` (null: from the start). */
export function runPage(
  store: SqlStore,
  afterRunId: string | null,
  limit: number,
): Array<{ run_id: string; at_ms: number }> {
  if (!store.exists("tenant_runs")) return [];
  return store.all<{ run_id: string; at_ms: number }>(
    "SELECT run_id, at_ms FROM tenant_runs WHERE run_id > ? ORDER BY run_id LIMIT ?",
    afterRunId ?? "",
    limit,
  );
}

/** The run was pruned (or never made): it leaves the list. Idempotent. */
export function forgetRuns(store: SqlStore, runIds: readonly string[]): void {
  if (!store.exists("tenant_runs")) return;
  for (const runId of runIds) store.run("DELETE FROM tenant_runs WHERE run_id = ?", runId);
}
