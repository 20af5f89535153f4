// The operation as the tenant index holds it (issue 20), read from its own log for a rebuild: the
// same row the events fed (domain/index-feed.ts), so a reindex gives the answers the feed gave.
import type { OperationState } from "../../domain/operation/index.ts";
import { subjectsOf, type IndexOp } from "../../domain/index-feed.ts";
import { latencyMs } from "../../domain/journal/announce.ts";
import { eventArguments } from "./notices.ts";
import { toolName, type OperationLog } from "./log.ts";
import { decodeState } from "../store/operation-rows.ts";

export function indexEntryOf(log: OperationLog): IndexOp | null {
  const head = log.head();
  if (!head) return null;
  const { state, frozen } = head;
  const settled = state.phase === "recorded";
  const status =
    state.phase === "recorded"
      ? { status: state.outcome.status, code: "code" in state.outcome ? state.outcome.code : null }
      : state.phase === "awaiting_approval"
        ? { status: "awaiting_approval", code: null }
        : state.phase === "outcome_unknown" || state.phase === "reconciling"
          ? { status: "outcome_unknown", code: state.code }
          : { status: "pending", code: null };
  return {
    operation_id: frozen.id,
    run_id: frozen.run_id,
    tool: toolName(frozen),
    status: status.status,
    code: status.status === "succeeded" ? null : status.code,
    attempts: "attempts" in state ? state.attempts : null,
    latency_ms:
      state.phase === "recorded" ? latencyMs(beforeRecorded(log), state.recordedAtMs) : null,
    created_at_ms: frozen.created_at,
    settled_at_ms: state.phase === "recorded" ? state.recordedAtMs : null,
    subjects: subjectsOf(eventArguments(log, frozen)),
    shadow: frozen.plan.shadow !== undefined,
    updated_at_ms: log.lastAtMs() ?? frozen.created_at,
    rank: settled ? 2 : 1,
  };
}

/** The last state before `recorded` (a rebuild only: reads the log's rows, newest first). */
function beforeRecorded(log: OperationLog): OperationState | null {
  for (const row of log.store.all<{ state: string }>(
    "SELECT state FROM op_log ORDER BY seq DESC",
  )) {
    const state = decodeState(row.state);
    if (state.phase !== "recorded") return state;
  }
  return null;
}
