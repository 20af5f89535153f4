// What the rest of the system reads off a stored state without moving it: whether the caller can
// stop waiting, and when the operation will next act by itself (the shell's alarm and wait times).
import type { OperationState } from "./state.ts";

/** Settled = nothing more will happen without a person: the caller can stop waiting. */
export const isSettled = (state: OperationState): boolean =>
  state.phase === "recorded" || (state.phase === "outcome_unknown" && state.reconcile === "human");

/** When the operation will next act by itself (null: in flight now, or never). */
export function nextDueAtMs(state: OperationState): number | null {
  if (state.phase === "retry_scheduled") return state.dueAtMs;
  if (state.phase === "outcome_unknown") return state.dueAtMs;
  return null;
}
