// The operation's data: the plan frozen with it, its states (each arm holds only the fields valid
// in it), the events that move it, the effects the shell performs and the step a transition returns.
// Types only, imported by every other file of the machine and by nothing it imports (the bottom floor).
// An approval binds to operation id + input hash + policy version: the request travels in the plan.
import type { RepeatSafety } from "../classify.ts";
import type {
  DeciderVia,
  SentRequest,
  TraceEvent,
  UnknownCode,
  UpstreamAnswer,
} from "../journal/trace-event.ts";
import type { LookupObservation, Observation } from "../observation.ts";
import type { LimitClaim } from "../limit/window.ts";
import type { PolicyRequest } from "../policy-request.ts";
import type { QuotaClaim } from "../quota/definition.ts";
import type { QuotaAnswer } from "../quota/slots.ts";
import type { RetryPolicy } from "../retry.ts";
import type { LateSettle } from "../retry-late.ts";
import type { IdempotencyTrust } from "../verification.ts";
import type { StoredPayment } from "../payment.ts";

export type ApprovalRequest = {
  inputHash: string;
  toolVersion: string;
  requestedBy: string;
  fourEyes: boolean;
  /** "passkey": approving needs a WebAuthn assertion bound to this input hash (issue 35); absent: none. */
  stepUp?: "passkey";
  expiresAtMs: number;
  /** Who votes, how many must, and when to remind and escalate (issue 35; absent: one person decides). */
  route?: Route;
  /**
   * Who edited the arguments into this version (issue 35 item 2; absent: the model's own). Under
   * four eyes they cannot approve it: an edit by A needs B's approval of the edited hash.
   */
  editedBy?: string;
  /**
   * x402 (issue 37): the payment this approval is asked for — the requirement a 402 asked and the
   * declaration allows, and the only one signed once approved (a 402 asking another is refused).
   */
  payment?: ApprovalPayment;
};
/** The requirement a payment approval covers, as the approver sees it (amounts in atomic units). */
export type ApprovalPayment = { amount: string; asset: string; network: string; payTo: string };
/**
 * A person's edit of an awaiting call's arguments (issue 35 item 2): `fromHash` is the version they
 * looked at (a stale one is refused), `inputHash` the new frozen version the approval now binds to.
 */
export type ApprovalEdit = {
  fromHash: string;
  inputHash: string;
  by: string;
  via: DeciderVia;
  reason: string | null;
};
/**
 * An approver group (issue 35): a decider belongs when the key that carried its decision holds one
 * of `scopes`, or its verified id (Access email, key name) is one of `members`, or — a person
 * Cloudflare Access verified — a claim of their token holds one of `claims[name]` (a string equal to
 * it, or an array containing it: `groups`, `custom.department`) or their email's domain is one of
 * `email_domains`. Absent in plans frozen before attribute groups: none.
 */
export type ApproverGroup = {
  name: string;
  scopes: string[];
  members: string[];
  claims?: Record<string, string[]>;
  email_domains?: string[];
};
/** One step of a route: its group, and when (after the step began) to remind it and escalate past it. */
export type RouteStep = {
  group: ApproverGroup;
  remindAfterMs: number | null;
  /** Null on the last step: nothing to escalate to, and it never approves by itself. */
  escalateAfterMs: number | null;
};
/** `quorum` distinct approvers, none the proposer, from the groups of the steps reached so far. */
export type Route = { quorum: number; steps: RouteStep[] };
/** A counted approve vote: `by` whose vote it is; `castBy` who cast it (another id: a delegate). */
export type Vote = { by: string; castBy: string; via: DeciderVia; atMs: number };
/** Where a routed approval stands: the step reached, since when, whether it was reminded, the votes. */
export type Routing = { step: number; stepAtMs: number; reminded: boolean; votes: Vote[] };
/**
 * Who decides, as the edge verified it (http/auth.ts `decider`): the id, how it was verified, the
 * scopes of the key or session that carried it and — Access only — the token's claims. One shape
 * for a single decision, a batch and a rollback's plan approval.
 */
export type Decider = {
  id: string;
  via: DeciderVia;
  scopes: string[];
  claims?: Record<string, string[]>;
};
export type Decision = {
  verdict: "approve" | "reject";
  approverId: string;
  /** How `approverId` was verified (trace-event.ts DECIDER_VIA). */
  via: DeciderVia;
  /** "passkey": the edge verified the decider's passkey assertion for this operation's input hash. */
  stepUp?: "passkey";
  reason: string | null;
  inputHash: string | null;
  toolVersion: string | null;
  /**
   * The approval the decider saw (approval.ts `approvalHashOf`); absent: the one `inputHash` names
   * if any, which only a plain approval of those arguments is (a payment's approval is not).
   */
  approvalHash?: string;
  /** The scopes of the key that carried the decision: a route's groups by scope (issue 35). */
  scopes?: string[];
  /**
   * The verified Access token's claims (string and string-array ones, `custom.*` flattened), only
   * with `via: "access"`: a route's groups by attribute (issue 35). Never from a header or a key.
   */
  claims?: Record<string, string[]>;
  /** A delegation in force (issue 35): the vote is `id`'s, whose scopes were these when they delegated. */
  onBehalfOf?: { id: string; scopes: string[] };
};
export type DecisionRefusal =
  | { code: "self_approval"; detail: string }
  /** The call routes its approval to groups this decider is in none of (yet). */
  | { code: "not_an_approver"; detail: string }
  /** The tool asks for a passkey step-up to approve and the decision came without one verified. */
  | { code: "step_up_required"; detail: string }
  /** `field`: what changed since the approver looked — the arguments or the tool's version. */
  | {
      code: "approval_mismatch";
      detail: string;
      field: "input_hash" | "policy_version" | "approval_hash";
    };

/** Frozen at validation and stored with the operation: everything a transition needs about the tool. */
export type OperationPlan = {
  operationId: string;
  /** Acting as the user (issue 36): whose token each send asks for, frozen at the start; absent: none. */
  credential?: { provider: string; user: string; scopes: string[] };
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
  /**
   * Late settlement (domain/retry-late.ts): once the attempts of a keyed write (or the lookups of a
   * tool with a status lookup) ran out while the outcome is unknown, toolgate keeps trying on this
   * schedule until the key's window ends. Absent in plans frozen before it existed (a person decides).
   */
  lateSettle?: LateSettle;
  /**
   * What it holds of limits across runs (issue 21), reserved before this row was written: kept
   * when it succeeds or its outcome is unknown, released when it is recorded with nothing applied.
   * Absent: it holds none.
   */
  limits?: LimitClaim[];
  /**
   * What this call looks like to Cedar (issue 31), frozen for every operation whether or not its
   * tenant had a policy set at the start: before every later attempt the set of that moment, if
   * any, is asked about this request. Absent in plans frozen before (gather.ts rebuilds one).
   */
  policyRequest?: PolicyRequest;
  /**
   * The tenant's Cedar policy set had its say at the start (issue 21): the version that decided,
   * the decision and the determining policies. Absent: the tenant had no policy set then. `request`:
   * where plans frozen before `policyRequest` kept the request.
   */
  cedar?: {
    version: string;
    decision: "allow" | "deny";
    policies: string[];
    /** Why it could not be evaluated (a deny), when it could not. */
    errors?: string[];
    request?: PolicyRequest;
  };
  /**
   * A shadow run's operation (issue 22): every request it makes goes to its tool's sandbox, never
   * to production (durable/operation/send.ts decides from this field alone). `would_send`: the
   * production request it would have sent, secrets shown by name (`{secret:NAME}`), or why it
   * could not be built.
   */
  shadow?: { would_send: WouldSend };
  /**
   * Undo (issue 22): this operation is the compensation of the operation with this id, submitted by
   * the original's run for a person (POST …/compensate) or a rollback. The run authorizes its sends
   * from its compensation row, not from the model's offered tools (durable/run/compensate.ts).
   */
  compensates?: string;
  /**
   * Quota shaping (issue 34 item 4): the quotas its first attempt waits for (a token bucket, a
   * concurrency cap, or only an origin paused by its upstream), frozen from the run's tenant facts.
   * Absent: none, and the first attempt asks nothing.
   */
  quotas?: QuotaClaim[];
  /**
   * The run's deadline when it started (null or absent: none): no quota slot is waited for past
   * it, nor a user's connection (issue 36).
   */
  deadlineAtMs?: number | null;
  /**
   * A standing grant approved it (issue 35): `approval` is still planned (what a person is asked
   * if the grant lapses before the first send), but not asked at the start. Its claims on the
   * grant's counters are among `limits` (released with them when nothing was applied).
   */
  grant?: { id: string; amount: number | null };
  /**
   * x402 pay-once (issue 37): the requirement accepted at a 402, then the one payload the tenant's
   * signer signed for it, written with the transition before the paid request is sent and resent on
   * every retry (domain/payment.ts). Absent: no 402 was accepted.
   */
  payment?: StoredPayment;
};
export type WouldSend = SentRequest | { error: string };
/** One attempt's exchange: null parts were not reached (nothing built, nothing answered). */
export type Exchange = { request: SentRequest | null; response: UpstreamAnswer | null };

export type TerminalStatus = "succeeded" | "rejected" | "failed" | "budget_exhausted" | "cancelled";
export type Outcome =
  | { status: "succeeded"; result: unknown }
  | {
      status: Exclude<TerminalStatus, "succeeded">;
      code: string;
      message: string;
      /** approval_rejected: the approver's reason, exactly as written (issue 35); the model reads it. */
      reason?: string;
    };

/**
 * Whether a recorded outcome took effect: succeeded, or failed with `invalid_output` — the tool
 * answered success (so a write applied) with an answer toolgate could not accept or read (so it has
 * no result). Every other recorded non-success applied nothing: once an attempt may have applied,
 * only proof records one (classify.ts, steps.ts).
 */
export function tookEffect(status: string | null, code: string | null): boolean {
  return status === "succeeded" || (status === "failed" && code === "invalid_output");
}

/** The latest attempt that may have applied: when it started (the settle window counts from there) and why. */
export type Ambiguity = { atMs: number; code: UnknownCode };

export type RetryScheduled = {
  phase: "retry_scheduled";
  attempt: number;
  dueAtMs: number;
  firstAttemptAtMs: number;
  reason: string;
  mayHaveApplied: Ambiguity | null;
  /** Deferred by the upstream's pause of its origin (issue 34): `long`, a used-up quota. */
  paused?: { untilMs: number; long: boolean };
};
/**
 * `ambiguousAtMs`: start of the latest attempt that may have applied. `ifNotApplied`: what to
 * record once a trusted lookup proves it did not happen (null: send again); set by exhaustion,
 * denial or cancellation, which forbid further sends.
 */
export type OutcomeUnknown = {
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
  /**
   * Settling by itself (retry-late.ts): the next late try is at `dueAtMs`, none after this
   * (the key's window). Absent: not settling late (a first resend or lookup, or a person decides).
   */
  settleUntilMs?: number;
};

/** Why a held operation sends nothing (issue 34): an operator's freeze, or a person's pause. */
export type Hold =
  { kind: "freeze"; freezeId: string; reason: string } | { kind: "pause"; by: string };
/**
 * Where a held operation continues: its first send (`unsent`: nothing sent, no lease held), a
 * scheduled retry, or the resend of an unknown outcome (which keeps its lease and its honesty).
 */
export type Resumable = { phase: "unsent" } | RetryScheduled | OutcomeUnknown;

export type OperationState =
  /** Nothing has been sent; a person decides (plan.approval). Expires at plan.approval.expiresAtMs. */
  | { phase: "awaiting_approval"; requestedAtMs: number; routing?: Routing }
  /** Nothing has been sent; another operation holds plan.resource (`blockedBy`, when the lock said who). */
  | {
      phase: "awaiting_lock";
      requestedAtMs: number;
      blockedBy: string | null;
      /** Set by the recheck that reported `lock.waiting_long` (absent in rows written before it). */
      waitedLong?: true;
    }
  /**
   * Nothing has been sent; the first attempt waits for its quotas (plan.quotas): a slot at
   * `dueAtMs`, a place under a concurrency cap (null: woken when one frees), or the end of the
   * upstream's pause (`long`: a used-up quota, not a transient 429). Spends no attempt.
   */
  | {
      phase: "awaiting_quota";
      requestedAtMs: number;
      dueAtMs: number | null;
      reason: "rate" | "concurrency" | "paused";
      long: boolean;
      detail: string;
    }
  /**
   * Nothing was sent: the send found no usable token of the run's end user (issue 36: never
   * connected, `invalid_grant`, a scope missing). `attempt` was given back: it is sent as this
   * number once they connect (the callback wakes it; `recheckAtMs`: it asks again by itself).
   */
  | {
      phase: "awaiting_credential";
      attempt: number;
      firstAttemptAtMs: number;
      mayHaveApplied: Ambiguity | null;
      requestedAtMs: number;
      provider: string;
      reason: string;
      connectUrl: string;
      recheckAtMs: number;
      /** The wait ends here, recorded as not sent (CREDENTIAL_WAIT_MS, or the run's deadline). */
      expiresAtMs: number;
    }
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
      /** A late try (retry-late.ts): the operation keeps settling by itself until then. */
      settleUntilMs?: number;
      /** The late schedule's slot this try was started for (the next one comes after it). */
      settleSlotMs?: number;
    }
  | RetryScheduled
  | OutcomeUnknown
  | {
      phase: "reconciling";
      attempt: number;
      firstAttemptAtMs: number;
      code: UnknownCode;
      ambiguousAtMs: number;
      lookups: number;
      startedAtMs: number;
      ifNotApplied: Outcome | null;
      /** A late lookup (retry-late.ts): the operation keeps settling by itself until then. */
      settleUntilMs?: number;
      /** The late schedule's slot this lookup was started for (the next one comes after it). */
      settleSlotMs?: number;
    }
  /**
   * Nothing is sent while held (issue 34): an operator's freeze or a person's pause stops it at its
   * next send point; `resume` is where it continues when the hold ends (never an attempt spent).
   * `recheckAtMs`: a freeze's hold asks again by itself then (a lost wake never strands it).
   */
  | {
      phase: "held";
      hold: Hold;
      resume: Resumable;
      heldAtMs: number;
      recheckAtMs: number | null;
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
  /** The send found no usable token (issue 36): nothing sent; `connectUrl` is for the user to open. */
  | {
      type: "credential_required";
      attempt: number;
      provider: string;
      reason: string;
      connectUrl: string;
    }
  /** The user connected (the callback's wake, or a recheck found it): send the attempt it gave back. */
  | { type: "credential_ready" }
  /** `cancelledBy`: the run cancelled this call before its operation existed (a cancel that overtook the dispatch). */
  /** `limitDenied`: a limit across runs refused it (nothing reserved of that limit, nothing sent). */
  | {
      type: "start";
      inputHash: string;
      callId: string;
      tool: string;
      cancelledBy?: string | null;
      limitDenied?: { limit: string; subject: string; message: string } | null;
      /** The tenant's Cedar policy set denied it (plan.cedar says which version and policies). */
      policyDenied?: { message: string } | null;
      /** A freeze applied at the start (issue 34): held at its first send, or refused unsent. */
      frozen?: { mode: "hold"; hold: Hold } | { mode: "refuse"; message: string } | null;
    }
  /** `exchange`: the masked request and the answer (absent when no request was made: a crash, a watchdog). */
  | { type: "attempt_finished"; attempt: number; observation: Observation; exchange?: Exchange }
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
      reason: "retry_budget" | "unavailable" | "rate_limited";
      detail: string;
      /** rate_limited: the upstream paused the origin this long or longer (a used-up quota). */
      long?: boolean;
    }
  /** The quotas answered (durable/operation/quota-client.ts): granted, a wait, or past the deadline. */
  | { type: "quota_answered"; answer: QuotaAnswer }
  /** The approver's preview came back (shown with the request; it changes nothing else). */
  | {
      type: "preview_finished";
      preview: { status: number | null; body: unknown; detail: string | null };
    }
  /** The resource lock answered: this operation holds it (with its fencing token), or waits behind `blockedBy`. */
  | { type: "lock_granted"; fencingToken: number }
  | { type: "lock_queued"; blockedBy: string }
  /**
   * The standing grant it relied on was revoked or expired before its first send (issue 35):
   * nothing is sent; it asks a person (plan.approval), giving back its lease or quota place.
   */
  | { type: "grant_lapsed"; grantId: string; reason: string }
  /** A freeze in `hold` mode applies at this send point (issue 34): nothing is sent. */
  | { type: "hold"; hold: Extract<Hold, { kind: "freeze" }> }
  /**
   * The hold ends (issue 34): the freeze no longer applies (`freeze`: lifted or expired, the shell
   * asked before, with the send's secrets and the retry budget) or a person resumed it (`pause`).
   */
  | { type: "release"; of: "freeze" | "pause"; by: string }
  /** A person pauses a waiting operation / sends its next attempt now (issue 34 item 3). */
  | { type: "pause"; by: string }
  | { type: "retry_now"; by: string }
  /**
   * A person edited the arguments while it awaits approval (issue 35 item 2): the shell has
   * validated the new version and re-checked and re-sized everything; it still awaits approval,
   * now of `edit.inputHash` (the plan the shell writes with this event binds to it).
   */
  | { type: "edit"; edit: ApprovalEdit }
  /**
   * x402 (issue 37): the attempt in flight was answered 402 and the shell decided what to do of it
   * (`verdict`); it ends that attempt as `attempt_finished` would, with the same observation.
   */
  | {
      type: "payment_required";
      attempt: number;
      observation: Observation;
      exchange?: Exchange;
      verdict: PaymentVerdict;
    }
  /** The tenant's signer signed the payment; the shell writes the plan holding it with this event. */
  | { type: "payment_signed"; attempt: number; paymentId: string | null }
  /**
   * x402: the checks asked after signing (the run, the Cedar set and the freezes of the moment)
   * stop attempt `attempt`'s paid request before it is sent; the payload stays stored and unsent.
   * A denial ends the call (nothing paid); a `hold` freeze holds it (the same payload goes after).
   */
  | {
      type: "payment_stopped";
      attempt: number;
      stop:
        | {
            kind: "denied";
            status: "rejected" | "budget_exhausted" | "cancelled";
            code: string;
            message: string;
          }
        | { kind: "hold"; hold: Extract<Hold, { kind: "freeze" }> };
    }
  /** A person's decision; `denial`: what the run says about executing now (approval is not authorization). */
  | {
      type: "decide";
      decision: Decision;
      denial: {
        status: "rejected" | "failed" | "budget_exhausted" | "cancelled";
        code: string;
        message: string;
      } | null;
      /** A freeze in `hold` mode applies now: the decision is recorded, the send waits (issue 34). */
      hold?: Extract<Hold, { kind: "freeze" }> | null;
    };

/**
 * What the shell decided of a 402 (durable/operation/payment.ts, domain/payment.ts): refused
 * (nothing signed; `failed` when the signed payment itself was refused), or to be paid — at once,
 * or once a person approves `approval` (the plan the shell writes with the event carries it).
 */
export type PaymentVerdict =
  | {
      kind: "refuse";
      status: "rejected" | "failed";
      code: "payment_refused" | "payment_failed";
      reason: string;
      message: string;
      /** The shell reserved payment limits before one refused: the row's plan holds them, to release. */
      released?: true;
    }
  | {
      kind: "pay";
      amount: string;
      asset: string;
      payTo: string;
      network: string;
      approval: (ApprovalRequest & { preview: boolean }) | null;
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
  /** A routed approval's step (issue 35): told as its event, the inbox row refreshed with the votes. */
  | { kind: "route"; what: "voted" | "reminded" | "escalated" | "quorum_reached" }
  /** Send the tool's preview request once, for the approver. */
  | { kind: "send_preview" }
  /** Ask plan.resource's lock for the lease (idempotent), or give it back once the outcome is settled. */
  | { kind: "acquire_lock" }
  | { kind: "release_lock" }
  /** Ask plan.quotas for the first attempt's slot (idempotent: keyed by operation id + attempt). */
  | { kind: "acquire_quota" }
  /** Stopped waiting for its quotas with nothing sent: give back its place in their queues. */
  | { kind: "release_quota" }
  /** Give back plan.limits' reservations: recorded with nothing applied (durable, via the outbox). */
  | { kind: "release_limits" }
  /**
   * The operation joined or left the tenant's unknown-outcomes list: `person`, it waits for a
   * person's verdict; otherwise it is listed as settling by itself (a person may still decide).
   */
  | { kind: "needs_person"; open: boolean; person: boolean };

export type { SentRequest, TraceEvent, UpstreamAnswer };

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
  /** pause / resume / retry-now on an operation not waiting in a way they apply to (issue 34). */
  | { code: "not_waiting"; phase: OperationState["phase"]; detail: string }
  | { code: "not_started" };
