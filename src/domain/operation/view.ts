// What the rest of the system reads off a stored state without moving it: whether the caller can
// stop waiting, and when the operation will next act by itself (the shell's alarm and wait times).
import type { OperationPlan, OperationState } from "./state.ts";
import { approvalAlarmAtMs } from "./approval.ts";
import { nextLockRecheckAtMs, QUOTA_RECHECK_MS, watchdogAt } from "./steps.ts";

/**
 * Settled = the caller can stop waiting: recorded, waiting for a person, or settling late by itself
 * (retry-late.ts: hours, not a wait; the model learns the result with check_status).
 */
export const isSettled = (state: OperationState): boolean =>
  state.phase === "recorded" ||
  (state.phase === "outcome_unknown" && state.reconcile === "human") ||
  settlingUntilMs(state) !== null;

/** When a late settlement's window ends (null: not settling late). */
export const settlingUntilMs = (state: OperationState): number | null =>
  (state.phase === "outcome_unknown" ||
    state.phase === "executing" ||
    state.phase === "reconciling") &&
  state.settleUntilMs !== undefined
    ? state.settleUntilMs
    : null;

/** When the operation will next act by itself (null: in flight now, or never). */
export function nextDueAtMs(state: OperationState): number | null {
  if (state.phase === "retry_scheduled") return state.dueAtMs;
  if (state.phase === "awaiting_quota") return state.dueAtMs;
  if (state.phase === "outcome_unknown") return state.dueAtMs;
  if (state.phase === "held" || state.phase === "awaiting_credential") return state.recheckAtMs;
  return null;
}

/**
 * When this state's own alarm is due: what the transitions into it armed (null: none, or a recorded
 * operation, whose only alarm is its pruning, which the shell knows). The shell puts the alarm back
 * here after something else (an outbox redelivery) moved it earlier.
 */
export function stateAlarmAtMs(
  state: OperationState,
  plan: OperationPlan,
  nowMs: number,
): number | null {
  switch (state.phase) {
    case "awaiting_approval":
      return approvalAlarmAtMs(state, plan);
    case "awaiting_lock":
      return nextLockRecheckAtMs(state.requestedAtMs, nowMs);
    case "awaiting_quota":
      return Math.min(state.dueAtMs ?? Infinity, nowMs + QUOTA_RECHECK_MS);
    case "executing":
    case "reconciling":
      return watchdogAt(plan, state.startedAtMs);
    case "retry_scheduled":
    case "outcome_unknown":
      return state.dueAtMs;
    case "held":
    case "awaiting_credential":
      return state.recheckAtMs;
    case "recorded":
      return null;
  }
}
