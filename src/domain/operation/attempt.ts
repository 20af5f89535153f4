// One attempt's observation → the next state: record it, retry it, or hold it as outcome_unknown,
// as classify.ts decides. The honesty rule lives here first: once this or an earlier attempt may
// have applied (`mayHaveApplied`), exhaustion and a late cancel stay outcome_unknown, never
// "did not take effect". The caller (transition) has checked it is the attempt in flight.
import { classify } from "../classify.ts";
import type { Observation } from "../observation.ts";
import { unknownEvent, type ObservedSummary, type TraceOf } from "../journal/trace-event.ts";
import {
  CANCELLED,
  exhaustedOutcome,
  nextRetry,
  record,
  retryScheduledEvent,
  scheduleRetry,
  startLookup,
  stayUnknown,
  unknownFields,
} from "./steps.ts";
import { settleLate } from "./settle-late.ts";
import { paidDecision } from "./payment.ts";
import type {
  Ambiguity,
  Exchange,
  OperationPlan,
  OperationState,
  Outcome,
  Step,
  TraceEvent,
} from "./state.ts";

export function afterAttempt(
  state: Extract<OperationState, { phase: "executing" }>,
  observed: Observation,
  plan: OperationPlan,
  nowMs: number,
  exchange?: Exchange,
): Step {
  const finished = attemptFinishedEvent(state.attempt, observed, exchange, nowMs);
  const decision = paidDecision(plan, classify(plan.safety, observed));
  const late = state.cancelRequested;
  switch (decision.kind) {
    case "succeed":
      return record(
        state.attempt,
        { status: "succeeded", result: decision.result },
        "attempt",
        nowMs,
        [finished],
        late,
      );
    case "fail": {
      const outcome: Outcome = {
        status: decision.status,
        code: decision.code,
        message: decision.message,
      };
      // This answer says nothing about an earlier attempt that may have applied (e.g. the tool
      // no longer compiles, or the credentials were refused before the key was looked at).
      if (state.mayHaveApplied && !decision.coversEarlierAttempts)
        return stayUnknown(state, state.mayHaveApplied, outcome, decision.message, plan, nowMs, [
          finished,
        ]);
      return record(state.attempt, outcome, "attempt", nowMs, [finished], late);
    }
    case "retry": {
      const ambiguity = decision.mayHaveApplied
        ? { atMs: state.startedAtMs, code: decision.mayHaveApplied }
        : state.mayHaveApplied;
      if (late)
        return ambiguity
          ? stayUnknown(
              state,
              ambiguity,
              CANCELLED,
              "cancelled while the outcome was unknown",
              plan,
              nowMs,
              [finished],
            )
          : record(state.attempt, CANCELLED, "attempt", nowMs, [finished]);
      const retry = nextRetry(plan, state, nowMs, decision.retryAfterMs);
      if (retry.kind === "exhausted") {
        const outcome = exhaustedOutcome(retry.budget, decision.reason);
        return ambiguity
          ? settleLate(state, ambiguity, outcome, decision.reason, plan, nowMs, [finished])
          : record(state.attempt, outcome, "attempt", nowMs, [finished]);
      }
      return scheduleRetry(state, retry, decision.reason, ambiguity, nowMs, [finished]);
    }
    case "unknown": {
      const ambiguity: Ambiguity = { atMs: state.startedAtMs, code: decision.code };
      const base = unknownFields(state, ambiguity, decision.reason);
      const unknown = unknownEvent(state.attempt, decision.code, decision.reconcile, nowMs);
      if (late)
        return stayUnknown(
          state,
          ambiguity,
          CANCELLED,
          "cancelled while the outcome was unknown",
          plan,
          nowMs,
          [finished],
        );
      if (decision.reconcile === "lookup" || (decision.reconcile === "human" && plan.hasLookup)) {
        return startLookup(
          { ...base, reconcile: "lookup", dueAtMs: null, ifNotApplied: null },
          plan,
          nowMs,
          [finished, { ...unknown, reconcile: "lookup" }],
        );
      }
      if (decision.reconcile === "resend") {
        const retry = nextRetry(plan, state, nowMs, null);
        if (retry.kind === "exhausted")
          return settleLate(
            state,
            ambiguity,
            exhaustedOutcome(retry.budget, decision.reason),
            decision.reason,
            plan,
            nowMs,
            [finished],
          );
        return {
          state: { ...base, reconcile: "resend", dueAtMs: retry.dueAtMs, ifNotApplied: null },
          effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
          trace: [
            finished,
            unknown,
            retryScheduledEvent(
              state.attempt,
              retry,
              "resend with the same idempotency key",
              nowMs,
            ),
          ],
          changed: true,
        };
      }
      // No automatic way left to learn the truth: the operation waits for a person (POST .../resolve).
      return {
        state: { ...base, reconcile: "human", dueAtMs: null, ifNotApplied: null },
        effects: [{ kind: "clear_alarm" }],
        trace: [finished, unknown],
        changed: true,
      };
    }
  }
}

/**
 * The attempt's trace event: what was observed, and (when a request was made) `request`, the request
 * as sent with its secrets by name, and `response`, the status, the headers worth keeping and an
 * error body's start. domain/trace.ts then redacts them and keeps the body only by opt-in.
 */
export function attemptFinishedEvent(
  attempt: number,
  observed: Observation,
  exchange: Exchange | undefined,
  nowMs: number,
): TraceOf<"attempt_finished"> {
  return {
    type: "attempt_finished",
    at_ms: nowMs,
    attempt,
    observed: summarize(observed),
    ...(exchange?.request ? { request: exchange.request } : {}),
    ...(exchange?.response ? { response: exchange.response } : {}),
  };
}

function summarize(observed: Observation): ObservedSummary {
  switch (observed.kind) {
    case "ok":
      return { kind: "ok", ...(observed.status === undefined ? {} : { status: observed.status }) };
    case "http_error":
      return { kind: "http_error", status: observed.status, retry_after_ms: observed.retryAfterMs };
    case "crash":
      return { kind: "crash" };
    case "body_lost":
      return { kind: "body_lost", timed_out: observed.timedOut, detail: observed.detail };
    case "invalid_output":
    case "timeout":
    case "connection_lost":
    case "config_error":
    case "not_sent":
      return { kind: observed.kind, detail: observed.detail };
  }
}
