// The run as the tenant index holds it (issue 20): the summary every run event carries in
// `data.run` (user, times, usage — one read of the usage row, beside the event row it goes in),
// and, for a rebuild, the run's row and its operations' ids read from its own rows.
import type { IndexRun, RunSummary } from "../../domain/index-feed.ts";
import { operationIds, type RunState } from "../../domain/turn/turn.ts";
import type { RunRows } from "./rows.ts";

export function runSummary(run: RunState, rows: RunRows): RunSummary {
  const usage = rows.usage();
  return {
    user: run.user.id,
    created_at_ms: run.createdAtMs,
    expires_at_ms: run.expiresAtMs,
    cancelled_at_ms: run.cancelledAtMs,
    usage: { turns: usage.turns, tool_calls: usage.toolCalls, cost: usage.cost },
  };
}

/** `compensations`: the run's compensation operations (undo, run/compensate.ts), rebuilt with it. */
export function runIndexEntry(
  run: RunState,
  rows: RunRows,
  nowMs: number,
  compensations: readonly string[] = [],
): { run: IndexRun; operation_ids: string[] } {
  const summary = runSummary(run, rows);
  return {
    run: {
      run_id: run.runId,
      user_id: summary.user,
      created_at_ms: summary.created_at_ms,
      expires_at_ms: summary.expires_at_ms,
      cancelled_at_ms: summary.cancelled_at_ms,
      usage: summary.usage,
      updated_at_ms: nowMs,
    },
    operation_ids: [...new Set([...rows.turns().flatMap(operationIds), ...compensations])],
  };
}
