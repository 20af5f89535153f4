// The operation state machine: given the stored state, one event and the clock reading, return the
// next state, the effects the shell must perform (send, set alarm) and the trace events to append.
// Invariants: the idempotency key never changes; a result is applied only to the attempt that is in
// flight (compare-and-set on attempt number); `recorded` is terminal and absorbs every later event.
import { checkDecision, type ApprovalRequest, type Decision, type DecisionRefusal } from "./approval.ts";
import { classify, type RepeatSafety, type UnknownCode } from "./classify.ts";
import type { LookupObservation, Observation } from "./observation.ts";
import { nextDelayMs, planRetry, type RetryPolicy } from "./retry.ts";
import { err, ok, type Result } from "./result.ts";

/** Frozen at validation and stored with the operation: everything a transition needs about the tool. */
export type OperationPlan = {
  operationId: string;
  idempotencyKey: string;
  safety: RepeatSafety;
  retry: RetryPolicy;
  timeoutMs: number;
  /** Set when a person must decide before the first attempt; bound to input hash + policy version. */
  approval: (ApprovalRequest & { preview: boolean }) | null;
};

export type TerminalStatus = "succeeded" | "rejected" | "failed" | "budget_exhausted" | "cancelled";
export type Outcome =
  | { status: "succeeded"; result: unknown }
  | { status: Exclude<TerminalStatus, "succeeded">; code: string; message: string };

export type OperationState =
  /** Nothing has been sent; a person decides (plan.approval). Expires at plan.approval.expiresAtMs. */
  | { phase: "awaiting_approval"; requestedAtMs: number }
  /** `cancelRequested`: a cancel arrived mid-attempt; the attempt's result is still recorded (flagged late). */
  | { phase: "executing"; attempt: number; keyIssuedAtMs: number; startedAtMs: number; firstAttemptAtMs: number; cancelRequested: boolean }
  | { phase: "retry_scheduled"; attempt: number; dueAtMs: number; firstAttemptAtMs: number; reason: string }
  | {
      phase: "outcome_unknown";
      attempt: number;
      firstAttemptAtMs: number;
      code: UnknownCode;
      reconcile: "resend" | "lookup" | "human";
      dueAtMs: number | null;
      lookups: number;
      reason: string;
    }
  | { phase: "reconciling"; attempt: number; firstAttemptAtMs: number; code: UnknownCode; lookups: number; startedAtMs: number }
  | { phase: "recorded"; outcome: Outcome; attempts: number; recordedAtMs: number; via: "attempt" | "reconcile" | "resolve"; late: boolean };

export type OperationEvent =
  | { type: "start"; inputHash: string; callId: string; tool: string }
  | { type: "attempt_finished"; attempt: number; observation: Observation }
  /** `inFlight`: this instance still has a request outstanding (memory survives only while the object lives). */
  | { type: "alarm"; inFlight: boolean }
  | { type: "lookup_finished"; lookups: number; observation: LookupObservation }
  | { type: "resolve"; outcome: "succeeded" | "failed"; result: unknown; reason: string; by: string }
  /** The run no longer allows the next attempt (scope revoked, deadline passed, tool withdrawn). */
  | { type: "denied"; status: "rejected" | "budget_exhausted" | "cancelled"; code: string; message: string }
  | { type: "cancel"; by: string }
  /** The approver's preview came back (shown with the request; it changes nothing else). */
  | { type: "preview_finished"; preview: { status: number | null; body: unknown; detail: string | null } }
  /** A person's decision; `denial`: what the run says about executing now (approval is not authorization). */
  | { type: "decide"; decision: Decision; denial: { status: "rejected" | "failed" | "budget_exhausted" | "cancelled"; code: string; message: string } | null };

export type Effect =
  | { kind: "send_attempt"; attempt: number }
  | { kind: "send_lookup"; lookups: number }
  | { kind: "set_alarm"; atMs: number }
  | { kind: "clear_alarm" }
  /** Abort the in-flight request: only ever emitted for reads, whose abort cannot hide an effect. */
  | { kind: "abort_attempt" }
  /** Keep the tenant's approvals inbox in step: a request opened, or closed with how it ended. */
  | { kind: "inbox"; state: "pending" | "approved" | "rejected" | "expired" | "cancelled" }
  /** Send the tool's preview request once, for the approver. */
  | { kind: "send_preview" };

export type TraceEvent = { type: string; at_ms: number; [field: string]: unknown };

export type Step = { state: OperationState; effects: Effect[]; trace: TraceEvent[]; changed: boolean };
export type TransitionError =
  | { code: "not_outcome_unknown"; phase: OperationState["phase"] }
  | { code: "not_awaiting_approval"; phase: OperationState["phase"] }
  | DecisionRefusal
  | { code: "already_started" }
  | { code: "not_started" };

/** A watchdog fires this long after an attempt's own timeout if its result never got recorded. */
export const WATCHDOG_GRACE_MS = 5_000;

export function transition(
  state: OperationState | null,
  event: OperationEvent,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (event.type === "start") {
    if (state !== null) return err({ code: "already_started" });
    if (plan.approval) {
      return ok({
        state: { phase: "awaiting_approval", requestedAtMs: nowMs },
        effects: [{ kind: "set_alarm", atMs: plan.approval.expiresAtMs }, { kind: "inbox", state: "pending" }, ...(plan.approval.preview ? [{ kind: "send_preview" } as const] : [])],
        trace: [
          { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
          { type: "validated", at_ms: nowMs, input_hash: event.inputHash },
          { type: "awaiting_approval", at_ms: nowMs, policy_version: plan.approval.policyVersion, requested_by: plan.approval.requestedBy, expires_at_ms: plan.approval.expiresAtMs },
        ],
        changed: true,
      });
    }
    const next: OperationState = { phase: "executing", attempt: 1, keyIssuedAtMs: nowMs, startedAtMs: nowMs, firstAttemptAtMs: nowMs, cancelRequested: false };
    return ok({
      state: next,
      effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }, { kind: "send_attempt", attempt: 1 }],
      trace: [
        { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
        { type: "validated", at_ms: nowMs, input_hash: event.inputHash },
        { type: "attempt_started", at_ms: nowMs, attempt: 1, idempotency_key: plan.idempotencyKey },
      ],
      changed: true,
    });
  }
  if (state === null) return err({ code: "not_started" });
  switch (event.type) {
    case "attempt_finished":
      if (state.phase !== "executing" || state.attempt !== event.attempt) return ok(unchanged(state));
      return ok(afterAttempt(state, event.observation, plan, nowMs));
    case "lookup_finished":
      if (state.phase !== "reconciling" || state.lookups !== event.lookups) return ok(unchanged(state));
      return ok(afterLookup(state, event.observation, plan, nowMs));
    case "alarm":
      return ok(onAlarm(state, event.inFlight, plan, nowMs));
    case "resolve": {
      if (state.phase !== "outcome_unknown") return err({ code: "not_outcome_unknown", phase: state.phase });
      const outcome: Outcome =
        event.outcome === "succeeded"
          ? { status: "succeeded", result: event.result ?? null }
          : { status: "failed", code: "permanent_failure", message: `A person confirmed this did not happen: ${event.reason}. Do not retry; tell the user.` };
      return ok(record(state.attempt, outcome, "resolve", nowMs, [
        { type: "resolved", at_ms: nowMs, outcome: event.outcome, reason: event.reason, by: event.by },
      ]));
    }
    case "denied":
      return ok(onDenied(state, event, nowMs));
    case "cancel":
      return ok(onCancel(state, event.by, plan, nowMs));
    case "decide":
      return onDecide(state, event, plan, nowMs);
    case "preview_finished":
      if (state.phase !== "awaiting_approval") return ok(unchanged(state));
      return ok({ state, effects: [{ kind: "inbox", state: "pending" }], trace: [{ type: "preview", at_ms: nowMs, ...event.preview }], changed: true });
  }
}

/** A person's decision on an awaiting call: expired, refused (four eyes, mismatch), rejected, or the first attempt. */
function onDecide(state: OperationState, event: Extract<OperationEvent, { type: "decide" }>, plan: OperationPlan, nowMs: number): Result<Step, TransitionError> {
  if (state.phase !== "awaiting_approval" || !plan.approval) return err({ code: "not_awaiting_approval", phase: state.phase });
  if (nowMs >= plan.approval.expiresAtMs) return ok(expireApproval(state, nowMs));
  const checked = checkDecision(plan.approval, event.decision);
  if (!checked.ok) return checked;
  const { verdict, approverId, reason } = event.decision;
  const decided: TraceEvent = { type: "approval_decided", at_ms: nowMs, verdict, by: approverId, reason };
  if (verdict === "reject") {
    const why = reason ? `: ${reason}` : "";
    return ok(closeApproval(record(0, { status: "rejected", code: "approval_rejected", message: `A person rejected this call${why}. It was not executed. Do not retry; tell the user.` }, "attempt", nowMs, [decided]), "rejected"));
  }
  if (event.denial) return ok(closeApproval(record(0, event.denial, "attempt", nowMs, [decided, { type: "denied", at_ms: nowMs, code: event.denial.code }]), "approved"));
  const started = startAttempt(1, nowMs, nowMs, plan);
  return ok({ ...started, effects: [...started.effects, { kind: "inbox", state: "approved" }], trace: [decided, ...started.trace] });
}

function expireApproval(state: Extract<OperationState, { phase: "awaiting_approval" }>, nowMs: number): Step {
  const outcome: Outcome = { status: "rejected", code: "approval_expired", message: "Nobody approved this call in time, so it was not executed. Do not retry now; tell the user it needs a person's approval." };
  return closeApproval(record(0, outcome, "attempt", nowMs, [{ type: "approval_expired", at_ms: nowMs, requested_at_ms: state.requestedAtMs }]), "expired");
}

const closeApproval = (step: Step, how: "approved" | "rejected" | "expired" | "cancelled"): Step => ({ ...step, effects: [...step.effects, { kind: "inbox", state: how }] });

/** Only work not yet sent can be refused; an operation that may have taken effect stays honest. */
function onDenied(state: OperationState, event: Extract<OperationEvent, { type: "denied" }>, nowMs: number): Step {
  const trace: TraceEvent = { type: "denied", at_ms: nowMs, code: event.code };
  if (state.phase === "awaiting_approval") return closeApproval(record(0, { status: event.status, code: event.code, message: event.message }, "attempt", nowMs, [trace]), "cancelled");
  if (state.phase === "retry_scheduled") return record(state.attempt, { status: event.status, code: event.code, message: event.message }, "attempt", nowMs, [trace]);
  if (state.phase === "outcome_unknown" && state.reconcile === "resend") return toHuman(state, event.message, nowMs, [trace]);
  return unchanged(state);
}

function onCancel(state: OperationState, by: string, plan: OperationPlan, nowMs: number): Step {
  const trace: TraceEvent = { type: "cancel_requested", at_ms: nowMs, by, phase: state.phase };
  switch (state.phase) {
    case "awaiting_approval":
      return closeApproval(record(0, { status: "cancelled", code: "cancelled", message: CANCELLED }, "attempt", nowMs, [trace]), "cancelled");
    case "retry_scheduled":
      return record(state.attempt, { status: "cancelled", code: "cancelled", message: CANCELLED }, "attempt", nowMs, [trace]);
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
      return state.reconcile === "resend" ? toHuman(state, "cancelled while the outcome was unknown", nowMs, [trace]) : unchanged(state);
    case "reconciling":
    case "recorded":
      return unchanged(state);
  }
}

const CANCELLED = "This call was cancelled before it took effect. Do not retry; tell the user.";

function toHuman(state: Extract<OperationState, { phase: "outcome_unknown" }>, reason: string, nowMs: number, trace: TraceEvent[]): Step {
  return {
    state: { ...state, reconcile: "human", dueAtMs: null, reason },
    effects: [{ kind: "clear_alarm" }],
    trace: [...trace, { type: "outcome_unknown", at_ms: nowMs, code: state.code, reconcile: "human" }],
    changed: true,
  };
}

function afterAttempt(state: Extract<OperationState, { phase: "executing" }>, observed: Observation, plan: OperationPlan, nowMs: number): Step {
  const finished: TraceEvent = { type: "attempt_finished", at_ms: nowMs, attempt: state.attempt, observed: summarize(observed) };
  const decision = classify(plan.safety, observed);
  const late = state.cancelRequested;
  switch (decision.kind) {
    case "succeed":
      return record(state.attempt, { status: "succeeded", result: decision.result }, "attempt", nowMs, [finished], late);
    case "fail":
      return record(state.attempt, { status: decision.status, code: decision.code, message: decision.message }, "attempt", nowMs, [finished], late);
    case "retry": {
      if (late) return record(state.attempt, { status: "cancelled", code: "cancelled", message: CANCELLED }, "attempt", nowMs, [finished]);
      const retry = planRetry({ policy: plan.retry, operationId: plan.operationId, attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, nowMs, retryAfterMs: decision.retryAfterMs });
      if (retry.kind === "exhausted") return exhausted(state.attempt, retry.budget, decision.reason, nowMs, [finished]);
      return {
        state: { phase: "retry_scheduled", attempt: state.attempt, dueAtMs: retry.dueAtMs, firstAttemptAtMs: state.firstAttemptAtMs, reason: decision.reason },
        effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
        trace: [finished, { type: "retry_scheduled", at_ms: nowMs, attempt: state.attempt, delay_ms: retry.delayMs, due_at_ms: retry.dueAtMs, reason: decision.reason }],
        changed: true,
      };
    }
    case "unknown": {
      const base = { phase: "outcome_unknown" as const, attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, code: decision.code, lookups: 0, reason: decision.reason };
      const unknownEvent: TraceEvent = { type: "outcome_unknown", at_ms: nowMs, attempt: state.attempt, code: decision.code, reconcile: decision.reconcile };
      if (decision.reconcile === "lookup") {
        return startLookup({ ...base, reconcile: "lookup", dueAtMs: null }, plan, nowMs, [finished, unknownEvent]);
      }
      if (decision.reconcile === "resend" && !late) {
        const retry = planRetry({ policy: plan.retry, operationId: plan.operationId, attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, nowMs, retryAfterMs: null });
        if (retry.kind === "retry") {
          return {
            state: { ...base, reconcile: "resend", dueAtMs: retry.dueAtMs },
            effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
            trace: [finished, unknownEvent, { type: "retry_scheduled", at_ms: nowMs, attempt: state.attempt, delay_ms: retry.delayMs, due_at_ms: retry.dueAtMs, reason: "resend with the same idempotency key" }],
            changed: true,
          };
        }
      }
      // No automatic way left to learn the truth: the operation waits for a person (POST .../resolve).
      return {
        state: { ...base, reconcile: "human", dueAtMs: null },
        effects: [{ kind: "clear_alarm" }],
        trace: [finished, { ...unknownEvent, reconcile: "human" }],
        changed: true,
      };
    }
  }
}

function afterLookup(state: Extract<OperationState, { phase: "reconciling" }>, observed: LookupObservation, plan: OperationPlan, nowMs: number): Step {
  const finished: TraceEvent = { type: "reconcile_finished", at_ms: nowMs, lookups: state.lookups, found: observed.kind };
  switch (observed.kind) {
    case "found":
      return record(state.attempt, { status: "succeeded", result: observed.result }, "reconcile", nowMs, [finished]);
    case "not_found": {
      // Definitely not applied: sending again with the same key is safe, within the attempt budget.
      const retry = planRetry({ policy: plan.retry, operationId: plan.operationId, attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, nowMs, retryAfterMs: null });
      if (retry.kind === "exhausted") return exhausted(state.attempt, retry.budget, "the status lookup shows the effect did not happen", nowMs, [finished]);
      return {
        state: { phase: "retry_scheduled", attempt: state.attempt, dueAtMs: retry.dueAtMs, firstAttemptAtMs: state.firstAttemptAtMs, reason: "not applied upstream" },
        effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
        trace: [finished, { type: "retry_scheduled", at_ms: nowMs, attempt: state.attempt, delay_ms: retry.delayMs, due_at_ms: retry.dueAtMs, reason: "not applied upstream" }],
        changed: true,
      };
    }
    case "inconclusive": {
      const base = { phase: "outcome_unknown" as const, attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, code: state.code, lookups: state.lookups, reason: observed.detail };
      if (state.lookups >= plan.retry.maxAttempts) {
        return { state: { ...base, reconcile: "human", dueAtMs: null }, effects: [{ kind: "clear_alarm" }], trace: [finished, { type: "outcome_unknown", at_ms: nowMs, code: state.code, reconcile: "human" }], changed: true };
      }
      const dueAtMs = nowMs + nextDelayMs(plan.retry, `${plan.operationId}:lookup`, state.lookups, null);
      return { state: { ...base, reconcile: "lookup", dueAtMs }, effects: [{ kind: "set_alarm", atMs: dueAtMs }], trace: [finished], changed: true };
    }
  }
}

function onAlarm(state: OperationState, inFlight: boolean, plan: OperationPlan, nowMs: number): Step {
  switch (state.phase) {
    case "awaiting_approval":
      // Alarms are at-least-once and may fire early after a restart: expire only when due.
      if (plan.approval && nowMs < plan.approval.expiresAtMs) return { ...unchanged(state), effects: [{ kind: "set_alarm", atMs: plan.approval.expiresAtMs }] };
      return expireApproval(state, nowMs);
    case "executing":
      if (inFlight) return { ...unchanged(state), effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }] };
      // The object restarted mid-attempt: the request may or may not have reached the upstream.
      return afterAttempt(state, { kind: "crash" }, plan, nowMs);
    case "reconciling":
      if (inFlight) return { ...unchanged(state), effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }] };
      return afterLookup(state, { kind: "inconclusive", detail: "toolgate restarted during the status lookup" }, plan, nowMs);
    case "retry_scheduled":
      return startAttempt(state.attempt + 1, state.firstAttemptAtMs, nowMs, plan);
    case "outcome_unknown":
      if (state.reconcile === "resend") return startAttempt(state.attempt + 1, state.firstAttemptAtMs, nowMs, plan);
      if (state.reconcile === "lookup") return startLookup(state, plan, nowMs, []);
      return unchanged(state);
    case "recorded":
      return unchanged(state);
  }
}

function startAttempt(attempt: number, firstAttemptAtMs: number, nowMs: number, plan: OperationPlan): Step {
  return {
    state: { phase: "executing", attempt, keyIssuedAtMs: firstAttemptAtMs, startedAtMs: nowMs, firstAttemptAtMs, cancelRequested: false },
    effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }, { kind: "send_attempt", attempt }],
    trace: [{ type: "attempt_started", at_ms: nowMs, attempt, idempotency_key: plan.idempotencyKey }],
    changed: true,
  };
}

function startLookup(state: Extract<OperationState, { phase: "outcome_unknown" }>, plan: OperationPlan, nowMs: number, trace: TraceEvent[]): Step {
  const lookups = state.lookups + 1;
  return {
    state: { phase: "reconciling", attempt: state.attempt, firstAttemptAtMs: state.firstAttemptAtMs, code: state.code, lookups, startedAtMs: nowMs },
    effects: [{ kind: "set_alarm", atMs: watchdogAt(plan, nowMs) }, { kind: "send_lookup", lookups }],
    trace: [...trace, { type: "reconcile_started", at_ms: nowMs, lookups }],
    changed: true,
  };
}

function exhausted(attempts: number, budget: "attempts" | "elapsed", reason: string, nowMs: number, trace: TraceEvent[]): Step {
  const limit = budget === "attempts" ? "its attempt budget" : "its time budget";
  return record(attempts, { status: "budget_exhausted", code: "attempts_exhausted", message: `The tool kept failing (${reason}) and used up ${limit}. It did not take effect. Do not retry now; tell the user.` }, "attempt", nowMs, trace);
}

function record(attempts: number, outcome: Outcome, via: "attempt" | "reconcile" | "resolve", nowMs: number, trace: TraceEvent[], late = false): Step {
  return {
    state: { phase: "recorded", outcome, attempts, recordedAtMs: nowMs, via, late },
    effects: [{ kind: "clear_alarm" }],
    trace: [...trace, { type: "recorded", at_ms: nowMs, status: outcome.status, ...(outcome.status === "succeeded" ? {} : { code: outcome.code }), via, ...(late ? { late } : {}) }],
    changed: true,
  };
}

const unchanged = (state: OperationState): Step => ({ state, effects: [], trace: [], changed: false });
const watchdogAt = (plan: OperationPlan, nowMs: number) => nowMs + plan.timeoutMs + WATCHDOG_GRACE_MS;

function summarize(observed: Observation): Record<string, unknown> {
  switch (observed.kind) {
    case "ok":
      return { kind: "ok" };
    case "http_error":
      return { kind: "http_error", status: observed.status, retry_after_ms: observed.retryAfterMs };
    case "crash":
      return { kind: "crash" };
    default:
      return { kind: observed.kind, detail: observed.detail };
  }
}

/** Settled = nothing more will happen without a person: the caller can stop waiting. */
export const isSettled = (state: OperationState): boolean =>
  state.phase === "recorded" || (state.phase === "outcome_unknown" && state.reconcile === "human");

/** When the operation will next act by itself (null: in flight now, or never). */
export function nextDueAtMs(state: OperationState): number | null {
  if (state.phase === "retry_scheduled") return state.dueAtMs;
  if (state.phase === "outcome_unknown") return state.dueAtMs;
  return null;
}
