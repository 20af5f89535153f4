// The awaiting_lock arm: the lease on plan.resource is asked for before the first attempt and held
// until the outcome is settled (transition gives it back on every entry into `recorded`). Nothing
// is sent until the lock grants it; a lost grant notice is covered by asking again on an alarm.
// The fencing token the grant carries goes to the upstream with each attempt (the shell's part).
import { nextLockRecheckAtMs, startAttempt, unchanged } from "./steps.ts";
import type { OperationEvent, OperationPlan, OperationState, Step } from "./state.ts";

export function onLockGranted(
  state: OperationState,
  event: Extract<OperationEvent, { type: "lock_granted" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  // Granted after this operation already ended (cancelled while queued): give it straight back.
  if (state.phase === "recorded")
    return { ...unchanged(state), effects: [{ kind: "release_lock" }] };
  if (state.phase !== "awaiting_lock") return unchanged(state);
  return startAttempt(1, nowMs, nowMs, plan, null, [
    {
      type: "lock_granted",
      at_ms: nowMs,
      resource: plan.resource,
      fencing_token: event.fencingToken,
    },
  ]);
}

export function onLockQueued(
  state: OperationState,
  event: Extract<OperationEvent, { type: "lock_queued" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (state.phase !== "awaiting_lock" || state.blockedBy === event.blockedBy)
    return unchanged(state);
  return {
    state: { ...state, blockedBy: event.blockedBy },
    effects: [],
    trace: [
      {
        type: "lock_queued",
        at_ms: nowMs,
        resource: plan.resource,
        blocked_by: event.blockedBy,
      },
    ],
    changed: true,
  };
}

/** The recheck alarm: ask the lock again (idempotent) and re-arm on the backing-off schedule. */
export const onLockAlarm = (
  state: Extract<OperationState, { phase: "awaiting_lock" }>,
  nowMs: number,
): Step => ({
  ...unchanged(state),
  effects: [
    { kind: "set_alarm", atMs: nextLockRecheckAtMs(state.requestedAtMs, nowMs) },
    { kind: "acquire_lock" },
  ],
});
