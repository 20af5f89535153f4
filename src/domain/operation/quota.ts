// The awaiting_quota arm (issue 34 item 4): before the first attempt (after the lock, when there is
// one) the operation asks its quotas for a slot; over the quota it waits here durably — `pending`,
// nothing sent, no attempt spent — until its slot, a free place under the cap (the quota object
// wakes it; an alarm asks again in case the notice is lost) or the end of the upstream's pause. A
// slot past the run's deadline ends it `budget_exhausted / deadline` with nothing sent.
import { QUOTA_RECHECK_MS, record, startAttempt, unchanged } from "./steps.ts";
import type { OperationEvent, OperationPlan, OperationState, Step, TraceEvent } from "./state.ts";

type Awaiting = Extract<OperationState, { phase: "awaiting_quota" }>;

export function onQuotaAnswered(
  state: OperationState,
  event: Extract<OperationEvent, { type: "quota_answered" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const { answer } = event;
  if (state.phase !== "awaiting_quota") {
    // Answered after it stopped waiting (held, or recorded with nothing sent): an ask in flight
    // may have taken a slot, a place or a queue position since it gave them back; given back again.
    const unsent =
      (state.phase === "held" && state.resume.phase === "unsent") ||
      (state.phase === "recorded" && state.attempts === 0);
    return unsent
      ? { ...unchanged(state), effects: [{ kind: "release_quota" }] }
      : unchanged(state);
  }
  if (answer.kind === "granted" && answer.atMs <= nowMs)
    return startAttempt(1, nowMs, nowMs, plan, null, [
      { type: "quota_granted", at_ms: nowMs, waited_ms: nowMs - state.requestedAtMs },
    ]);
  if (answer.kind === "deadline") {
    const message =
      "The run's deadline passes before this call's quota has a slot for it; it was not sent and did not take effect. Do not retry now; tell the user.";
    return record(0, { status: "budget_exhausted", code: "deadline", message }, "attempt", nowMs, [
      { type: "quota_deadline", at_ms: nowMs, slot_at_ms: answer.atMs },
    ]);
  }
  const wait =
    answer.kind === "granted"
      ? { dueAtMs: answer.atMs, reason: "rate" as const, long: false, detail: "a reserved slot" }
      : {
          dueAtMs: answer.untilMs,
          reason: answer.reason,
          long: answer.long,
          detail: answer.detail,
        };
  const next: Awaiting = { ...state, ...wait };
  const alarmAtMs = Math.min(wait.dueAtMs ?? Infinity, nowMs + QUOTA_RECHECK_MS);
  const same =
    state.dueAtMs === next.dueAtMs && state.reason === next.reason && state.long === next.long;
  return {
    state: next,
    effects: [{ kind: "set_alarm", atMs: wait.dueAtMs === null ? alarmAtMs : wait.dueAtMs }],
    trace: same
      ? []
      : [
          {
            type: "quota_waiting",
            at_ms: nowMs,
            until_ms: wait.dueAtMs,
            reason: wait.reason,
            long: wait.long,
            detail: wait.detail,
          },
        ],
    changed: !same,
  };
}

/** The wait's alarm (its slot, or a recheck): ask the quotas again. */
export const onQuotaAlarm = (state: Awaiting, nowMs: number): Step => ({
  ...unchanged(state),
  effects: [{ kind: "set_alarm", atMs: nowMs + QUOTA_RECHECK_MS }, { kind: "acquire_quota" }],
});
