// The awaiting_credential arm (issue 36): a send that found no usable token of the run's end user
// (never connected, `invalid_grant`, a scope missing) sent nothing — a definite not-sent — and
// waits here durably, `pending` with code `credential_required` and the connect link, until they
// connect (the callback wakes it) or a recheck finds the connection; then the same attempt is sent
// under the same idempotency key. A cancel or denial meanwhile is decided as a scheduled retry
// would be (stop.ts): an earlier ambiguous attempt keeps its honesty. The wait ends: at an
// approval's default expiry or the run's deadline, whichever comes first, as a definite not-sent.
import { DEFAULT_APPROVAL_TTL_MS } from "./approval.ts";
import { record, startAttempt, stayUnknown, unchanged } from "./steps.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  Outcome,
  RetryScheduled,
  Step,
} from "./state.ts";

type Awaiting = Extract<OperationState, { phase: "awaiting_credential" }>;

/** A lost wake never strands a call: it asks its credential again this often. */
export const CREDENTIAL_RECHECK_MS = 5 * 60_000;

/**
 * How long a call waits for its user to connect: the bound a person's approval has by default
 * (approval.ts), cut to the run's deadline. A model mid-task is not kept pending for ever.
 */
export const CREDENTIAL_WAIT_MS = DEFAULT_APPROVAL_TTL_MS;

const recheckAt = (nowMs: number, expiresAtMs: number) =>
  Math.min(nowMs + CREDENTIAL_RECHECK_MS, expiresAtMs);

export function onCredentialRequired(
  state: OperationState,
  event: Extract<OperationEvent, { type: "credential_required" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  // Only the attempt in flight that asked: a late or repeated answer changes nothing.
  if (state.phase !== "executing" || state.attempt !== event.attempt) return unchanged(state);
  const expiresAtMs = Math.min(nowMs + CREDENTIAL_WAIT_MS, plan.deadlineAtMs ?? Infinity);
  const recheckAtMs = recheckAt(nowMs, expiresAtMs);
  return {
    state: {
      phase: "awaiting_credential",
      attempt: state.attempt,
      firstAttemptAtMs: state.firstAttemptAtMs,
      mayHaveApplied: state.mayHaveApplied,
      requestedAtMs: nowMs,
      provider: event.provider,
      reason: event.reason,
      connectUrl: event.connectUrl,
      recheckAtMs,
      expiresAtMs,
    },
    effects: [{ kind: "set_alarm", atMs: recheckAtMs }],
    trace: [
      {
        type: "credential_required",
        at_ms: nowMs,
        attempt: event.attempt,
        provider: event.provider,
        reason: event.reason,
      },
    ],
    changed: true,
  };
}

/** Connected: the attempt it gave back is sent now (its number and key unchanged), if still in time. */
export function onCredentialReady(state: OperationState, plan: OperationPlan, nowMs: number): Step {
  if (state.phase !== "awaiting_credential") return unchanged(state);
  if (nowMs >= state.expiresAtMs) return expireCredential(state, plan, nowMs);
  return startAttempt(state.attempt, state.firstAttemptAtMs, nowMs, plan, state.mayHaveApplied, [
    { type: "credential_ready", at_ms: nowMs, waited_ms: nowMs - state.requestedAtMs },
  ]);
}

/** The recheck found no connection yet (the shell asked first, alarm.ts): ask again later, or end. */
export function onCredentialAlarm(state: Awaiting, plan: OperationPlan, nowMs: number): Step {
  // Alarms are at-least-once and may fire early after a restart: expire only when due.
  if (nowMs >= state.expiresAtMs) return expireCredential(state, plan, nowMs);
  const recheckAtMs = recheckAt(nowMs, state.expiresAtMs);
  return {
    state: { ...state, recheckAtMs },
    effects: [{ kind: "set_alarm", atMs: recheckAtMs }],
    trace: [],
    changed: true,
  };
}

/**
 * How a cancel, denial, hold or pause sees a waiting call: a retry not yet due (the honesty rule is
 * stop.ts's), after the attempts actually sent — the one it gave back is the retry's next.
 */
export const asScheduledRetry = (state: Awaiting): RetryScheduled => ({
  phase: "retry_scheduled",
  attempt: state.attempt - 1,
  dueAtMs: state.recheckAtMs,
  firstAttemptAtMs: state.firstAttemptAtMs,
  reason: `waiting for the user to connect ${state.provider}`,
  mayHaveApplied: state.mayHaveApplied,
});

/**
 * Nobody connected in time: a definite not-sent (`rejected`, code `credential_required`), with the
 * attempts actually sent. After an earlier ambiguous attempt it stays unknown, as any stop would.
 */
function expireCredential(state: Awaiting, plan: OperationPlan, nowMs: number): Step {
  const waitedMin = Math.round((nowMs - state.requestedAtMs) / 60_000);
  const outcome: Outcome = {
    status: "rejected",
    code: "credential_required",
    message: `The user did not connect ${state.provider} in time (waited ${waitedMin} min), so this call was not sent and did not take effect. Do not retry now; tell the user to connect their account, then ask again.`,
  };
  const trace = [
    {
      type: "credential_expired" as const,
      at_ms: nowMs,
      provider: state.provider,
      waited_ms: nowMs - state.requestedAtMs,
    },
  ];
  const retry = asScheduledRetry(state);
  return state.mayHaveApplied
    ? stayUnknown(retry, state.mayHaveApplied, outcome, outcome.message, plan, nowMs, trace)
    : record(retry.attempt, outcome, "attempt", nowMs, trace);
}
