// Creating a run: its rows (run, usage, tool sources, and the creating request's hash when the
// client named it with a request_id), written in the caller's transaction; and that hash read
// back to tell a repeat of POST /v1/runs from another body under the same request_id. The bodies
// of RunObject.create and RunObject.requested.
import { err, ok, type Result } from "../../domain/result.ts";
import type { TenantFacts } from "../../domain/tenant-facts.ts";
import { hashTools, type RunState } from "../../domain/turn/turn.ts";
import { retentionMs, hostPolicy } from "../../config.ts";
import { encodeRun } from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { RunError, RunInit, RunView, RunParts } from "./contracts.ts";
import type { RunFacts } from "./facts.ts";
import type { RunRows } from "./rows.ts";
import type { ToolSources } from "./sources.ts";
import { compileTools } from "../../tools/catalog.ts";

/** False when this object already holds a run, or held one that retention pruned. */
export function insertRun(
  store: SqlStore,
  rows: RunRows,
  sources: ToolSources,
  run: RunState,
  requestHash: string | null,
): boolean {
  store.ensureSchema();
  if (rows.load() || store.one("SELECT 1 FROM run_pruned")) return false;
  store.run(
    "INSERT INTO run (id, tenant_id, data, created_at) VALUES (?, ?, ?, ?)",
    run.runId,
    run.tenantId,
    encodeRun(run),
    run.createdAtMs,
  );
  store.run("INSERT INTO usage (k, turns, calls, cost) VALUES (1, 0, 0, 0)");
  sources.store(Object.values(run.tools));
  if (requestHash !== null)
    store.run("INSERT INTO run_request (k, request_hash) VALUES (1, ?)", requestHash);
  return true;
}

/** The creating request's hash, or null (created without a request_id). */
export function requestHashOf(store: SqlStore): string | null {
  const row = store.exists("run_request")
    ? store.one<{ request_hash: string }>("SELECT request_hash FROM run_request WHERE k = 1")
    : null;
  return row?.request_hash ?? null;
}

/** The run as the API shows it, with the tools it offers now. */
export function viewOf(parts: RunParts, run: RunState): RunView {
  return parts.rows.view(run, compileTools(run.tools, hostPolicy(parts.env)));
}

/**
 * RunObject.create: the run's rows and, when given, its tenant facts in one transaction; then the
 * retention alarm.
 */
export async function createRun(
  parts: RunParts,
  facts: RunFacts,
  storage: DurableObjectStorage,
  init: RunInit,
  requestHash: string | null,
  tenantFacts: TenantFacts | null,
): Promise<Result<RunView, RunError>> {
  const run: RunState = {
    ...init,
    toolsHash: await hashTools(init.tools),
    createdAtMs: Date.now(),
    cancelledAtMs: null,
  };
  await parts.sources.hash(Object.values(init.tools));
  const created = parts.store.transaction(() => {
    const inserted = insertRun(parts.store, parts.rows, parts.sources, run, requestHash);
    if (inserted && tenantFacts) facts.write(run.toolsHash, tenantFacts);
    return inserted;
  });
  // Retention: looked at once the run's token has expired (RunObject.alarm, retention.ts).
  if (created) await storage.setAlarm(run.expiresAtMs + retentionMs(parts.env));
  return created
    ? ok(viewOf(parts, run))
    : err({ code: "invalid_request", detail: "run already exists" });
}

/** RunObject.requested: this run if the same request created it, `request_id_conflict` if another did. */
export function requestedRun(
  parts: RunParts,
  tenantId: string,
  requestHash: string,
): Result<RunView | null, RunError> {
  const run = parts.rows.loadFor(tenantId);
  if (!run) {
    const missing = parts.rows.missing(tenantId);
    return !missing.ok && missing.error.code === "run_pruned" ? missing : ok(null);
  }
  return requestHashOf(parts.store) === requestHash
    ? ok(viewOf(parts, run))
    : err({
        code: "request_id_conflict",
        detail:
          "this request_id already created a run from a different request body; use a new request_id for a new run",
      });
}
