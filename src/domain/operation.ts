// The operation state machine: given the stored state, one event and the clock reading, return the
// next state, the effects the shell must perform (send, set alarm) and the trace events to append.
// Invariants: the idempotency key never changes; a result is applied only to the attempt that is in
// flight (compare-and-set on attempt number); `recorded` is terminal and absorbs every later event;
// once any attempt may have applied, no outcome saying it did not is recorded without proof.
import {
  checkDecision,
  type ApprovalRequest,
  type Decision,
  type DecisionRefusal,
} from "./approval.ts";
import { classify, type RepeatSafety, type UnknownCode } from "./classify.ts";
import type { LookupObservation, Observation } from "./observation.ts";
import { nextDelayMs, planRetry, type RetryPolicy } from "./retry.ts";
import { planDeferral } from "./retry-deferral.ts";
import { err, ok, type Result } from "./result.ts";
import { unverifiedTraceDetail, type IdempotencyTrust } from "./verification.ts";

/** Frozen at validation and stored with the operation: everything a transition needs about the tool. */
export type OperationPlan = {
  operationId: string;
  idempotencyKey: string;
  safety: RepeatSafety;
  retry: RetryPolicy;
  timeoutMs: number;
  /** Set when a person must decide before the first attempt; bound to input hash + policy version. */
  approval: (ApprovalRequest & { preview: boolean }) | null;
  /** The resource lock key (tool `resource` template applied to the input): attempts run under its lease. */
  resource: string | null;
  /** The tool has a status lookup (always for `lookup`; a `keyed` tool may have one too). */
  hasLookup: boolean;
  /** A lookup's "not found" is trusted only from (ambiguous attempt start + timeoutMs + settleMs). */
  settleMs: number;
  /**
   * The tool promises an idempotency key no verification vouches for (domain/verification.ts);
   * `enforced`: `safety` was lowered for it. Absent in plans frozen before verification existed.
   */
  unverified?: IdempotencyTrust["unverified"];
};

export type TerminalStatus = "succeeded" | "rejected" | "failed" | "budget_exhausted" | "cancelled";
export type Outcome =
  | { status: "succeeded"; result: unknown }
  | { status: Exclude<TerminalStatus, "succeeded">; code: string; message: string };

/** The latest attempt that may have applied: when it started (the settle window counts from there) and why. */
export type Ambiguity = { atMs: number; code: UnknownCode };

export type OperationState =
  /** Nothing has been sent; a person decides (plan.approval). Expires at plan.approval.expiresAtMs. */
  | { phase: "awaiting_approval"; requestedAtMs: number }
  /** Nothing has been sent; another operation holds plan.resource (`blockedBy`, when the lock said who). */
  | { phase: "awaiting_lock"; requestedAtMs: number; blockedBy: string | null }
  /**
   * `cancelRequested`: a cancel arrived mid-attempt; the attempt's result is still recorded (flagged late).
   * `mayHaveApplied` (here and in `retry_scheduled`): set once any attempt was ambiguous, so that
   * exhaustion, denial and cancellation end `outcome_unknown` instead of claiming no effect.
   */
  | {
      phase: "executing";
      attempt: number;
      keyIssuedAtMs: number;
      startedAtMs: number;
      firstAttemptAtMs: number;
      cancelRequested: boolean;
      mayHaveApplied: Ambiguity | null;
    }
  | {
      phase: "retry_scheduled";
      attempt: number;
      dueAtMs: number;
      firstAttemptAtMs: number;
      reason: string;
      mayHaveApplied: Ambiguity | null;
    }
  /**
   * `ambiguousAtMs`: start of the latest attempt that may have applied. `ifNotApplied`: what to
   * record once a trusted lookup proves it did not happen (null: send again); set by exhaustion,
   * denial or cancellation, which forbid further sends.
   */
  | {
      phase: "outcome_unknown";
      attempt: number;
      firstAttemptAtMs: number;
      code: UnknownCode;
      ambiguousAtMs: number;
      reconcile: "resend" | "lookup" | "human";
      dueAtMs: number | null;
      lookups: number;
      reason: string;
      ifNotApplied: Outcome | null;
    }
  | {
      phase: "reconciling";
      attempt: number;
      firstAttemptAtMs: number;
      code: UnknownCode;
      ambiguousAtMs: number;
      lookups: number;
      startedAtMs: number;
      ifNotApplied: Outcome | null;
    }
  | {
      phase: "recorded";
      outcome: Outcome;
      attempts: number;
      recordedAtMs: number;
      via: "attempt" | "reconcile" | "resolve";
      late: boolean;
    };

export type OperationEvent =
  /** `cancelledBy`: the run cancelled this call before its operation existed (a cancel that overtook the dispatch). */
  | { type: "start"; inputHash: string; callId: string; tool: string; cancelledBy?: string | null }
  | { type: "attempt_finished"; attempt: number; observation: Observation }
  /** `inFlight`: this instance still has a request outstanding (memory survives only while the object lives). */
  | { type: "alarm"; inFlight: boolean }
  | { type: "lookup_finished"; lookups: number; observation: LookupObservation }
  /** A person's verdict on an outcome_unknown; `resend` (keyed tools only) sends once more with the same key. */
  | {
      type: "resolve";
      outcome: "succeeded" | "failed" | "resend";
      result: unknown;
      reason: string;
      by: string;
    }
  /** The run no longer allows the next attempt (scope revoked, deadline passed, tool withdrawn). */
  | {
      type: "denied";
      status: "rejected" | "budget_exhausted" | "cancelled";
      code: string;
      message: string;
    }
  | { type: "cancel"; by: string }
  /**
   * The host's retry budget refused the automatic retry or resend this alarm was about to send
   * (domain/retry-budget.ts), or (`unavailable`) the run or the tenant could not be asked before
   * it: wait until `untilMs`, same attempt, same phase. Nothing was sent.
   */
  | {
      type: "retry_deferred";
      untilMs: number;
      reason: "retry_budget" | "unavailable";
      detail: string;
    }
  /** The approver's preview came back (shown with the request; it changes nothing else). */
  | {
      type: "preview_finished";
      preview: { status: number | null; body: unknown; detail: string | null };
    }
  /** The resource lock answered: this operation holds it (with its fencing token), or waits behind `blockedBy`. */
  | { type: "lock_granted"; fencingToken: number }
  | { type: "lock_queued"; blockedBy: string }
  /** A person's decision; `denial`: what the run says about executing now (approval is not authorization). */
  | {
      type: "decide";
      decision: Decision;
      denial: {
        status: "rejected" | "failed" | "budget_exhausted" | "cancelled";
        code: string;
        message: string;
      } | null;
    };

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
  | { kind: "send_preview" }
  /** Ask plan.resource's lock for the lease (idempotent), or give it back once the outcome is settled. */
  | { kind: "acquire_lock" }
  | { kind: "release_lock" }
  /** The operation started or stopped waiting for a person's verdict (the tenant's unknown-outcomes list). */
  | { kind: "needs_person"; open: boolean };

export type TraceEvent = { type: string; at_ms: number; [field: string]: unknown };

export type Step = {
  state: OperationState;
  effects: Effect[];
  trace: TraceEvent[];
  changed: boolean;
};
export type TransitionError =
  | { code: "not_outcome_unknown"; phase: OperationState["phase"] }
  | { code: "not_awaiting_approval"; phase: OperationState["phase"] }
  | DecisionRefusal
  | { code: "resend_not_allowed"; detail: string }
  | { code: "already_started" }
  | { code: "not_started" };

/** A watchdog fires this long after an attempt's own timeout if its result never got recorded. */
export const WATCHDOG_GRACE_MS = 5_000;
/**
 * While waiting for a resource lock, ask it again (a grant notice may have been lost) after 30 s,
 * then at doubling gaps up to 10 min: the grant notice is the normal path, and a queue behind an
 * operation that waits for a person may wait for days.
 */
export const LOCK_RECHECK_MS = 30_000;
export const LOCK_RECHECK_MAX_MS = 600_000;

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
  const waitsNow = waitsForPerson(step.value.state);
  if (waitsNow !== (state !== null && waitsForPerson(state)))
    effects.push({ kind: "needs_person", open: waitsNow });
  return ok({ ...step.value, effects });
}

/** Only a person's verdict (POST …/resolve) moves it on. */
const waitsForPerson = (state: OperationState) =>
  state.phase === "outcome_unknown" && state.reconcile === "human";

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
    if (plan.approval) {
      return ok({
        state: { phase: "awaiting_approval", requestedAtMs: nowMs },
        effects: [
          { kind: "set_alarm", atMs: plan.approval.expiresAtMs },
          { kind: "inbox", state: "pending" },
          ...(plan.approval.preview ? [{ kind: "send_preview" } as const] : []),
        ],
        trace: [
          { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
          { type: "validated", at_ms: nowMs, input_hash: event.inputHash },
          ...unverifiedEvents(plan, nowMs),
          {
            type: "awaiting_approval",
            at_ms: nowMs,
            policy_version: plan.approval.policyVersion,
            requested_by: plan.approval.requestedBy,
            expires_at_ms: plan.approval.expiresAtMs,
          },
        ],
        changed: true,
      });
    }
    return ok(
      beginExecution(plan, nowMs, [
        { type: "proposed", at_ms: nowMs, call_id: event.callId, tool: event.tool },
        { type: "validated", at_ms: nowMs, input_hash: event.inputHash },
        ...unverifiedEvents(plan, nowMs),
      ]),
    );
  }
  if (state === null) return err({ code: "not_started" });
  switch (event.type) {
    case "attempt_finished":
      if (state.phase !== "executing" || state.attempt !== event.attempt)
        return ok(unchanged(state));
      return ok(afterAttempt(state, event.observation, plan, nowMs));
    case "lookup_finished":
      if (state.phase !== "reconciling" || state.lookups !== event.lookups)
        return ok(unchanged(state));
      return ok(afterLookup(state, event.observation, plan, nowMs));
    case "alarm":
      return ok(onAlarm(state, event.inFlight, plan, nowMs));
    case "resolve":
      return onResolve(state, event, plan, nowMs);
    case "denied":
      return ok(onDenied(state, event, plan, nowMs));
    case "cancel":
      return ok(onCancel(state, event.by, plan, nowMs));
    case "retry_deferred":
      return ok(onRetryDeferred(state, event, plan, nowMs));
    case "decide":
      return onDecide(state, event, plan, nowMs);
    case "preview_finished":
      if (state.phase !== "awaiting_approval") return ok(unchanged(state));
      return ok({
        state,
        effects: [{ kind: "inbox", state: "pending" }],
        trace: [{ type: "preview", at_ms: nowMs, ...event.preview }],
        changed: true,
      });
    case "lock_granted":
      // Granted after this operation already ended (cancelled while queued): give it straight back.
      if (state.phase === "recorded")
        return ok({ ...unchanged(state), effects: [{ kind: "release_lock" }] });
      if (state.phase !== "awaiting_lock") return ok(unchanged(state));
      return ok(
        startAttempt(1, nowMs, nowMs, plan, null, [
          {
            type: "lock_granted",
            at_ms: nowMs,
            resource: plan.resource,
            fencing_token: event.fencingToken,
          },
        ]),
      );
    case "lock_queued":
      if (state.phase !== "awaiting_lock" || state.blockedBy === event.blockedBy)
        return ok(unchanged(state));
      return ok({
        state: { ...state, blockedBy: event.blockedBy },
        effects: [],
        trace: [
          {
            type: "lock_queued",
            at_ms: nowMs,
            resource: plan.resource,
            blocked_by: event.blockedBy,
          },
        ],
        changed: true,
      });
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

/** The first attempt, or, for a tool with a resource, the wait for its lease first (nothing sent until granted). */
function beginExecution(plan: OperationPlan, nowMs: number, trace: TraceEvent[]): Step {
  if (!plan.resource) return startAttempt(1, nowMs, nowMs, plan, null, trace);
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

/** A person's decision on an awaiting call: expired, refused (four eyes, mismatch), rejected, or the first attempt. */
function onDecide(
  state: OperationState,
  event: Extract<OperationEvent, { type: "decide" }>,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (state.phase !== "awaiting_approval" || !plan.approval)
    return err({ code: "not_awaiting_approval", phase: state.phase });
  if (nowMs >= plan.approval.expiresAtMs) return ok(expireApproval(state, nowMs));
  const checked = checkDecision(plan.approval, event.decision);
  if (!checked.ok) return checked;
  const { verdict, approverId, reason } = event.decision;
  const decided: TraceEvent = {
    type: "approval_decided",
    at_ms: nowMs,
    verdict,
    by: approverId,
    reason,
  };
  if (verdict === "reject") {
    const why = reason ? `: ${reason}` : "";
    return ok(
      closeApproval(
        record(
          0,
          {
            status: "rejected",
            code: "approval_rejected",
            message: `A person rejected this call${why}. It was not executed. Do not retry; tell the user.`,
          },
          "attempt",
          nowMs,
          [decided],
        ),
        "rejected",
      ),
    );
  }
  if (event.denial)
    return ok(
      closeApproval(
        record(0, event.denial, "attempt", nowMs, [
          decided,
          { type: "denied", at_ms: nowMs, code: event.denial.code },
        ]),
        "approved",
      ),
    );
  const started = beginExecution(plan, nowMs, [decided]);
  return ok({ ...started, effects: [...started.effects, { kind: "inbox", state: "approved" }] });
}

function expireApproval(
  state: Extract<OperationState, { phase: "awaiting_approval" }>,
  nowMs: number,
): Step {
  const outcome: Outcome = {
    status: "rejected",
    code: "approval_expired",
    message:
      "Nobody approved this call in time, so it was not executed. Do not retry now; tell the user it needs a person's approval.",
  };
  return closeApproval(
    record(0, outcome, "attempt", nowMs, [
      { type: "approval_expired", at_ms: nowMs, requested_at_ms: state.requestedAtMs },
    ]),
    "expired",
  );
}

const closeApproval = (
  step: Step,
  how: "approved" | "rejected" | "expired" | "cancelled",
): Step => ({ ...step, effects: [...step.effects, { kind: "inbox", state: how }] });

function onResolve(
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

/**
 * Only work not yet sent can be refused outright. Once an attempt may have applied, the refusal
 * only stops further sends: the operation stays outcome_unknown until a lookup or a person settles it.
 */
function onDenied(
  state: OperationState,
  event: Extract<OperationEvent, { type: "denied" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const trace: TraceEvent = { type: "denied", at_ms: nowMs, code: event.code };
  const denial: Outcome = { status: event.status, code: event.code, message: event.message };
  if (state.phase === "awaiting_approval")
    return closeApproval(record(0, denial, "attempt", nowMs, [trace]), "cancelled");
  if (state.phase === "awaiting_lock") return record(0, denial, "attempt", nowMs, [trace]);
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

function onCancel(state: OperationState, by: string, plan: OperationPlan, nowMs: number): Step {
  const trace: TraceEvent = { type: "cancel_requested", at_ms: nowMs, by, phase: state.phase };
  switch (state.phase) {
    case "awaiting_approval":
      return closeApproval(record(0, CANCELLED, "attempt", nowMs, [trace]), "cancelled");
    case "awaiting_lock":
      return record(0, CANCELLED, "attempt", nowMs, [trace]);
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
    case "recorded":
      return unchanged(state);
  }
}

/**
 * Only an automatic send waits for the budget (a scheduled retry, or a keyed resend after an unknown
 * outcome); the envelope is unchanged. A deferral past the elapsed budget is exhaustion, with the
 * same honesty rule as any other: once an attempt may have applied, never "did not take effect".
 */
function onRetryDeferred(
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
  const deferral = planDeferral({
    policy: plan.retry,
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
  if (deferral.kind === "defer")
    return {
      state: { ...state, dueAtMs: deferral.dueAtMs },
      effects: [{ kind: "set_alarm", atMs: deferral.dueAtMs }],
      trace: [deferred],
      changed: true,
    };
  const ambiguity = state.phase === "retry_scheduled" ? state.mayHaveApplied : ambiguityOf(state);
  const outcome = exhaustedOutcome("elapsed", state.reason);
  return ambiguity
    ? stayUnknown(state, ambiguity, outcome, state.reason, plan, nowMs, [deferred])
    : record(state.attempt, outcome, "attempt", nowMs, [deferred]);
}

const CANCELLED: Outcome = {
  status: "cancelled",
  code: "cancelled",
  message: "This call was cancelled before it took effect. Do not retry; tell the user.",
};

const ambiguityOf = (state: { ambiguousAtMs: number; code: UnknownCode }): Ambiguity => ({
  atMs: state.ambiguousAtMs,
  code: state.code,
});

/**
 * No further automatic send is allowed (exhausted, denied, cancelled) but an attempt may have
 * applied: ask the status lookup if the tool has one (`ifNotApplied` is recorded only once it
 * proves nothing happened), else wait for a person.
 */
function stayUnknown(
  from: { attempt: number; firstAttemptAtMs: number },
  ambiguity: Ambiguity,
  ifNotApplied: Outcome,
  reason: string,
  plan: OperationPlan,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  const base = {
    phase: "outcome_unknown" as const,
    attempt: from.attempt,
    firstAttemptAtMs: from.firstAttemptAtMs,
    code: ambiguity.code,
    ambiguousAtMs: ambiguity.atMs,
    lookups: 0,
    reason,
    ifNotApplied,
  };
  const reconcile = plan.hasLookup ? "lookup" : "human";
  const unknownEvent: TraceEvent = {
    type: "outcome_unknown",
    at_ms: nowMs,
    attempt: from.attempt,
    code: ambiguity.code,
    reconcile,
  };
  if (reconcile === "lookup")
    return startLookup({ ...base, reconcile, dueAtMs: null }, plan, nowMs, [
      ...trace,
      unknownEvent,
    ]);
  return {
    state: { ...base, reconcile, dueAtMs: null },
    effects: [{ kind: "clear_alarm" }],
    trace: [...trace, unknownEvent],
    changed: true,
  };
}

function afterAttempt(
  state: Extract<OperationState, { phase: "executing" }>,
  observed: Observation,
  plan: OperationPlan,
  nowMs: number,
): Step {
  const finished: TraceEvent = {
    type: "attempt_finished",
    at_ms: nowMs,
    attempt: state.attempt,
    observed: summarize(observed),
  };
  const decision = classify(plan.safety, observed);
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
      const retry = planRetry({
        policy: plan.retry,
        operationId: plan.operationId,
        attempt: state.attempt,
        firstAttemptAtMs: state.firstAttemptAtMs,
        nowMs,
        retryAfterMs: decision.retryAfterMs,
      });
      if (retry.kind === "exhausted") {
        const outcome = exhaustedOutcome(retry.budget, decision.reason);
        return ambiguity
          ? stayUnknown(state, ambiguity, outcome, decision.reason, plan, nowMs, [finished])
          : record(state.attempt, outcome, "attempt", nowMs, [finished]);
      }
      return {
        state: {
          phase: "retry_scheduled",
          attempt: state.attempt,
          dueAtMs: retry.dueAtMs,
          firstAttemptAtMs: state.firstAttemptAtMs,
          reason: decision.reason,
          mayHaveApplied: ambiguity,
        },
        effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
        trace: [
          finished,
          {
            type: "retry_scheduled",
            at_ms: nowMs,
            attempt: state.attempt,
            delay_ms: retry.delayMs,
            due_at_ms: retry.dueAtMs,
            reason: decision.reason,
          },
        ],
        changed: true,
      };
    }
    case "unknown": {
      const ambiguity: Ambiguity = { atMs: state.startedAtMs, code: decision.code };
      const base = {
        phase: "outcome_unknown" as const,
        attempt: state.attempt,
        firstAttemptAtMs: state.firstAttemptAtMs,
        code: decision.code,
        ambiguousAtMs: state.startedAtMs,
        lookups: 0,
        reason: decision.reason,
      };
      const unknownEvent: TraceEvent = {
        type: "outcome_unknown",
        at_ms: nowMs,
        attempt: state.attempt,
        code: decision.code,
        reconcile: decision.reconcile,
      };
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
          [finished, { ...unknownEvent, reconcile: "lookup" }],
        );
      }
      if (decision.reconcile === "resend") {
        const retry = planRetry({
          policy: plan.retry,
          operationId: plan.operationId,
          attempt: state.attempt,
          firstAttemptAtMs: state.firstAttemptAtMs,
          nowMs,
          retryAfterMs: null,
        });
        if (retry.kind === "exhausted")
          return stayUnknown(
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
            unknownEvent,
            {
              type: "retry_scheduled",
              at_ms: nowMs,
              attempt: state.attempt,
              delay_ms: retry.delayMs,
              due_at_ms: retry.dueAtMs,
              reason: "resend with the same idempotency key",
            },
          ],
          changed: true,
        };
      }
      // No automatic way left to learn the truth: the operation waits for a person (POST .../resolve).
      return {
        state: { ...base, reconcile: "human", dueAtMs: null, ifNotApplied: null },
        effects: [{ kind: "clear_alarm" }],
        trace: [finished, unknownEvent],
        changed: true,
      };
    }
  }
}

function afterLookup(
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
      const retry = planRetry({
        policy: plan.retry,
        operationId: plan.operationId,
        attempt: state.attempt,
        firstAttemptAtMs: state.firstAttemptAtMs,
        nowMs,
        retryAfterMs: null,
      });
      if (retry.kind === "exhausted")
        return record(
          state.attempt,
          exhaustedOutcome(retry.budget, "the status lookup shows the effect did not happen"),
          "attempt",
          nowMs,
          [finished],
        );
      return {
        state: {
          phase: "retry_scheduled",
          attempt: state.attempt,
          dueAtMs: retry.dueAtMs,
          firstAttemptAtMs: state.firstAttemptAtMs,
          reason: "not applied upstream",
          mayHaveApplied: null,
        },
        effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
        trace: [
          finished,
          {
            type: "retry_scheduled",
            at_ms: nowMs,
            attempt: state.attempt,
            delay_ms: retry.delayMs,
            due_at_ms: retry.dueAtMs,
            reason: "not applied upstream",
          },
        ],
        changed: true,
      };
    }
    case "inconclusive": {
      if (state.lookups >= plan.retry.maxAttempts) {
        return {
          state: { ...base, reconcile: "human", dueAtMs: null, reason: observed.detail },
          effects: [{ kind: "clear_alarm" }],
          trace: [
            finished,
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

function onAlarm(
  state: OperationState,
  inFlight: boolean,
  plan: OperationPlan,
  nowMs: number,
): Step {
  switch (state.phase) {
    case "awaiting_approval":
      // Alarms are at-least-once and may fire early after a restart: expire only when due.
      if (plan.approval && nowMs < plan.approval.expiresAtMs)
        return {
          ...unchanged(state),
          effects: [{ kind: "set_alarm", atMs: plan.approval.expiresAtMs }],
        };
      return expireApproval(state, nowMs);
    case "awaiting_lock":
      return {
        ...unchanged(state),
        effects: [
          { kind: "set_alarm", atMs: nextLockRecheckAtMs(state.requestedAtMs, nowMs) },
          { kind: "acquire_lock" },
        ],
      };
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
      return startAttempt(
        state.attempt + 1,
        state.firstAttemptAtMs,
        nowMs,
        plan,
        state.mayHaveApplied,
        [],
      );
    case "outcome_unknown":
      if (state.reconcile === "resend")
        return startAttempt(
          state.attempt + 1,
          state.firstAttemptAtMs,
          nowMs,
          plan,
          ambiguityOf(state),
          [],
        );
      if (state.reconcile === "lookup") return startLookup(state, plan, nowMs, []);
      return unchanged(state);
    case "recorded":
      return unchanged(state);
  }
}

function startAttempt(
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

function startLookup(
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
    },
    effects: [
      { kind: "set_alarm", atMs: watchdogAt(plan, nowMs) },
      { kind: "send_lookup", lookups },
    ],
    trace: [...trace, { type: "reconcile_started", at_ms: nowMs, lookups }],
    changed: true,
  };
}

/** Only ever recorded when no attempt may have applied (or a trusted lookup proved none did). */
function exhaustedOutcome(budget: "attempts" | "elapsed", reason: string): Outcome {
  const limit = budget === "attempts" ? "its attempt budget" : "its time budget";
  return {
    status: "budget_exhausted",
    code: "attempts_exhausted",
    message: `The tool kept failing (last attempt: ${reason}) and used up ${limit}. It did not take effect. Do not retry now; tell the user.`,
  };
}

function record(
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

const unchanged = (state: OperationState): Step => ({
  state,
  effects: [],
  trace: [],
  changed: false,
});
const watchdogAt = (plan: OperationPlan, nowMs: number) =>
  nowMs + plan.timeoutMs + WATCHDOG_GRACE_MS;

function summarize(observed: Observation): Record<string, unknown> {
  switch (observed.kind) {
    case "ok":
      return { kind: "ok", ...(observed.status === undefined ? {} : { status: observed.status }) };
    case "http_error":
      return { kind: "http_error", status: observed.status, retry_after_ms: observed.retryAfterMs };
    case "crash":
      return { kind: "crash" };
    case "body_lost":
      return { kind: "body_lost", timed_out: observed.timedOut, detail: observed.detail };
    default:
      return { kind: observed.kind, detail: observed.detail };
  }
}

/** Settled = nothing more will happen without a person: the caller can stop waiting. */
export const isSettled = (state: OperationState): boolean =>
  state.phase === "recorded" || (state.phase === "outcome_unknown" && state.reconcile === "human");

/**
 * When this state's own alarm is due: what the transitions into it armed (null: none, or a recorded
 * operation, whose only alarm is its pruning, which the shell knows). The shell puts the alarm back
 * here after something else (an outbox redelivery) moved it earlier.
 */
export function stateAlarmAtMs(
  state: OperationState,
  plan: OperationPlan,
  nowMs: number,
): number | null {
  switch (state.phase) {
    case "awaiting_approval":
      return plan.approval?.expiresAtMs ?? null;
    case "awaiting_lock":
      return nextLockRecheckAtMs(state.requestedAtMs, nowMs);
    case "executing":
    case "reconciling":
      return watchdogAt(plan, state.startedAtMs);
    case "retry_scheduled":
    case "outcome_unknown":
      return state.dueAtMs;
    case "recorded":
      return null;
  }
}

/** When the operation will next act by itself (null: in flight now, or never). */
export function nextDueAtMs(state: OperationState): number | null {
  if (state.phase === "retry_scheduled") return state.dueAtMs;
  if (state.phase === "outcome_unknown") return state.dueAtMs;
  return null;
}
