// The operation trace as people and tools read it (issue 10). Three pure steps the shell applies to
// the events a transition returns, inside the same transaction: `annotate` names the lifecycle state
// each transition entered (proposed → validated → [awaiting_approval] → executing → [outcome_unknown →
// reconciling] → recorded → reported) and adds what an attempt cost (latency, outcome class, upstream
// status, why this backoff); `seal` (trace-chain.ts) chains every event to the previous one by
// SHA-256 over its canonical JSON, so `verifyChain` says exactly where a stored log was changed;
// `logLine` is the structured log record of an attempt or decision (fixed fields only: never free
// text, never secrets). An event with `state` is a transition into that state; one without is a
// decision or observation.
import {
  phaseEntered,
  type AttemptOutcome,
  type Lifecycle,
  type SentRequest,
  type TraceEvent,
} from "./journal/trace-event.ts";
import type { OperationState } from "./operation/index.ts";
import { redactDocument, scrub, type Redaction } from "./redact.ts";
import { seal, type ChainLink } from "./trace-chain.ts";

/** The event types that enter a state, and the state each enters. */
const ENTERS: Readonly<Record<string, Lifecycle>> = {
  proposed: "proposed",
  validated: "validated",
  awaiting_approval: "awaiting_approval",
  awaiting_lock: "awaiting_lock",
  attempt_started: "executing",
  retry_scheduled: "retry_scheduled",
  outcome_unknown: "outcome_unknown",
  reconcile_started: "reconciling",
  held: "held",
  paused: "held",
  credential_required: "awaiting_credential",
  recorded: "recorded",
  reported: "reported",
};

const lifecycleOf = (state: OperationState | null): Lifecycle | null =>
  state === null ? null : state.phase;

/**
 * `prev`/`next`: the states around one transition that emitted `events` at `nowMs`. A transition
 * whose events name no state it entered (a status lookup that answered "ask again later") gets
 * one appended, so every change of state is an event.
 */
export function annotate(
  prev: OperationState | null,
  next: OperationState,
  events: readonly TraceEvent[],
  nowMs: number,
): TraceEvent[] {
  let current = lifecycleOf(prev);
  const retryAfter = events.some(
    (event) =>
      event.type === "attempt_finished" &&
      event.observed.kind === "http_error" &&
      event.observed.retry_after_ms !== null,
  );
  const out = events.map((event): TraceEvent => {
    // A resend after an unknown outcome is planned like a retry, but the state stays outcome_unknown.
    // A retry the host's budget deferred re-enters the state it waits in, with a later due time
    // (unless the deferral exhausted it: then the events after it name the state entered).
    const entered =
      event.type === "retry_deferred"
        ? prev?.phase === next.phase
          ? next.phase
          : undefined
        : event.type === "retry_scheduled" && next.phase !== "retry_scheduled"
          ? undefined
          : ENTERS[event.type];
    if (entered) current = entered;
    if (event.type === "attempt_finished") {
      const { observed } = event;
      return {
        ...event,
        outcome: attemptOutcome(next),
        upstream_status: "status" in observed ? (observed.status ?? null) : null,
        latency_ms: prev?.phase === "executing" ? nowMs - prev.startedAtMs : null,
      };
    }
    if (event.type === "retry_scheduled")
      return {
        ...event,
        ...(entered ? { state: entered } : {}),
        basis: retryAfter ? "retry_after" : "backoff",
      };
    return entered ? { ...event, state: entered } : event;
  });
  if (current !== next.phase) {
    out.push(
      next.phase === "outcome_unknown"
        ? {
            type: "outcome_unknown",
            at_ms: nowMs,
            state: "outcome_unknown",
            code: next.code,
            reconcile: next.reconcile,
            due_at_ms: next.dueAtMs,
            reason: next.reason,
          }
        : phaseEntered(next.phase, nowMs),
    );
  }
  return out;
}

function attemptOutcome(next: OperationState): AttemptOutcome {
  switch (next.phase) {
    case "recorded":
      return next.outcome.status;
    case "retry_scheduled":
      return "retryable";
    case "outcome_unknown":
    case "reconciling":
      return "unknown";
    // An attempt never ends in these; a cancel that arrived first is recorded, not waited on.
    case "held":
    case "executing":
    case "awaiting_approval":
    case "awaiting_lock":
    case "awaiting_quota":
    case "awaiting_credential":
      return "unknown";
  }
}

/** What the trace may show about the call besides its transitions (arguments and result only by opt-in). */
export type TraceDetails = {
  redaction: Redaction;
  risk: string | null;
  /** The frozen arguments when the tool opts in (redacted here before anything stores them). */
  arguments?: unknown;
  includeResult: boolean;
  /** A shadow run's write (issue 22): its `validated` event says so. */
  shadow?: boolean;
};

/** One transition's events as stored: annotated, detailed, redacted, then sealed onto the chain. */
export function traceStep(args: {
  prev: OperationState | null;
  next: OperationState;
  events: readonly TraceEvent[];
  nowMs: number;
  last: ChainLink | null;
  details: TraceDetails;
}): TraceEvent[] {
  const { details, next } = args;
  const detailed = annotate(args.prev, next, args.events, args.nowMs).map((event): TraceEvent => {
    if (event.type === "validated")
      return {
        ...event,
        risk: details.risk,
        ...(details.shadow ? { shadow: true as const } : {}),
        ...(details.arguments === undefined ? {} : { arguments: details.arguments }),
      };
    if (event.type === "attempt_finished" && event.request)
      return {
        ...event,
        request: requestForTrace(event.request, details.arguments !== undefined, details.redaction),
      };
    if (
      event.type === "recorded" &&
      details.includeResult &&
      next.phase === "recorded" &&
      next.outcome.status === "succeeded"
    )
      return { ...event, result: next.outcome.result ?? null };
    return event;
  });
  return seal(
    detailed.map((event) => redactEvent(event, details.redaction)),
    args.last,
  );
}

/**
 * An attempt's request as the trace keeps it: its body is the arguments, so it is kept only when the
 * tool opts in to carrying them (`trace.arguments`), with the redacted paths hidden when it is JSON;
 * otherwise `body: null, body_kept: false`. Every string is then scrubbed like the rest (redactEvent).
 */
function requestForTrace(
  request: SentRequest,
  keepBody: boolean,
  redaction: Redaction,
): SentRequest {
  if (request.body === null) return request;
  if (!keepBody) return { ...request, body: null, body_kept: false };
  let body = request.body;
  try {
    body = JSON.stringify(redactDocument(JSON.parse(request.body), redaction));
  } catch {}
  return { ...request, body };
}

/** The fields that hold documents (arguments, results, upstream bodies) lose the tool's paths; every string loses the hidden values. */
export function redactEvent(event: TraceEvent, redaction: Redaction): TraceEvent {
  // By field, not by type: any arm that holds a document under these names is covered.
  let out = scrub(event, redaction);
  if ("arguments" in out && out.arguments !== undefined)
    out = { ...out, arguments: redactDocument(out.arguments, redaction) };
  if ("result" in out && out.result !== undefined)
    out = { ...out, result: redactDocument(out.result, redaction) };
  if ("body" in out && out.body !== undefined)
    out = { ...out, body: redactDocument(out.body, redaction) };
  return out;
}

// ── structured logs ────────────────────────────────────────────────────────────────────────────

/**
 * One log line per attempt and per decision; other events (sent, proposed, reported — a delivery,
 * kept in the trace — …) are not logged (issue 19: a line per delivery was one per new write and
 * one per replay).
 */
const LOGGED: Readonly<Record<TraceEvent["type"], boolean>> = {
  attempt_finished: true,
  retry_scheduled: true,
  retry_deferred: true,
  outcome_unknown: true,
  reconcile_finished: true,
  approval_decided: true,
  approval_edited: true,
  approval_expired: true,
  grant_used: true,
  grant_lapsed: true,
  payment: true,
  approval_voted: true,
  approval_reminded: true,
  approval_escalated: true,
  resolved: true,
  denied: true,
  cancel_requested: true,
  recorded: true,
  run_created: false,
  run_cancelled: false,
  turn_received: false,
  pruned: false,
  proposed: false,
  validated: false,
  idempotency_unverified: false,
  limits_reserved: false,
  policy_decided: false,
  limit_denied: false,
  awaiting_approval: false,
  approval_requested: false,
  preview: false,
  awaiting_lock: false,
  lock_granted: false,
  lock_queued: false,
  lock_waiting_long: false,
  awaiting_quota: false,
  quota_waiting: true,
  awaiting_credential: false,
  credential_required: true,
  credential_ready: false,
  credential_expired: true,
  quota_granted: false,
  quota_deadline: true,
  attempt_started: false,
  reconcile_started: false,
  reconcile_deferred: false,
  settle_scheduled: false,
  settle_window_ended: false,
  reported: false,
  executing: false,
  reconciling: false,
  held: true,
  hold_released: true,
  paused: true,
  resumed: true,
  retry_now: true,
  freeze_created: false,
  freeze_lifted: false,
  grant_created: false,
  grant_confirmed: false,
  grant_revoked: false,
  grant_use: false,
};
/** Fixed, typed fields only: free text (details, bodies, messages, reasons given by people) never reaches a log. */
const LOG_FIELDS = [
  "state",
  "attempt",
  "outcome",
  "latency_ms",
  "upstream_status",
  "status",
  "code",
  "delay_ms",
  "basis",
  "reconcile",
  "found",
  "verdict",
  "by",
  "via",
  "late",
  "turn_id",
  "format",
] as const;

export type LogContext = { run_id: string; call_id: string; operation_id: string; tool: string };

export function logLine(event: TraceEvent, context: LogContext): Record<string, unknown> | null {
  if (!LOGGED[event.type]) return null;
  const line: Record<string, unknown> = {
    level: event.type === "attempt_finished" && event.outcome !== "succeeded" ? "warn" : "info",
    event: `toolgate.${event.type}`,
    at: event.at_ms,
    ...context,
  };
  const fields: Readonly<Record<string, unknown>> = event;
  for (const field of LOG_FIELDS) if (fields[field] !== undefined) line[field] = fields[field];
  if (event.type === "attempt_finished") line.observed = event.observed.kind;
  return line;
}
