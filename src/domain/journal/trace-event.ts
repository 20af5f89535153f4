// What a transition says, as one closed union (issue 32): every trace event an operation or a run
// writes, one arm per type, with the fields the annotation (domain/trace.ts), the chain
// (trace-chain.ts) and the run's read (durable/run/trace.ts) add. A reader switches on `type` with
// no `default`, so a new type it ignores fails tsc. No imports, on purpose: domain/operation/ imports
// this file (never the reverse), and packages/client ships it as the client's TraceEvent.

/** The lifecycle states a trace names, in order (an event with `state` entered it). */
export const LIFECYCLE = [
  "proposed",
  "validated",
  "awaiting_approval",
  "awaiting_lock",
  "awaiting_quota",
  "awaiting_credential",
  "executing",
  "retry_scheduled",
  "outcome_unknown",
  "reconciling",
  "held",
  "recorded",
  "reported",
] as const;
export type Lifecycle = (typeof LIFECYCLE)[number];

/** Why an attempt's outcome is unknown (classify.ts decides it; the trace and the state carry it). */
/**
 * Why an outcome is unknown: no answer in time, toolgate restarted mid-attempt, the connection
 * broke, a redirect was not followed, or the upstream answered an error status that does not say
 * whether it applied (408, a keyed 409 "in progress", a 5xx after the request was sent).
 */
export type UnknownCode =
  | "timeout_unknown"
  | "crash_unknown"
  | "connection_lost"
  | "redirect_unknown"
  | "upstream_error_unknown";

/** How one attempt ended, as a class (the attempt span's `toolgate.outcome`). */
export type AttemptOutcome =
  "succeeded" | "rejected" | "failed" | "budget_exhausted" | "cancelled" | "retryable" | "unknown";

/**
 * A request as toolgate sent it (or would send it), masked: every secret by name (`{secret:NAME}`),
 * never valued. An attempt's is kept in its `attempt_finished` event (`body_kept: false` when the
 * trace does not carry arguments): no row of its own (test/integration/row-budget.test.ts).
 */
export type SentRequest = {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | null;
  body_kept?: false;
};
/** What came back to one attempt: the status, the headers worth keeping, the start of an error body. */
export type UpstreamAnswer = {
  status: number;
  headers: Record<string, string>;
  /** The start of a non-2xx body (scrubbed, cut clear of secrets); a 2xx body is the result. */
  snippet: string | null;
};

/** An attempt's observation as the trace keeps it (no result, no secrets). */
export type ObservedSummary =
  | { kind: "ok"; status?: number }
  | { kind: "http_error"; status: number; retry_after_ms: number | null }
  | { kind: "crash" }
  | { kind: "body_lost"; timed_out: boolean; detail: string }
  | {
      kind: "invalid_output" | "timeout" | "connection_lost" | "config_error" | "not_sent";
      detail: string;
    };

/** One call of a turn as the run's trace lists it (`fixed`: how a call answered without an operation ended). */
export type TracedCall = {
  call_id: string;
  name: string;
  operation_id: string;
  fixed?: string;
  code?: string | null;
};

/** Fields any event may carry: the state it entered, its place on the chain, its operation on the run's read. */
type Common = {
  at_ms: number;
  state?: Lifecycle;
  seq?: number;
  prev_hash?: string;
  hash?: string;
  operation_id?: string;
};

/** The arms, by type: the fields each event carries besides the common ones. */
/**
 * How a decider's identity was established (issue 35): a Cloudflare Access JWT verified against the
 * team's keys (a person), an API key's name (a machine), a console session signed in with a key, or
 * a name a key holding approvals:delegate vouched for. Never a header nobody verified.
 */
export const DECIDER_VIA = ["access", "api_key", "console", "delegated"] as const;
export type DeciderVia = (typeof DECIDER_VIA)[number];

export type TraceFields = {
  // the run's own (durable/run/trace.ts, turn.ts)
  run_created: { run_id: string };
  run_cancelled: Record<never, never>;
  turn_received: { turn_id: string; calls: TracedCall[] };
  pruned: Record<never, never>;
  // the operation's opening
  proposed: { call_id: string; tool: string };
  validated: {
    input_hash: string;
    risk?: string | null;
    shadow?: true;
    arguments?: unknown;
  };
  idempotency_unverified: { status: string; enforced: boolean; detail: string };
  limits_reserved: { limits: Array<{ name: string; subject: string; amount: number }> };
  policy_decided: { policy_version: string; decision: "allow" | "deny"; policies: string[] };
  limit_denied: { limit: string; subject: string };
  denied: { code: string };
  cancel_requested: { by: string; phase: string };
  // approval
  awaiting_approval: { policy_version: string; requested_by: string; expires_at_ms: number };
  /** The older name of awaiting_approval, still in stored traces. */
  approval_requested: Record<never, never>;
  preview: { status: number | null; body: unknown; detail: string | null };
  /** `via`: how `by` was verified (DeciderVia; absent in traces written before issue 35). */
  approval_decided: {
    verdict: "approve" | "reject";
    by: string;
    via?: DeciderVia;
    /** "passkey": the decider's passkey, made for this input hash, was verified (issue 35). */
    step_up?: "passkey";
    reason: string | null;
    /** A delegate cast it: `by` is whose vote it is (the delegator), `cast_by` who pressed (issue 35). */
    cast_by?: string;
  };
  /**
   * A person edited the arguments of an awaiting call (issue 35 item 2): the new frozen version
   * (`input_hash`) replaced `from_input_hash`; the approval now binds to it. Hashes, not values.
   */
  approval_edited: {
    by: string;
    via: DeciderVia;
    from_input_hash: string;
    input_hash: string;
    reason: string | null;
  };
  approval_expired: { requested_at_ms: number };
  /** A routed approval (issue 35): an approve vote counted (`votes` of `quorum`), a delegate's as its delegator's. */
  approval_voted: { by: string; cast_by?: string; via: DeciderVia; votes: number; quorum: number };
  /** The route's timer reminded the current step's group, once per step. */
  approval_reminded: { step: number; group: string };
  /** The route's timer asked the next group (`step` is the new one); earlier groups keep their vote. */
  approval_escalated: { step: number; group: string; from_group: string };
  // the resource lock
  awaiting_lock: { resource: string | null };
  lock_granted: { resource: string | null; fencing_token: number };
  lock_queued: { resource: string | null; blocked_by: string };
  lock_waiting_long: { resource: string | null; blocked_by: string | null; waited_ms: number };
  // quota shaping (issue 34): the first attempt waits for a slot, gets one, or meets the deadline
  quota_waiting: {
    until_ms: number | null;
    reason: "rate" | "concurrency" | "paused";
    long: boolean;
    detail: string;
  };
  quota_granted: { waited_ms: number };
  quota_deadline: { slot_at_ms: number | null };
  // acting as the user (issue 36): no usable token before a send, then connected (never a token or link)
  credential_required: { attempt: number; provider: string; reason: string };
  credential_ready: { waited_ms: number };
  credential_expired: { provider: string; waited_ms: number };
  // attempts
  attempt_started: { attempt: number; idempotency_key: string };
  /**
   * x402 (issue 37): a 402's requirement accepted (`required`, `approval`: a person decides first),
   * refused (`refused`, with why), the one payload signed (`signed`, with the payment's id), or
   * that payload kept unsent because the checks after signing stopped the send (`unsent`, why).
   */
  payment: {
    what: "required" | "refused" | "signed" | "unsent";
    amount?: string;
    asset?: string;
    pay_to?: string;
    network?: string;
    approval?: boolean;
    reason?: string;
    payment_id?: string | null;
  };
  attempt_finished: {
    attempt: number;
    observed: ObservedSummary;
    request?: SentRequest;
    response?: UpstreamAnswer;
    outcome?: AttemptOutcome;
    upstream_status?: number | null;
    latency_ms?: number | null;
  };
  retry_scheduled: {
    attempt: number;
    delay_ms: number;
    due_at_ms: number;
    reason: string;
    basis?: "retry_after" | "backoff";
  };
  retry_deferred: {
    attempt: number;
    reason: string;
    detail: string;
    due_at_ms?: number;
    exhausted?: "elapsed" | "window";
  };
  // unknown outcomes
  outcome_unknown: {
    attempt?: number;
    code: UnknownCode;
    reconcile: string;
    due_at_ms?: number | null;
    reason?: string;
  };
  reconcile_started: { lookups: number };
  reconcile_finished: { lookups: number; found: "found" | "not_found" | "inconclusive" };
  reconcile_deferred: { until_ms: number };
  settle_scheduled: { due_at_ms: number; until_ms: number };
  settle_window_ended: { until_ms: number };
  resolved: { outcome: "succeeded" | "failed" | "resend"; reason: string; by: string };
  // standing grants (issue 35): the grant that approved a call, and its lapse before the first send
  grant_used: { grant_id: string; amount: number | null };
  grant_lapsed: { grant_id: string; reason: string };
  // holds (issue 34): an operator's freeze, a person's pause, and a person's retry-now
  held: { freeze_id: string; reason: string };
  hold_released: { freeze_id: string };
  paused: { by: string };
  resumed: { by: string };
  retry_now: { by: string; attempt: number };
  // the tenant's own chain (issue 34): each freeze and each lift
  freeze_created: {
    freeze_id: string;
    mode: "hold" | "refuse";
    scope: Record<string, string | true>;
    writes_only: boolean;
    reason: string;
    by: string;
    expires_at_ms: number | null;
  };
  freeze_lifted: { freeze_id: string; by: string; expired: boolean };
  // ... and each standing grant's life (issue 35): made (proposed, under four eyes), confirmed,
  // revoked, and each call it approved (once per operation, however often the notice came)
  grant_created: {
    grant_id: string;
    tools: string[];
    subject: Record<string, string> | "any";
    field: string | null;
    per_call_max: number | null;
    total_max: number | null;
    count: number | null;
    expires_at_ms: number;
    reason: string;
    by: string;
    proposed: boolean;
  };
  grant_confirmed: { grant_id: string; by: string };
  grant_revoked: { grant_id: string; by: string };
  grant_use: { grant_id: string; operation_id: string; amount: number | null };
  // the end
  recorded: {
    status: string;
    code?: string;
    via: "attempt" | "reconcile" | "resolve";
    late?: boolean;
    result?: unknown;
  };
  reported: { turn_id: string; format: string };
};

/**
 * A state entered with no event of its own naming it (domain/trace.ts annotate): `{type: phase,
 * state: phase}` and nothing else, so a reader of e.g. `recorded` also meets this bare arm.
 */
export type PhaseEntered = {
  type:
    | "executing"
    | "reconciling"
    | "awaiting_approval"
    | "awaiting_lock"
    | "awaiting_quota"
    | "awaiting_credential"
    | "retry_scheduled"
    | "held"
    | "recorded";
  at_ms: number;
  state: Lifecycle;
  seq?: number;
  prev_hash?: string;
  hash?: string;
  operation_id?: string;
};

export type TraceType = keyof TraceFields;
export type TraceOf<T extends TraceType> = { type: T } & Common & TraceFields[T];
export type TraceEvent = { [T in TraceType]: TraceOf<T> }[TraceType] | PhaseEntered;

/** One event of a type (the constructor every literal-free producer uses). */
export const traceEvent = <T extends TraceType>(
  type: T,
  atMs: number,
  fields: TraceFields[T],
): TraceOf<T> => ({ type, at_ms: atMs, ...fields }) as unknown as TraceOf<T>;

/** The field every own event of a type carries and its bare PhaseEntered namesake lacks. */
const OWN_FIELD = {
  awaiting_approval: "requested_by",
  awaiting_lock: "resource",
  retry_scheduled: "attempt",
  held: "freeze_id",
  recorded: "status",
} as const;

/** A state entered with no event of its own (executing, reconciling, or a bare namesake). */
export function isPhaseEntered(event: TraceEvent): event is PhaseEntered {
  switch (event.type) {
    case "executing":
    case "reconciling":
      return true;
    case "awaiting_approval":
    case "awaiting_lock":
    case "retry_scheduled":
    case "held":
    case "recorded":
      return !(OWN_FIELD[event.type] in event);
    default:
      return false;
  }
}

/** The own arm of a type (never its bare PhaseEntered namesake). */
export type OwnEvent<T extends TraceType> = Extract<Exclude<TraceEvent, PhaseEntered>, { type: T }>;

const isOwn = <T extends TraceType>(event: TraceEvent, type: T): event is OwnEvent<T> =>
  event.type === type && !isPhaseEntered(event);

/** The events of one type, narrowed to its own arm (readers that pick rather than walk). */
export const eventsOf = <T extends TraceType>(
  events: readonly TraceEvent[],
  type: T,
): OwnEvent<T>[] => events.filter((event): event is OwnEvent<T> => isOwn(event, type));

/** The first event of one type, narrowed to its own arm. */
export const firstOf = <T extends TraceType>(
  events: readonly TraceEvent[],
  type: T,
): OwnEvent<T> | undefined => events.find((event): event is OwnEvent<T> => isOwn(event, type));

/** The bare arm named after the phase an annotation entered. */
export const phaseEntered = (phase: PhaseEntered["type"], atMs: number): PhaseEntered => ({
  type: phase,
  at_ms: atMs,
  state: phase,
});

// ── constructors with a rule of their own ───────────────────────────────────────────────────────

export const unknownEvent = (
  attempt: number,
  code: UnknownCode,
  reconcile: "resend" | "lookup" | "human",
  nowMs: number,
): TraceOf<"outcome_unknown"> => traceEvent("outcome_unknown", nowMs, { attempt, code, reconcile });

/** A late try is planned inside the key's window (retry-late.ts). */
export const settleScheduledEvent = (atMs: number, untilMs: number, nowMs: number) =>
  traceEvent("settle_scheduled", nowMs, { due_at_ms: atMs, until_ms: untilMs });

/** No late try fits in the key's window any more: nothing more is sent; a person decides. */
export const settleEndedEvent = (untilMs: number, nowMs: number) =>
  traceEvent("settle_window_ended", nowMs, { until_ms: untilMs });

/** The caller received the recorded result in a turn response (`format`: the provider format it was written in). */
export const reportedEvent = (
  turnId: string,
  format: string,
  nowMs: number,
): TraceOf<"reported"> => ({
  type: "reported",
  at_ms: nowMs,
  state: "reported",
  turn_id: turnId,
  format,
});
