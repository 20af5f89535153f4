// Settling an outcome_unknown: the status lookup's answer, and a person's verdict (resolve).
// A lookup's "not found" is trusted only once the abandoned request cannot still commit (its
// timeout plus the settle window); only then is `ifNotApplied` recorded or the key sent again.
// A person may resend only a keyed tool's call, and never a cancelled one.
import type { LookupObservation } from "../observation.ts";
import { nextDelayMs } from "../retry.ts";
import { err, ok, type Result } from "../result.ts";
import { planLateTry } from "../retry-late.ts";
import { exhaustedOutcome, nextRetry, record, scheduleRetry, startAttempt } from "./steps.ts";
import { settleEndedEvent, settleScheduledEvent } from "../journal/trace-event.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  Step,
  TraceEvent,
  TransitionError,
} from "./state.ts";

export function afterLookup(
  state: Extract<OperationState, { phase: "reconciling" }>,
  observed: LookupObservation,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const finished: TraceEvent = {
    type: "reconcile_finished",
    at_ms: nowMs,
    lookups: state.lookups,
    found: observed.kind,
  };
  const base = {
    phase: "outcome_unknown" as const,
    attempt: state.attempt,
    firstAttemptAtMs: state.firstAttemptAtMs,
    code: state.code,
    ambiguousAtMs: state.ambiguousAtMs,
    lookups: state.lookups,
    ifNotApplied: state.ifNotApplied,
    ...(state.settleUntilMs === undefined ? {} : { settleUntilMs: state.settleUntilMs }),
  };
  switch (observed.kind) {
    case "found":
      return record(
        state.attempt,
        { status: "succeeded", result: observed.result },
        "reconcile",
        nowMs,
        [finished],
      );
    case "not_found": {
      // A 404 proves only "not applied yet": the abandoned request may still commit. It is
      // trusted once that request cannot still be running (its timeout) plus the settle margin.
      const trustedFromMs = state.ambiguousAtMs + plan.timeoutMs + plan.settleMs;
      if (nowMs < trustedFromMs) {
        return {
          state: {
            ...base,
            reconcile: "lookup",
            dueAtMs: trustedFromMs,
            reason: "the status lookup found nothing yet; asking again after the settle window",
          },
          effects: [{ kind: "set_alarm", atMs: trustedFromMs }],
          trace: [finished, { type: "reconcile_deferred", at_ms: nowMs, until_ms: trustedFromMs }],
          changed: true,
        };
      }
      if (state.ifNotApplied)
        return record(state.attempt, state.ifNotApplied, "reconcile", nowMs, [finished]);
      // Definitely not applied: sending again with the same key is safe, within the attempt budget.
      const retry = nextRetry(plan, state, nowMs, null);
      if (retry.kind === "exhausted")
        return record(
          state.attempt,
          exhaustedOutcome(retry.budget, "the status lookup shows the effect did not happen"),
          "attempt",
          nowMs,
          [finished],
        );
      return scheduleRetry(state, retry, "not applied upstream", null, nowMs, [finished]);
    }
    case "inconclusive": {
      if (state.lookups >= plan.retry.maxAttempts) {
        // Its lookups ran out: keep looking up on the late schedule (retry-late.ts) while the
        // window lasts; then, or for a plan frozen without it, a person decides.
        const late = plan.lateSettle
          ? planLateTry({
              settle: plan.lateSettle,
              firstAttemptAtMs: state.firstAttemptAtMs,
              timeoutMs: plan.timeoutMs,
              nowMs: Math.max(nowMs, state.settleSlotMs ?? nowMs),
            })
          : null;
        if (late?.kind === "try")
          return {
            state: {
              ...base,
              reconcile: "lookup",
              dueAtMs: late.atMs,
              reason: observed.detail,
              settleUntilMs: late.untilMs,
            },
            effects: [{ kind: "set_alarm", atMs: late.atMs }],
            trace: [finished, settleScheduledEvent(late.atMs, late.untilMs, nowMs)],
            changed: true,
          };
        const { settleUntilMs: _ended, ...rest } = base;
        return {
          state: { ...rest, reconcile: "human", dueAtMs: null, reason: observed.detail },
          effects: [{ kind: "clear_alarm" }],
          trace: [
            finished,
            ...(late ? [settleEndedEvent(late.untilMs, nowMs)] : []),
            { type: "outcome_unknown", at_ms: nowMs, code: state.code, reconcile: "human" },
          ],
          changed: true,
        };
      }
      const dueAtMs =
        nowMs + nextDelayMs(plan.retry, `${plan.operationId}:lookup`, state.lookups, null);
      return {
        state: { ...base, reconcile: "lookup", dueAtMs, reason: observed.detail },
        effects: [{ kind: "set_alarm", atMs: dueAtMs }],
        trace: [finished],
        changed: true,
      };
    }
  }
}

/** A person's verdict on an outcome_unknown: it happened, it did not, or (keyed only) send it again. */
export function onResolve(
  state: OperationState,
  event: Extract<OperationEvent, { type: "resolve" }>,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (state.phase !== "outcome_unknown")
    return err({ code: "not_outcome_unknown", phase: state.phase });
  const resolved: TraceEvent = {
    type: "resolved",
    at_ms: nowMs,
    outcome: event.outcome,
    reason: event.reason,
    by: event.by,
  };
  switch (event.outcome) {
    case "succeeded":
      return ok(
        record(
          state.attempt,
          { status: "succeeded", result: event.result ?? null },
          "resolve",
          nowMs,
          [resolved],
        ),
      );
    case "failed":
      return ok(
        record(
          state.attempt,
          {
            status: "failed",
            code: "permanent_failure",
            message: `A person confirmed this did not happen: ${event.reason}. Do not retry; tell the user.`,
          },
          "resolve",
          nowMs,
          [resolved],
        ),
      );
    case "resend":
      // Only the same key makes a repeat harmless; without one a resend could apply it twice.
      if (plan.safety !== "keyed")
        return err({
          code: "resend_not_allowed",
          detail:
            "only a tool with an idempotency key can be sent again safely; resolve it as succeeded or failed",
        });
      if (state.ifNotApplied?.status === "cancelled")
        return err({
          code: "resend_not_allowed",
          detail: "the call was cancelled; resolve it as succeeded or failed",
        });
      return ok(
        startAttempt(
          state.attempt + 1,
          state.firstAttemptAtMs,
          nowMs,
          plan,
          { atMs: state.ambiguousAtMs, code: state.code },
          [resolved],
        ),
      );
  }
}
