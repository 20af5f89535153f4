// The operation state machine's one entry: given the stored state, one event and the clock reading,
// return the next state, the effects the shell must perform (send, set alarm) and the trace events to
// append. Invariants: the idempotency key never changes; a result is applied only to the attempt that
// is in flight (compare-and-set on attempt number); `recorded` is terminal and absorbs every later
// event; once any attempt may have applied, no outcome saying it did not is recorded without proof.
import { traceEvent } from "../journal/trace-event.ts";
import { err, ok, type Result } from "../result.ts";
import { unverifiedTraceDetail } from "../verification.ts";
import { onApprovalAlarm, onDecide, onEdit, onPreview, requestApproval } from "./approval.ts";
import { afterAttempt } from "./attempt.ts";
import { onGrantLapsed } from "./grant.ts";
import { heldAs, onHold, onPause, onRelease, onRetryNow, sendDue } from "./hold.ts";
import { onLockAlarm, onLockGranted, onLockQueued } from "./lease.ts";
import { onPaymentRequired, onPaymentSigned, onPaymentStopped } from "./payment.ts";
import { afterLookup, onResolve } from "./reconcile.ts";
import { onQuotaAlarm, onQuotaAnswered } from "./quota.ts";
import { onCredentialAlarm, onCredentialReady, onCredentialRequired } from "./credential.ts";
import {
  beginExecution,
  CANCELLED,
  HELD_RECHECK_MS,
  holdStep,
  record,
  unchanged,
  watchdogAt,
} from "./steps.ts";
import { onCancel, onDenied, onRetryDeferred } from "./stop.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  Step,
  TraceEvent,
  TransitionError,
} from "./state.ts";
import { tookEffect } from "./state.ts";

/**
 * The lease on plan.resource is held from the first attempt until the outcome is settled: every
 * transition into `recorded` gives it back, wherever it comes from (an outcome_unknown keeps it).
 */
export function transition(
  state: OperationState | null,
  event: OperationEvent,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  const step = decideStep(state, event, plan, nowMs);
  if (!step.ok || !step.value.changed) return step;
  const effects = [...step.value.effects];
  if (
    plan.resource &&
    state !== null &&
    step.value.state.phase === "recorded" &&
    state.phase !== "recorded"
  )
    effects.push({ kind: "release_lock" });
  // A wait for quotas that ends with nothing sent (cancelled, denied, past the deadline) leaves
  // their queues at once, so no one waits behind it (an attempt gives its place back itself).
  if (state?.phase === "awaiting_quota" && step.value.state.phase === "recorded")
    effects.push({ kind: "release_quota" });
  // Reservations of limits across runs are kept unless the outcome recorded says nothing applied
  // (every recorded non-success but failed/invalid_output: it took effect, its answer unreadable).
  const recorded = step.value.state.phase === "recorded" ? step.value.state.outcome : null;
  if (
    plan.limits?.length &&
    recorded &&
    !tookEffect(recorded.status, "code" in recorded ? recorded.code : null) &&
    state?.phase !== "recorded"
  )
    effects.push({ kind: "release_limits" });
  const listedNow = listing(step.value.state);
  if (listedNow !== (state === null ? "no" : listing(state)))
    effects.push({
      kind: "needs_person",
      open: listedNow !== "no",
      person: listedNow === "person",
    });
  return ok({ ...step.value, effects });
}

/**
 * How the tenant's unknown-outcomes list shows it: waiting for a person's verdict (POST …/resolve),
 * settling by itself (retry-late.ts; a person may still decide), or not at all.
 */
const listing = (state: OperationState): "person" | "settling" | "no" =>
  // A held resend is still an unknown outcome settling by itself: it stays listed.
  state.phase === "held"
    ? state.resume.phase === "outcome_unknown"
      ? listing(state.resume)
      : "no"
    : state.phase === "outcome_unknown" && state.reconcile === "human"
      ? "person"
      : (state.phase === "outcome_unknown" ||
            state.phase === "executing" ||
            state.phase === "reconciling") &&
          state.settleUntilMs !== undefined
        ? "settling"
        : "no";

function decideStep(
  state: OperationState | null,
  event: OperationEvent,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (event.type === "start") {
    if (state !== null) return err({ code: "already_started" });
    if (event.cancelledBy) {
      return ok(
        record(0, CANCELLED, "attempt", nowMs, [
          { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
          { type: "cancel_requested", at_ms: nowMs, by: event.cancelledBy, phase: "proposed" },
        ]),
      );
    }
    const opened: TraceEvent[] = [
      { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
      { type: "validated", at_ms: nowMs, input_hash: event.inputHash },
      ...unverifiedEvents(plan, nowMs),
      ...(plan.limits?.length
        ? [
            {
              type: "limits_reserved" as const,
              at_ms: nowMs,
              limits: plan.limits.map(({ name, subject, amount }) => ({ name, subject, amount })),
            },
          ]
        : []),
      ...(plan.cedar
        ? [
            {
              type: "policy_decided" as const,
              at_ms: nowMs,
              policy_version: plan.cedar.version,
              decision: plan.cedar.decision,
              policies: plan.cedar.policies,
            },
          ]
        : []),
    ];
    // Refused at the start (Cedar, a limit, a `refuse` freeze): recorded, nothing sent.
    const refused = (code: "policy_denied" | "frozen", message: string, trace = opened) =>
      ok(record(0, { status: "rejected", code, message } as const, "attempt", nowMs, trace));
    if (event.policyDenied) return refused("policy_denied", event.policyDenied.message);
    if (event.limitDenied) {
      const { limit, subject, message } = event.limitDenied;
      const denied = traceEvent("limit_denied", nowMs, { limit, subject });
      return refused("policy_denied", message, [...opened, denied]);
    }
    if (event.frozen?.mode === "refuse") return refused("frozen", event.frozen.message);
    // An approval is asked for under a hold too (asking sends nothing); the send waits at the decision.
    // A standing grant approved it (issue 35): no person is asked; the trace names the grant.
    if (plan.grant)
      opened.push(
        traceEvent("grant_used", nowMs, { grant_id: plan.grant.id, amount: plan.grant.amount }),
      );
    else if (plan.approval) return ok(requestApproval(plan.approval, nowMs, opened));
    if (event.frozen?.mode === "hold")
      return ok(holdStep(event.frozen.hold, { phase: "unsent" }, nowMs, opened));
    return ok(beginExecution(plan, nowMs, opened));
  }
  if (state === null) return err({ code: "not_started" });
  switch (event.type) {
    case "attempt_finished":
      if (state.phase !== "executing" || state.attempt !== event.attempt)
        return ok(unchanged(state));
      return ok(afterAttempt(state, event.observation, plan, nowMs, event.exchange));
    case "lookup_finished":
      if (state.phase !== "reconciling" || state.lookups !== event.lookups)
        return ok(unchanged(state));
      return ok(afterLookup(state, event.observation, plan, nowMs));
    case "alarm":
      return ok(onAlarm(state, event.inFlight, plan, nowMs));
    case "resolve":
      return onResolve(state, event, plan, nowMs);
    case "denied":
      return ok(onHeld(state, (as) => onDenied(as, event, plan, nowMs), nowMs));
    case "cancel":
      return ok(onHeld(state, (as) => onCancel(as, event.by, plan, nowMs), nowMs));
    case "hold":
      return ok(onHold(state, event, nowMs));
    case "grant_lapsed":
      return ok(onGrantLapsed(state, event, plan, nowMs));
    case "release":
      return ok(onRelease(state, event, plan, nowMs));
    case "pause": {
      const paused = onPause(state, event.by, nowMs);
      return "code" in paused ? err(paused) : ok(paused);
    }
    case "retry_now": {
      const sent = onRetryNow(state, event.by, plan, nowMs);
      return "code" in sent ? err(sent) : ok(sent);
    }
    case "retry_deferred":
      // A held operation's release waits for the retry budget: it asks again then, still held.
      if (state.phase === "held")
        return ok({
          state: { ...state, recheckAtMs: event.untilMs },
          effects: [{ kind: "set_alarm", atMs: event.untilMs }],
          trace: [],
          changed: true,
        });
      return ok(onRetryDeferred(state, event, plan, nowMs));
    case "decide":
      return onDecide(state, event, plan, nowMs);
    case "edit":
      return onEdit(state, event, plan, nowMs);
    case "preview_finished":
      return ok(onPreview(state, event, nowMs));
    case "lock_granted":
      return ok(onLockGranted(state, event, plan, nowMs));
    case "lock_queued":
      return ok(onLockQueued(state, event, plan, nowMs));
    case "quota_answered":
      return ok(onQuotaAnswered(state, event, plan, nowMs));
    case "payment_required":
      return ok(onPaymentRequired(state, event, plan, nowMs));
    case "payment_signed":
      return ok(onPaymentSigned(state, event, nowMs));
    case "payment_stopped":
      return ok(onPaymentStopped(state, event, plan, nowMs));
    case "credential_required":
      // Cancelled while the token was asked for: it ends as that attempt would with nothing sent.
      if (state.phase === "executing" && state.attempt === event.attempt && state.cancelRequested)
        return ok(
          afterAttempt(
            state,
            { kind: "not_sent", detail: `no usable token of the user (${event.reason})` },
            plan,
            nowMs,
          ),
        );
      return ok(onCredentialRequired(state, event, plan, nowMs));
    case "credential_ready":
      return ok(onCredentialReady(state, plan, nowMs));
  }
}

/** Says, once, what an operation of a tool with an unverified idempotency key relies on (and why). */
const unverifiedEvents = (plan: OperationPlan, nowMs: number): TraceEvent[] =>
  plan.unverified
    ? [
        {
          type: "idempotency_unverified",
          at_ms: nowMs,
          status: plan.unverified.status,
          enforced: plan.unverified.enforced,
          detail: unverifiedTraceDetail(plan.unverified),
        },
      ]
    : [];

/** An alarm is the machine's only timer: expiry, lock recheck, watchdog, retry, resend, lookup. */
function onAlarm(
  state: OperationState,
  inFlight: boolean,
  plan: OperationPlan,
  nowMs: number,
): Step {
  switch (state.phase) {
    case "awaiting_approval":
      return onApprovalAlarm(state, plan, nowMs);
    case "awaiting_lock":
      return onLockAlarm(state, plan, nowMs);
    case "awaiting_quota":
      return onQuotaAlarm(state, nowMs);
    case "awaiting_credential":
      return onCredentialAlarm(state, plan, nowMs);
    case "executing":
      if (inFlight)
        return {
          ...unchanged(state),
          effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }],
        };
      // The object restarted mid-attempt: the request may or may not have reached the upstream.
      return afterAttempt(state, { kind: "crash" }, plan, nowMs);
    case "reconciling":
      if (inFlight)
        return {
          ...unchanged(state),
          effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }],
        };
      return afterLookup(
        state,
        { kind: "inconclusive", detail: "toolgate restarted during the status lookup" },
        plan,
        nowMs,
      );
    case "retry_scheduled":
    case "outcome_unknown":
      return sendDue(state, plan, nowMs, []);
    case "held":
      // The shell asked before (alarm.ts): still held. A freeze asks again later; a pause waits.
      if (state.hold.kind === "pause") return unchanged(state);
      return {
        state: { ...state, recheckAtMs: nowMs + HELD_RECHECK_MS },
        effects: [{ kind: "set_alarm", atMs: nowMs + HELD_RECHECK_MS }],
        trace: [],
        changed: true,
      };
    case "recorded":
      return unchanged(state);
  }
}

/**
 * A denial or cancel of a held operation: decided as where it waits (a retry, a resend: the
 * honesty rule there), or, unsent, as a call not yet sent (recorded, nothing sent; its lease was
 * already given back, so the release that follows is a no-op at the lock). Its trace names the
 * phase it was in, `held`, not the one it was decided as.
 */
function onHeld(state: OperationState, stop: (as: OperationState) => Step, nowMs: number): Step {
  if (state.phase !== "held") return stop(state);
  const step = stop(
    heldAs(state) ?? { phase: "awaiting_lock", requestedAtMs: nowMs, blockedBy: null },
  );
  const trace = step.trace.map((event) =>
    event.type === "cancel_requested" ? { ...event, phase: "held" } : event,
  );
  return { ...step, trace };
}
