// How long a caller waits for its calls to settle, and when it may stop early. A wait the client
// asked for (`Prefer: wait=N`, `?wait=N`) is a long-poll: it holds out for a person's decision too.
// The default wait of a turn POST does not: a call waiting for a person lets the answer go at once
// (a person rarely decides within seconds; DESIGN: "waiting is not failing").
import { isSettled, type OperationPlan, type OperationState } from "./operation/index.ts";

/** `holdForPeople`: keep waiting while the operation awaits a person's approval (an explicit wait). */
export type Wait = { ms: number; holdForPeople: boolean };

/**
 * Whether a caller waiting until `deadlineMs` can stop now: the operation settled, its next
 * self-driven step is due after the deadline (a retry or resend far ahead), the deadline passed,
 * or — unless it holds for people — it awaits a person's approval that does not expire by itself
 * before the deadline (an expiry within the wait settles it: that is still waited for).
 */
export function waitIsOver(
  state: OperationState,
  plan: OperationPlan,
  nowMs: number,
  deadlineMs: number,
  holdForPeople: boolean,
): boolean {
  // Held by a freeze or a pause (issue 34), or waiting for the user to connect (issue 36): a
  // person ends it, not a wait.
  if (
    isSettled(state) ||
    nowMs >= deadlineMs ||
    state.phase === "held" ||
    state.phase === "awaiting_credential"
  )
    return true;
  if (state.phase === "retry_scheduled" || state.phase === "outcome_unknown")
    return state.dueAtMs === null || state.dueAtMs > deadlineMs;
  if (state.phase === "awaiting_approval" && !holdForPeople) {
    const expiresAtMs = plan.approval?.expiresAtMs ?? null;
    return expiresAtMs === null || expiresAtMs > deadlineMs;
  }
  return false;
}
