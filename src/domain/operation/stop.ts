// Every way an operation is stopped from outside: the run's denial, a cancel, and the host retry
// budget's deferral (which may run out the time budget). The honesty rule for each: only work not
// yet sent is refused outright; once an attempt may have applied, a stop only forbids further
// sends and the operation stays outcome_unknown until a lookup or a person settles it.
import { planDeferral } from "../retry-deferral.ts";
import { fitsWindow } from "../retry-late.ts";
import {
  ambiguityOf,
  CANCELLED,
  closeApproval,
  exhaustedOutcome,
  record,
  stayUnknown,
  unchanged,
} from "./steps.ts";
import { settleLate, settleWindowEnded } from "./settle-late.ts";
import { asScheduledRetry } from "./credential.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  Outcome,
  Step,
  TraceEvent,
} from "./state.ts";

/**
 * Only work not yet sent can be refused outright. Once an attempt may have applied, the refusal
 * only stops further sends: the operation stays outcome_unknown until a lookup or a person settles it.
 */
export function onDenied(
  state: OperationState,
  event: Extract<OperationEvent, { type: "denied" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const trace: TraceEvent = { type: "denied", at_ms: nowMs, code: event.code };
  const denial: Outcome = { status: event.status, code: event.code, message: event.message };
  if (state.phase === "awaiting_approval")
    return closeApproval(record(0, denial, "attempt", nowMs, [trace]), "cancelled");
  if (state.phase === "awaiting_lock" || state.phase === "awaiting_quota")
    return record(0, denial, "attempt", nowMs, [trace]);
  // Waiting for the user to connect (issue 36): decided as the retry it gave back.
  if (state.phase === "awaiting_credential")
    return relabel(onDenied(asScheduledRetry(state), event, plan, nowMs), state.phase);
  if (state.phase === "retry_scheduled") {
    if (!state.mayHaveApplied) return record(state.attempt, denial, "attempt", nowMs, [trace]);
    return stayUnknown(
      state,
      state.mayHaveApplied,
      denial,
      `denied: ${event.message}`,
      plan,
      nowMs,
      [trace],
    );
  }
  if (state.phase === "outcome_unknown" && state.reconcile === "resend")
    return stayUnknown(state, ambiguityOf(state), denial, `denied: ${event.message}`, plan, nowMs, [
      trace,
    ]);
  return unchanged(state);
}

export function onCancel(
  state: OperationState,
  by: string,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const trace: TraceEvent = { type: "cancel_requested", at_ms: nowMs, by, phase: state.phase };
  switch (state.phase) {
    case "awaiting_approval":
      return closeApproval(record(0, CANCELLED, "attempt", nowMs, [trace]), "cancelled");
    case "awaiting_lock":
    case "awaiting_quota":
      return record(0, CANCELLED, "attempt", nowMs, [trace]);
    case "awaiting_credential":
      return relabel(onCancel(asScheduledRetry(state), by, plan, nowMs), state.phase);
    case "retry_scheduled":
      if (!state.mayHaveApplied) return record(state.attempt, CANCELLED, "attempt", nowMs, [trace]);
      return stayUnknown(
        state,
        state.mayHaveApplied,
        CANCELLED,
        "cancelled while the outcome was unknown",
        plan,
        nowMs,
        [trace],
      );
    case "executing":
      if (state.cancelRequested) return unchanged(state);
      return {
        state: { ...state, cancelRequested: true },
        effects: plan.safety === "read" ? [{ kind: "abort_attempt" }] : [],
        trace: [trace],
        changed: true,
      };
    case "outcome_unknown":
      // Resending after a cancel could perform the effect now; a status lookup cannot.
      if (state.reconcile === "resend")
        return stayUnknown(
          state,
          ambiguityOf(state),
          CANCELLED,
          "cancelled while the outcome was unknown",
          plan,
          nowMs,
          [trace],
        );
    // falls through: a lookup or a person still settles it, but "not applied" now means cancelled
    // (and a person may no longer resend it).
    case "reconciling":
      if (state.ifNotApplied?.status === "cancelled") return unchanged(state);
      return {
        state: { ...state, ifNotApplied: CANCELLED },
        effects: [],
        trace: [trace],
        changed: true,
      };
    // transition.ts decides a held operation's cancel as where it waits (onHeld).
    case "held":
    case "recorded":
      return unchanged(state);
  }
}

/**
 * Only an automatic send waits for the budget (a scheduled retry, or a keyed resend after an unknown
 * outcome); the envelope is unchanged. A deferral past the elapsed budget is exhaustion, with the
 * same honesty rule as any other: once an attempt may have applied, never "did not take effect".
 */
export function onRetryDeferred(
  state: OperationState,
  event: Extract<OperationEvent, { type: "retry_deferred" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (
    state.phase !== "retry_scheduled" &&
    !(state.phase === "outcome_unknown" && state.reconcile === "resend")
  )
    return unchanged(state);
  // A late resend (retry-late.ts) is deferred, never dropped, within the key's window instead of
  // the elapsed budget (long spent by then); past the window a person decides.
  const settleUntilMs = state.phase === "outcome_unknown" ? state.settleUntilMs : undefined;
  // The upstream's own pause of its origin (issue 34): its wait is the upstream's, not a failure,
  // so it never runs out the elapsed budget (the run's deadline still stops it before a send).
  const paused = event.reason === "rate_limited";
  const deferral = planDeferral({
    policy:
      settleUntilMs === undefined && !paused
        ? plan.retry
        : { ...plan.retry, maxElapsedMs: Number.POSITIVE_INFINITY },
    operationId: plan.operationId,
    attempt: state.attempt,
    firstAttemptAtMs: state.firstAttemptAtMs,
    untilMs: event.untilMs,
    nowMs,
  });
  const deferred: TraceEvent = {
    type: "retry_deferred",
    at_ms: nowMs,
    attempt: state.attempt,
    reason: event.reason,
    detail: event.detail,
    ...(deferral.kind === "defer" ? { due_at_ms: deferral.dueAtMs } : { exhausted: "elapsed" }),
  };
  if (
    state.phase === "outcome_unknown" &&
    settleUntilMs !== undefined &&
    (deferral.kind !== "defer" || !fitsWindow(deferral.dueAtMs, plan.timeoutMs, settleUntilMs))
  ) {
    const ended = settleWindowEnded(state, settleUntilMs, nowMs);
    return { ...ended, trace: [{ ...deferred, exhausted: "window" }, ...ended.trace] };
  }
  if (deferral.kind === "defer")
    return {
      state:
        state.phase === "retry_scheduled"
          ? {
              ...state,
              dueAtMs: deferral.dueAtMs,
              ...(paused ? { paused: { untilMs: event.untilMs, long: event.long ?? false } } : {}),
            }
          : { ...state, dueAtMs: deferral.dueAtMs },
      effects: [{ kind: "set_alarm", atMs: deferral.dueAtMs }],
      trace: [deferred],
      changed: true,
    };
  const ambiguity = state.phase === "retry_scheduled" ? state.mayHaveApplied : ambiguityOf(state);
  const outcome = exhaustedOutcome("elapsed", state.reason);
  return ambiguity
    ? settleLate(state, ambiguity, outcome, state.reason, plan, nowMs, [deferred])
    : record(state.attempt, outcome, "attempt", nowMs, [deferred]);
}

/** A step decided as another phase, its cancel event naming the phase it was really in. */
const relabel = (step: Step, phase: OperationState["phase"]): Step => ({
  ...step,
  trace: step.trace.map((event) =>
    event.type === "cancel_requested" ? { ...event, phase } : event,
  ),
});
