// Creating a run: its rows (run, usage, tool sources, and the creating request's hash when the
// client named it with a request_id), written in the caller's transaction; and that hash read
// back to tell a repeat of POST /v1/runs from another body under the same request_id.
import type { RunState } from "../../domain/turn/turn.ts";
import { encodeRun } from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { RunRows } from "./rows.ts";
import type { ToolSources } from "./sources.ts";

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
