// The target states every arm builds, as constructors: record an outcome, start an attempt or a
// lookup, wait for the lease, stay outcome_unknown, schedule a retry, change nothing. Arms never
// import each other, only this file and settle-late.ts (attempt → reconcile and back would be a
// circle), so every shared shape of a step is written once. Pure: the clock reading is an argument.
import type { UnknownCode } from "../classify.ts";
import { unknownEvent } from "../journal/trace-event.ts";
import { planRetry, type RetryPlan } from "../retry.ts";
import type {
  Ambiguity,
  Hold,
  OperationPlan,
  OperationState,
  Outcome,
  Resumable,
  Step,
  TraceEvent,
} from "./state.ts";

/** A watchdog fires this long after an attempt's own timeout if its result never got recorded. */
export const WATCHDOG_GRACE_MS = 5_000;
/**
 * While waiting for a resource lock, ask it again (a grant notice may have been lost) after 30 s,
 * then at doubling gaps up to 10 min: the grant notice is the normal path, and a queue behind an
 * operation that waits for a person may wait for days.
 */
export const LOCK_RECHECK_MS = 30_000;
export const LOCK_RECHECK_MAX_MS = 600_000;
/** A write queued behind a lock this long is reported once (`lock.waiting_long`, issue 18). */
export const LOCK_WAITING_LONG_MS = 60_000;

/** The first recheck after `nowMs` on the schedule that starts when the wait began (so it needs no stored counter). */
export function nextLockRecheckAtMs(requestedAtMs: number, nowMs: number): number {
  let atMs = requestedAtMs + LOCK_RECHECK_MS;
  let gapMs = 2 * LOCK_RECHECK_MS;
  while (atMs <= nowMs && gapMs < LOCK_RECHECK_MAX_MS) {
    atMs += gapMs;
    gapMs = Math.min(2 * gapMs, LOCK_RECHECK_MAX_MS);
  }
  if (atMs <= nowMs) atMs += Math.ceil((nowMs - atMs + 1) / gapMs) * gapMs;
  return atMs;
}

export const CANCELLED: Outcome = {
  status: "cancelled",
  code: "cancelled",
  message: "This call was cancelled before it took effect. Do not retry; tell the user.",
};

export const ambiguityOf = (state: { ambiguousAtMs: number; code: UnknownCode }): Ambiguity => ({
  atMs: state.ambiguousAtMs,
  code: state.code,
});

export const unchanged = (state: OperationState): Step => ({
  state,
  effects: [],
  trace: [],
  changed: false,
});

export const watchdogAt = (plan: OperationPlan, nowMs: number) =>
  nowMs + plan.timeoutMs + WATCHDOG_GRACE_MS;

export function record(
  attempts: number,
  outcome: Outcome,
  via: "attempt" | "reconcile" | "resolve",
  nowMs: number,
  trace: TraceEvent[],
  late = false,
): Step {
  return {
    state: { phase: "recorded", outcome, attempts, recordedAtMs: nowMs, via, late },
    effects: [{ kind: "clear_alarm" }],
    trace: [
      ...trace,
      {
        type: "recorded",
        at_ms: nowMs,
        status: outcome.status,
        ...(outcome.status === "succeeded" ? {} : { code: outcome.code }),
        via,
        ...(late ? { late } : {}),
      },
    ],
    changed: true,
  };
}

/** Only ever recorded when no attempt may have applied (or a trusted lookup proved none did). */
export function exhaustedOutcome(budget: "attempts" | "elapsed", reason: string): Outcome {
  const limit = budget === "attempts" ? "its attempt budget" : "its time budget";
  return {
    status: "budget_exhausted",
    code: "attempts_exhausted",
    message: `The tool kept failing (last attempt: ${reason}) and used up ${limit}. It did not take effect. Do not retry now; tell the user.`,
  };
}

/** Keep the tenant's approvals inbox in step with how a request ended. */
export const closeApproval = (
  step: Step,
  how: "approved" | "rejected" | "expired" | "cancelled",
): Step => ({ ...step, effects: [...step.effects, { kind: "inbox", state: how }] });

export function startAttempt(
  attempt: number,
  firstAttemptAtMs: number,
  nowMs: number,
  plan: OperationPlan,
  mayHaveApplied: Ambiguity | null,
  trace: TraceEvent[],
): Step {
  return {
    state: {
      phase: "executing",
      attempt,
      keyIssuedAtMs: firstAttemptAtMs,
      startedAtMs: nowMs,
      firstAttemptAtMs,
      cancelRequested: false,
      mayHaveApplied,
    },
    effects: [
      { kind: "set_alarm", atMs: watchdogAt(plan, nowMs) },
      { kind: "send_attempt", attempt },
    ],
    trace: [
      ...trace,
      { type: "attempt_started", at_ms: nowMs, attempt, idempotency_key: plan.idempotencyKey },
    ],
    changed: true,
  };
}

/** The first attempt, or, for a tool with a resource, the wait for its lease first (nothing sent until granted). */
export function beginExecution(plan: OperationPlan, nowMs: number, trace: TraceEvent[]): Step {
  if (!plan.resource) return beginAttempt(plan, nowMs, trace);
  return {
    state: { phase: "awaiting_lock", requestedAtMs: nowMs, blockedBy: null },
    effects: [
      { kind: "set_alarm", atMs: nextLockRecheckAtMs(nowMs, nowMs) },
      { kind: "acquire_lock" },
    ],
    trace: [...trace, { type: "awaiting_lock", at_ms: nowMs, resource: plan.resource }],
    changed: true,
  };
}

/** A wait for a place under a cap asks again this often (a lost wake notice costs at most this). */
export const QUOTA_RECHECK_MS = 30_000;

const FIRST_ASK = "asking its quota for a slot";

/** Not yet answered by its quotas: a slot granted now comes without a wait (quota-client.ts). */
export const firstAsk = (state: OperationState): boolean =>
  state.phase === "awaiting_quota" && state.dueAtMs === null && state.detail === FIRST_ASK;

/** The first attempt, or the wait for its quotas when the plan has any. */
export function beginAttempt(plan: OperationPlan, nowMs: number, trace: TraceEvent[]): Step {
  if (!plan.quotas?.length) return startAttempt(1, nowMs, nowMs, plan, null, trace);
  return {
    state: {
      phase: "awaiting_quota",
      requestedAtMs: nowMs,
      dueAtMs: null,
      reason: "rate",
      long: false,
      detail: FIRST_ASK,
    },
    effects: [{ kind: "set_alarm", atMs: nowMs + QUOTA_RECHECK_MS }, { kind: "acquire_quota" }],
    trace,
    changed: true,
  };
}

export function startLookup(
  state: Extract<OperationState, { phase: "outcome_unknown" }>,
  plan: OperationPlan,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  const lookups = state.lookups + 1;
  return {
    state: {
      phase: "reconciling",
      attempt: state.attempt,
      firstAttemptAtMs: state.firstAttemptAtMs,
      code: state.code,
      ambiguousAtMs: state.ambiguousAtMs,
      lookups,
      startedAtMs: nowMs,
      ifNotApplied: state.ifNotApplied,
      ...(state.settleUntilMs === undefined
        ? {}
        : { settleUntilMs: state.settleUntilMs, settleSlotMs: state.dueAtMs ?? nowMs }),
    },
    effects: [
      { kind: "set_alarm", atMs: watchdogAt(plan, nowMs) },
      { kind: "send_lookup", lookups },
    ],
    trace: [...trace, { type: "reconcile_started", at_ms: nowMs, lookups }],
    changed: true,
  };
}

/** The fields of an outcome_unknown entered from an attempt (no lookup asked yet). */
export const unknownFields = (
  from: { attempt: number; firstAttemptAtMs: number },
  ambiguity: Ambiguity,
  reason: string,
) => ({
  phase: "outcome_unknown" as const,
  attempt: from.attempt,
  firstAttemptAtMs: from.firstAttemptAtMs,
  code: ambiguity.code,
  ambiguousAtMs: ambiguity.atMs,
  lookups: 0,
  reason,
});

/**
 * No further automatic send is allowed (exhausted, denied, cancelled) but an attempt may have
 * applied: ask the status lookup if the tool has one (`ifNotApplied` is recorded only once it
 * proves nothing happened), else wait for a person.
 */
export function stayUnknown(
  from: { attempt: number; firstAttemptAtMs: number },
  ambiguity: Ambiguity,
  ifNotApplied: Outcome,
  reason: string,
  plan: OperationPlan,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  const base = { ...unknownFields(from, ambiguity, reason), ifNotApplied };
  const reconcile = plan.hasLookup ? "lookup" : "human";
  const unknown = unknownEvent(from.attempt, ambiguity.code, reconcile, nowMs);
  if (reconcile === "lookup")
    return startLookup({ ...base, reconcile, dueAtMs: null }, plan, nowMs, [...trace, unknown]);
  return {
    state: { ...base, reconcile, dueAtMs: null },
    effects: [{ kind: "clear_alarm" }],
    trace: [...trace, unknown],
    changed: true,
  };
}

/** The next automatic send of the same attempt's key, within the plan's attempt and time budgets. */
export const nextRetry = (
  plan: OperationPlan,
  from: { attempt: number; firstAttemptAtMs: number },
  nowMs: number,
  retryAfterMs: number | null,
): RetryPlan =>
  planRetry({
    policy: plan.retry,
    operationId: plan.operationId,
    attempt: from.attempt,
    firstAttemptAtMs: from.firstAttemptAtMs,
    nowMs,
    retryAfterMs,
  });

export const retryScheduledEvent = (
  attempt: number,
  retry: Extract<RetryPlan, { kind: "retry" }>,
  reason: string,
  nowMs: number,
): TraceEvent => ({
  type: "retry_scheduled",
  at_ms: nowMs,
  attempt,
  delay_ms: retry.delayMs,
  due_at_ms: retry.dueAtMs,
  reason,
});

/** Wait for the planned retry; `mayHaveApplied` carries an earlier ambiguity forward. */
export function scheduleRetry(
  from: { attempt: number; firstAttemptAtMs: number },
  retry: Extract<RetryPlan, { kind: "retry" }>,
  reason: string,
  mayHaveApplied: Ambiguity | null,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  return {
    state: {
      phase: "retry_scheduled",
      attempt: from.attempt,
      dueAtMs: retry.dueAtMs,
      firstAttemptAtMs: from.firstAttemptAtMs,
      reason,
      mayHaveApplied,
    },
    effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
    trace: [...trace, retryScheduledEvent(from.attempt, retry, reason, nowMs)],
    changed: true,
  };
}

/** A freeze's hold asks again by itself this long after it began (the tenant's wake is the normal path). */
export const HELD_RECHECK_MS = 5 * 60_000;

const heldEvent = (hold: Hold, nowMs: number): TraceEvent =>
  hold.kind === "freeze"
    ? { type: "held", at_ms: nowMs, freeze_id: hold.freezeId, reason: hold.reason }
    : { type: "paused", at_ms: nowMs, by: hold.by };

/** Enter (or stay in) `held`: a freeze rechecks by itself on its alarm; a pause waits for a person. */
export function holdStep(
  hold: Hold,
  resume: Resumable,
  nowMs: number,
  trace: TraceEvent[],
  effects: Step["effects"] = [],
): Step {
  const recheckAtMs = hold.kind === "freeze" ? nowMs + HELD_RECHECK_MS : null;
  return {
    state: { phase: "held", hold, resume, heldAtMs: nowMs, recheckAtMs },
    effects: [
      ...effects,
      recheckAtMs === null ? { kind: "clear_alarm" } : { kind: "set_alarm", atMs: recheckAtMs },
    ],
    trace: [...trace, heldEvent(hold, nowMs)],
    changed: true,
  };
}
