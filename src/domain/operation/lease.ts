// The awaiting_lock arm: the lease on plan.resource is asked for before the first attempt and held
// until the outcome is settled (transition gives it back on every entry into `recorded`). Nothing
// is sent until the lock grants it; a lost grant notice is covered by asking again on an alarm.
// The fencing token the grant carries goes to the upstream with each attempt (the shell's part).
import { beginAttempt, LOCK_WAITING_LONG_MS, nextLockRecheckAtMs, unchanged } from "./steps.ts";
import type { OperationEvent, OperationPlan, OperationState, Step } from "./state.ts";

export function onLockGranted(
  state: OperationState,
  event: Extract<OperationEvent, { type: "lock_granted" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  // Granted after this operation already ended (cancelled while queued): give it straight back.
  // Or while held before its first send (issue 34): a frozen write keeps nobody waiting.
  if (state.phase === "recorded" || (state.phase === "held" && state.resume.phase === "unsent"))
    return { ...unchanged(state), effects: [{ kind: "release_lock" }] };
  if (state.phase !== "awaiting_lock") return unchanged(state);
  return beginAttempt(plan, nowMs, [
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

/**
 * The recheck alarm: ask the lock again (idempotent) and re-arm on the backing-off schedule. The
 * first recheck that finds the wait at or past LOCK_WAITING_LONG_MS also records it (trace
 * `lock_waiting_long`, reported as the `lock.waiting_long` event) and marks the state, so it is
 * reported once per operation however many rechecks follow.
 */
export const onLockAlarm = (
  state: Extract<OperationState, { phase: "awaiting_lock" }>,
  plan: OperationPlan,
  nowMs: number,
): Step => {
  const effects: Step["effects"] = [
    { kind: "set_alarm", atMs: nextLockRecheckAtMs(state.requestedAtMs, nowMs) },
    { kind: "acquire_lock" },
  ];
  const waitedMs = nowMs - state.requestedAtMs;
  if (state.waitedLong || waitedMs < LOCK_WAITING_LONG_MS) return { ...unchanged(state), effects };
  return {
    state: { ...state, waitedLong: true },
    effects,
    trace: [
      {
        type: "lock_waiting_long",
        at_ms: nowMs,
        resource: plan.resource,
        blocked_by: state.blockedBy,
        waited_ms: waitedMs,
      },
    ],
    changed: true,
  };
};
