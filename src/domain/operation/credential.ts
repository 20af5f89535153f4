// The awaiting_credential arm (issue 36): a send that found no usable token of the run's end user
// (never connected, `invalid_grant`, a scope missing) sent nothing — a definite not-sent — and
// waits here durably, `pending` with code `credential_required` and the connect link, until they
// connect (the callback wakes it) or a recheck finds the connection; then the same attempt is sent
// under the same idempotency key. A cancel or denial meanwhile is decided as a scheduled retry
// would be (stop.ts): an earlier ambiguous attempt keeps its honesty.
import { startAttempt, unchanged } from "./steps.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  RetryScheduled,
  Step,
} from "./state.ts";

type Awaiting = Extract<OperationState, { phase: "awaiting_credential" }>;

/** A lost wake never strands a call: it asks its credential again this often. */
export const CREDENTIAL_RECHECK_MS = 5 * 60_000;

export function onCredentialRequired(
  state: OperationState,
  event: Extract<OperationEvent, { type: "credential_required" }>,
  nowMs: number,
): Step {
  // Only the attempt in flight that asked: a late or repeated answer changes nothing.
  if (state.phase !== "executing" || state.attempt !== event.attempt) return unchanged(state);
  const recheckAtMs = nowMs + CREDENTIAL_RECHECK_MS;
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

/** Connected: the attempt it gave back is sent now (its number and key unchanged). */
export function onCredentialReady(state: OperationState, plan: OperationPlan, nowMs: number): Step {
  if (state.phase !== "awaiting_credential") return unchanged(state);
  return startAttempt(state.attempt, state.firstAttemptAtMs, nowMs, plan, state.mayHaveApplied, [
    { type: "credential_ready", at_ms: nowMs, waited_ms: nowMs - state.requestedAtMs },
  ]);
}

/** The recheck found no connection yet (the shell asked first, alarm.ts): ask again later. */
export function onCredentialAlarm(state: Awaiting, nowMs: number): Step {
  const recheckAtMs = nowMs + CREDENTIAL_RECHECK_MS;
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
