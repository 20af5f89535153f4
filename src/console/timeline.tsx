// The run timeline: the run trace (GET /v1/runs/{id}/trace, as RunObject.traceFor returns it)
// grouped into the run's own events, its turns, and one ordered list per operation of every
// transition and attempt. Known event types get a readable label; any other type still renders,
// with all its fields, so a new trace event never disappears from the console. All text is escaped.
import type { FC } from "hono/jsx";
import {
  firstOf,
  isPhaseEntered,
  type TraceEvent,
  type TraceOf,
} from "../domain/journal/trace-event.ts";

export type OperationTimeline = {
  operationId: string;
  tool: string;
  callId: string;
  status: string;
  code: string | null;
  events: TraceEvent[];
};
export type GroupedTrace = {
  run: TraceEvent[];
  turns: Array<TraceOf<"turn_received">>;
  operations: OperationTimeline[];
};

export function groupTrace(events: TraceEvent[]): GroupedTrace {
  const run: TraceEvent[] = [];
  const turns: GroupedTrace["turns"] = [];
  const byOperation = new Map<string, TraceEvent[]>();
  for (const event of events) {
    const operationId = event.operation_id ?? null;
    if (event.type === "turn_received") turns.push(event);
    else if (operationId)
      byOperation.set(operationId, [...(byOperation.get(operationId) ?? []), event]);
    else run.push(event);
  }
  const operations = [...byOperation].map(([operationId, opEvents]): OperationTimeline => {
    const proposed = firstOf(opEvents, "proposed");
    return {
      operationId,
      tool: proposed?.tool ?? "unknown tool",
      callId: proposed?.call_id ?? "",
      ...statusOf(opEvents),
      events: opEvents,
    };
  });
  return { run, turns, operations };
}

/** The status the trace shows so far: the recorded outcome, else the last waiting state. */
function statusOf(events: TraceEvent[]): { status: string; code: string | null } {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]!;
    if (isPhaseEntered(event)) continue;
    if (event.type === "recorded") return { status: event.status, code: event.code ?? null };
    if (event.type === "outcome_unknown") return { status: "outcome_unknown", code: event.code };
    // The state machine logs `awaiting_approval`; `approval_requested` is the older name.
    if (event.type === "awaiting_approval" || event.type === "approval_requested")
      return { status: "awaiting_approval", code: null };
  }
  return { status: "pending", code: null };
}

/** How one event reads: its label, the fields the label already says, and fields shown before or after the rest. */
type Reading = {
  label: string;
  hide?: string[];
  first?: Array<[string, unknown]>;
  last?: Array<[string, unknown]>;
};

/** One case per type, no default: a new trace event fails tsc here until it has a label. */
function readingOf(event: TraceEvent): Reading {
  switch (event.type) {
    case "run_created":
      return { label: "Run created", hide: ["run_id"] };
    case "run_cancelled":
      return { label: "Run cancelled" };
    case "turn_received":
      return { label: "Turn received" };
    case "pruned":
      return { label: "Pruned after the retention period" };
    case "proposed":
      return { label: "Proposed" };
    case "validated":
      return { label: "Validated and frozen" };
    case "idempotency_unverified":
      return { label: "Idempotency unverified" };
    case "limits_reserved":
      return { label: "Limits reserved" };
    case "policy_decided":
      return { label: "Policy decided" };
    case "limit_denied":
      return { label: "Limit denied" };
    case "attempt_started":
      return { label: `Attempt ${event.attempt} sent`, hide: ["attempt"] };
    case "payment":
      return {
        label:
          event.what === "refused"
            ? "Payment refused: nothing signed, nothing paid"
            : event.what === "signed"
              ? "Payment signed by the tenant's signer (stored before sending)"
              : event.what === "unsent"
                ? "Payment stopped before sending: signed, stored, never sent"
                : event.approval
                  ? "Payment required: a person approves first"
                  : "Payment required",
        hide: ["what"],
      };
    case "held":
      return isPhaseEntered(event)
        ? { label: "Held (nothing sent)" }
        : { label: `Held by freeze ${event.freeze_id} (nothing sent)`, hide: ["freeze_id"] };
    case "hold_released":
      return { label: `Freeze ${event.freeze_id} lifted: continuing`, hide: ["freeze_id"] };
    case "grant_used":
      return { label: `Approved by standing grant ${event.grant_id}`, hide: ["grant_id"] };
    case "grant_lapsed":
      return {
        label: `${event.reason}: nothing sent, asking a person`,
        hide: ["grant_id", "reason"],
      };
    case "paused":
      return { label: `Paused by ${event.by}`, hide: ["by"] };
    case "resumed":
      return { label: `Resumed by ${event.by}`, hide: ["by"] };
    case "retry_now":
      return {
        label: `Retry now (attempt ${event.attempt}) by ${event.by}`,
        hide: ["by", "attempt"],
      };
    case "freeze_created":
      return { label: `Freeze ${event.freeze_id} created` };
    case "freeze_lifted":
      return { label: `Freeze ${event.freeze_id} lifted` };
    case "grant_created":
      return { label: `Grant ${event.grant_id} ${event.proposed ? "proposed" : "created"}` };
    case "grant_confirmed":
      return { label: `Grant ${event.grant_id} confirmed by ${event.by}` };
    case "grant_revoked":
      return { label: `Grant ${event.grant_id} revoked by ${event.by}` };
    case "grant_use":
      return { label: `Grant ${event.grant_id} used by ${event.operation_id}` };
    case "attempt_finished":
      return {
        label: `Attempt ${event.attempt} answered`,
        // The request as sent and the answer have their own block under the call (call-detail.tsx).
        hide: ["attempt", "observed", "request", "response"],
        first: flatten("observed", event.observed),
      };
    case "retry_scheduled":
      return isPhaseEntered(event)
        ? { label: "Retry scheduled" }
        : {
            label: "Retry scheduled",
            hide: ["delay_ms", "due_at_ms", "attempt"],
            first: [["in", `${Math.round(event.delay_ms / 100) / 10} s`]],
          };
    case "awaiting_quota":
      return { label: "Waiting for its quota (nothing sent)" };
    case "awaiting_credential":
      return { label: "Waiting for the user to connect (nothing sent)" };
    case "credential_required":
      return {
        label:
          event.reason === "invalid_grant"
            ? "The user's connection was revoked: they must reconnect (nothing sent)"
            : "The user must connect their account first (nothing sent)",
      };
    case "credential_ready":
      return { label: "The user connected" };
    case "credential_expired":
      return { label: "The user did not connect in time (nothing sent)" };
    case "quota_waiting":
      return {
        label: event.long
          ? "Upstream quota used up: waiting for it to reset (nothing sent, still pending)"
          : event.reason === "paused"
            ? "Upstream rate limit: waiting for its pause to end (nothing sent)"
            : event.reason === "concurrency"
              ? "Waiting for a free place under the concurrency cap (nothing sent)"
              : "Waiting for the quota's next slot (nothing sent)",
      };
    case "quota_granted":
      return { label: "Quota slot granted" };
    case "quota_deadline":
      return { label: "No quota slot before the run's deadline (nothing sent)" };
    case "retry_deferred":
      return {
        label:
          event.reason === "unavailable"
            ? "Retry deferred: toolgate could not prepare it (nothing sent)"
            : event.reason === "rate_limited"
              ? "Retry deferred: the upstream paused this origin (nothing sent)"
              : "Retry deferred by the host's retry budget",
        hide: ["attempt"],
      };
    case "outcome_unknown":
      return { label: "Outcome unknown" };
    case "reconcile_started":
      return { label: `Status lookup ${event.lookups} sent`, hide: ["lookups"] };
    case "reconcile_finished":
      return { label: `Status lookup ${event.lookups} answered`, hide: ["lookups"] };
    case "reconcile_deferred":
      return { label: "Reconcile deferred" };
    case "settle_scheduled":
      return { label: "Settle scheduled" };
    case "settle_window_ended":
      return { label: "Settle window ended" };
    case "recorded":
      return isPhaseEntered(event)
        ? { label: "Recorded" }
        : { label: `Recorded: ${event.status}`, hide: ["status"] };
    case "resolved":
      return { label: "Resolved by a person" };
    case "denied":
      return { label: "Refused before the next attempt" };
    case "cancel_requested":
      return { label: "Cancel requested" };
    case "awaiting_approval":
      return isPhaseEntered(event)
        ? { label: "Waiting for approval" }
        : {
            label: "Waiting for approval",
            hide: ["expires_at_ms"],
            last: [
              [
                "expires",
                `${new Date(event.expires_at_ms).toISOString().replace("T", " ").slice(0, 19)} UTC`,
              ],
            ],
          };
    case "approval_requested":
      return { label: "Approval requested" };
    case "preview":
      return { label: "Preview for the approver" };
    case "approval_decided":
      return {
        label: event.verdict === "approve" ? "Approved by a person" : "Rejected by a person",
      };
    case "approval_edited":
      return { label: "Arguments edited by a person" };
    case "approval_expired":
      return { label: "Approval expired", hide: ["requested_at_ms"] };
    case "approval_voted":
      return { label: "Vote counted" };
    case "approval_reminded":
      return { label: "Approvers reminded" };
    case "approval_escalated":
      return { label: "Approval escalated" };
    case "awaiting_lock":
      return { label: "Awaiting lock" };
    case "lock_granted":
      return { label: "Lock granted" };
    case "lock_queued":
      return { label: "Lock queued" };
    case "lock_waiting_long":
      return { label: "Lock waiting long" };
    case "reported":
      return { label: "Result delivered to the caller" };
    case "executing":
      return { label: "Executing" };
    case "reconciling":
      return { label: "Reconciling" };
  }
}

/** A label for the event and the fields worth showing (everything not already in the label). */
export function describeEvent(event: TraceEvent): {
  label: string;
  fields: Array<[string, unknown]>;
} {
  // The chain fields (seq, hashes) and the entered state are for tools; the label says it for people.
  const {
    type,
    at_ms: _at,
    operation_id: _op,
    seq: _seq,
    prev_hash: _prev,
    hash: _hash,
    state: _state,
    ...rest
  } = event;
  // A stored trace may hold a type this version no longer writes: it still renders, with all its fields.
  const reading: Reading = readingOf(event) ?? { label: humanize(type) };
  const hidden = new Set(reading.hide);
  const shown = Object.entries(rest).filter(([name]) => !hidden.has(name));
  return {
    label: reading.label,
    fields: [...(reading.first ?? []), ...shown, ...(reading.last ?? [])],
  };
}

function flatten(prefix: string, value: unknown): Array<[string, unknown]> {
  if (!value || typeof value !== "object") return value === undefined ? [] : [[prefix, value]];
  return Object.entries(value as Record<string, unknown>).map(([name, inner]) => [
    name === "kind" ? prefix : name,
    inner,
  ]);
}

/** Identifiers read better in a fixed-width face. */
const MONO = /(^|_)(id|key|hash|tool|code|token)$/;
const humanize = (name: string) => name.replace(/_/g, " ").replace(/^./, (ch) => ch.toUpperCase());
const show = (value: unknown) =>
  typeof value === "string" ? value : value === null ? "null" : JSON.stringify(value);

export const clock = (atMs: number) => new Date(atMs).toISOString().slice(11, 23);
export const since = (atMs: number, originMs: number) => {
  const ms = atMs - originMs;
  return ms < 1_000 ? `+${ms} ms` : `+${(ms / 1_000).toFixed(1)} s`;
};

export const Badge: FC<{ status: string }> = ({ status }) => (
  <span class={`badge ${status}`}>{status.replace(/_/g, " ")}</span>
);

const Fields: FC<{ fields: Array<[string, unknown]> }> = ({ fields }) => (
  <>
    {fields
      .filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([name, value]) => (
        <span class="kv">
          <b>{name.replace(/_/g, " ")}</b>{" "}
          <span class={MONO.test(name) ? "mono" : undefined}>{show(value)}</span>
        </span>
      ))}
  </>
);

export const EventRow: FC<{ event: TraceEvent; originMs: number }> = ({ event, originMs }) => {
  const { label, fields } = describeEvent(event);
  return (
    <li data-event={event.type}>
      <span>
        <time datetime={new Date(event.at_ms).toISOString()}>{clock(event.at_ms)}</time>{" "}
        <span class="hint">{since(event.at_ms, originMs)}</span>
      </span>
      <span class="what">{label}</span>
      <span class="details">
        <Fields fields={fields} />
      </span>
    </li>
  );
};

/** Where a person acts on an operation in this status (null: nowhere but its run). */
export const actionFor = (status: string, operationId: string) =>
  status === "awaiting_approval"
    ? { href: `/console/approvals#${operationId}`, label: "Decide" }
    : status === "outcome_unknown"
      ? { href: `/console/unknown-outcomes#${operationId}`, label: "Resolve" }
      : null;

export const OperationCard: FC<{ op: OperationTimeline; originMs: number }> = ({
  op,
  originMs,
}) => {
  const action = actionFor(op.status, op.operationId);
  return (
    <section
      class="op"
      id={op.operationId}
      aria-labelledby={`${op.operationId}-title`}
      data-status={op.status}
    >
      <header>
        <h3 id={`${op.operationId}-title`}>{op.tool}</h3>
        <Badge status={op.status} />
        {op.code && <code>{op.code}</code>}
        {action && <a href={action.href}>{action.label}</a>}
        <span class="ids">
          operation <span class="mono">{op.operationId}</span> · call{" "}
          <span class="mono">{op.callId}</span>
        </span>
      </header>
      <ol class="timeline" aria-label={`Transitions of ${op.tool}`}>
        {op.events.map((event) => (
          <EventRow event={event} originMs={originMs} />
        ))}
      </ol>
    </section>
  );
};
