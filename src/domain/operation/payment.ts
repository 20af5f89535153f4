// The x402 arm (issue 37 item 2): a 402 ends the attempt in flight as the shell decided of it
// (domain/payment.ts). Refused: recorded with nothing paid and nothing performed (or still unknown,
// when an earlier attempt may have applied). Accepted: the next attempt at once — which signs first —
// or a person's approval first (then the first attempt again, as after any approval). Signed: the
// one payload is written with this row (the plan the shell writes), before the paid request is sent.
import type { Decision } from "../classify.ts";
import { traceEvent } from "../journal/trace-event.ts";
import { attemptFinishedEvent } from "./attempt.ts";
import { requestApproval } from "./approval.ts";
import { CANCELLED, holdStep, record, startAttempt, stayUnknown, unchanged } from "./steps.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  Outcome,
  RetryScheduled,
  Step,
  TraceEvent,
} from "./state.ts";

export function onPaymentRequired(
  state: OperationState,
  event: Extract<OperationEvent, { type: "payment_required" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (state.phase !== "executing" || state.attempt !== event.attempt) return unchanged(state);
  const finished = attemptFinishedEvent(state.attempt, event.observation, event.exchange, nowMs);
  const { verdict } = event;
  // Ends with nothing paid: refused, or cancelled meanwhile. The 402 itself performed nothing, but
  // an earlier attempt that may have applied keeps the operation unknown (the honesty rule).
  const end = (outcome: Outcome, reason: string, trace: TraceEvent[] = [finished]): Step =>
    state.mayHaveApplied
      ? stayUnknown(state, state.mayHaveApplied, outcome, reason, plan, nowMs, trace)
      : record(state.attempt, outcome, "attempt", nowMs, trace, state.cancelRequested);
  if (verdict.kind === "refuse") {
    const { status, code, message, reason } = verdict;
    const said = traceEvent("payment", nowMs, { what: "refused", reason });
    const ended = end({ status, code, message }, `payment refused (${reason})`, [finished, said]);
    // Claims reserved for this payment before a limit refused it: the written plan holds them, and
    // transition() only releases what the plan before held.
    return verdict.released && !plan.limits?.length && ended.state.phase === "recorded"
      ? { ...ended, effects: [...ended.effects, { kind: "release_limits" }] }
      : ended;
  }
  if (state.cancelRequested) return end(CANCELLED, "cancelled while the outcome was unknown");
  const { amount, asset, payTo, network, approval } = verdict;
  const said = traceEvent("payment", nowMs, {
    what: "required",
    amount,
    asset,
    pay_to: payTo,
    network,
    approval: approval !== null,
  });
  // A person decides with nothing signed; approval leaves no ambiguity behind (the shell asks only
  // when no earlier attempt may have applied).
  if (approval) return requestApproval(approval, nowMs, [finished, said]);
  // The 402 performed nothing and spent no retry: the paid request goes now, as the next attempt.
  return startAttempt(
    state.attempt + 1,
    state.firstAttemptAtMs,
    nowMs,
    plan,
    state.mayHaveApplied,
    [finished, said],
  );
}

/** The one payload is stored with this row; nothing changes once the attempt is over or cancelled. */
export function onPaymentSigned(
  state: OperationState,
  event: Extract<OperationEvent, { type: "payment_signed" }>,
  nowMs: number,
): Step {
  if (state.phase !== "executing" || state.attempt !== event.attempt || state.cancelRequested)
    return unchanged(state);
  return {
    state,
    effects: [],
    trace: [traceEvent("payment", nowMs, { what: "signed", payment_id: event.paymentId })],
    changed: true,
  };
}

/** What the model reads after a denial stopped the signed payment before it went out. */
export const UNSENT_PAYMENT = "A payment was signed for it but never sent: nothing was paid.";

/**
 * The checks after signing stopped the paid request (the shell sent nothing; the payload stays
 * stored, never sent). This attempt ends as one that sent nothing: a denial ends the call as at a
 * retry (recorded, or still unknown when an earlier attempt may have applied); a `hold` freeze
 * holds it as a retry due now, so its lift sends the same stored payload, never a new signature.
 */
export function onPaymentStopped(
  state: OperationState,
  event: Extract<OperationEvent, { type: "payment_stopped" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (state.phase !== "executing" || state.attempt !== event.attempt) return unchanged(state);
  const { stop } = event;
  const why = stop.kind === "hold" ? `freeze ${stop.hold.freezeId}` : stop.code;
  const detail = `the paid request was stopped before it was sent (${why})`;
  const finished = attemptFinishedEvent(
    state.attempt,
    { kind: "not_sent", detail },
    undefined,
    nowMs,
  );
  const trace = [finished, traceEvent("payment", nowMs, { what: "unsent", reason: why })];
  const waiting: RetryScheduled = {
    phase: "retry_scheduled",
    attempt: state.attempt,
    dueAtMs: nowMs,
    firstAttemptAtMs: state.firstAttemptAtMs,
    reason: detail,
    mayHaveApplied: state.mayHaveApplied,
  };
  if (stop.kind === "hold") return holdStep(stop.hold, waiting, nowMs, trace);
  const denial: Outcome = {
    status: stop.status,
    code: stop.code,
    message: `${stop.message} ${UNSENT_PAYMENT}`,
  };
  const denied: TraceEvent = { type: "denied", at_ms: nowMs, code: stop.code };
  return state.mayHaveApplied
    ? stayUnknown(state, state.mayHaveApplied, denial, `denied: ${stop.message}`, plan, nowMs, [
        ...trace,
        denied,
      ])
    : record(state.attempt, denial, "attempt", nowMs, [...trace, denied], state.cancelRequested);
}

/**
 * A paid attempt that may have applied is `outcome_unknown`, never a plain retry: the money may have
 * moved. It is settled by the payment itself — the same payload resent with the same key (the
 * merchant knows it by its id and cannot settle it twice), the tool's lookup, or a person — and
 * never signed again (the stored payload is all a resend can carry).
 */
export function paidDecision(plan: OperationPlan, decision: Decision): Decision {
  if (!plan.payment?.payload || decision.kind !== "retry" || !decision.mayHaveApplied)
    return decision;
  const reconcile =
    plan.safety === "keyed" || plan.safety === "read"
      ? "resend"
      : plan.safety === "lookup"
        ? "lookup"
        : "human";
  return { kind: "unknown", code: decision.mayHaveApplied, reconcile, reason: decision.reason };
}
