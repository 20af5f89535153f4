// The run timeline: the run trace (GET /v1/runs/{id}/trace, as RunObject.traceFor returns it)
// grouped into the run's own events, its turns, and one ordered list per operation of every
// transition and attempt. Known event types get a readable label; any other type still renders,
// with all its fields, so a new trace event never disappears from the console. All text is escaped.
import type { FC } from "hono/jsx";
import type { TraceEvent } from "../domain/operation/index.ts";

export type OperationTimeline = {
  operationId: string;
  tool: string;
  callId: string;
  status: string;
  code: string | null;
  events: TraceEvent[];
};
export type TurnCall = {
  call_id: string;
  name: string;
  operation_id: string;
  fixed?: string;
  code?: string | null;
};
export type GroupedTrace = {
  run: TraceEvent[];
  turns: Array<TraceEvent & { calls: TurnCall[] }>;
  operations: OperationTimeline[];
};

export function groupTrace(events: TraceEvent[]): GroupedTrace {
  const run: TraceEvent[] = [];
  const turns: GroupedTrace["turns"] = [];
  const byOperation = new Map<string, TraceEvent[]>();
  for (const event of events) {
    const operationId = typeof event.operation_id === "string" ? event.operation_id : null;
    if (event.type === "turn_received") turns.push(event as TraceEvent & { calls: TurnCall[] });
    else if (operationId)
      byOperation.set(operationId, [...(byOperation.get(operationId) ?? []), event]);
    else run.push(event);
  }
  const operations = [...byOperation].map(([operationId, opEvents]): OperationTimeline => {
    const proposed = opEvents.find((e) => e.type === "proposed");
    return {
      operationId,
      tool: String(proposed?.tool ?? "unknown tool"),
      callId: String(proposed?.call_id ?? ""),
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
    if (event.type === "recorded")
      return {
        status: String(event.status),
        code: typeof event.code === "string" ? event.code : null,
      };
    if (event.type === "outcome_unknown")
      return {
        status: "outcome_unknown",
        code: typeof event.code === "string" ? event.code : null,
      };
    // The state machine logs `awaiting_approval`; `approval_requested` is the older name.
    if (event.type === "awaiting_approval" || event.type === "approval_requested")
      return { status: "awaiting_approval", code: null };
  }
  return { status: "pending", code: null };
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
  const omit = (...names: string[]) =>
    Object.entries(rest).filter(([name]) => !names.includes(name));
  switch (type) {
    case "run_created":
      return { label: "Run created", fields: omit("run_id") };
    case "run_cancelled":
      return { label: "Run cancelled", fields: omit() };
    case "proposed":
      return { label: "Proposed", fields: omit() };
    case "validated":
      return { label: "Validated and frozen", fields: omit() };
    case "attempt_started":
      return { label: `Attempt ${String(rest.attempt)} sent`, fields: omit("attempt") };
    case "attempt_finished":
      return {
        label: `Attempt ${String(rest.attempt)} answered`,
        fields: [...flatten("observed", rest.observed), ...omit("attempt", "observed")],
      };
    case "retry_scheduled":
      return {
        label: "Retry scheduled",
        fields: [
          ["in", `${Math.round(Number(rest.delay_ms) / 100) / 10} s`],
          ...omit("delay_ms", "due_at_ms", "attempt"),
        ],
      };
    case "retry_deferred":
      return {
        label:
          rest.reason === "unavailable"
            ? "Retry deferred: toolgate could not prepare it (nothing sent)"
            : "Retry deferred by the host's retry budget",
        fields: omit("attempt"),
      };
    case "outcome_unknown":
      return { label: "Outcome unknown", fields: omit() };
    case "reconcile_started":
      return { label: `Status lookup ${String(rest.lookups)} sent`, fields: omit("lookups") };
    case "reconcile_finished":
      return { label: `Status lookup ${String(rest.lookups)} answered`, fields: omit("lookups") };
    case "recorded":
      return { label: `Recorded: ${String(rest.status)}`, fields: omit("status") };
    case "resolved":
      return { label: "Resolved by a person", fields: omit() };
    case "denied":
      return { label: "Refused before the next attempt", fields: omit() };
    case "cancel_requested":
      return { label: "Cancel requested", fields: omit() };
    case "awaiting_approval":
      return {
        label: "Waiting for approval",
        fields: [
          ...omit("expires_at_ms"),
          ...(typeof rest.expires_at_ms === "number"
            ? ([
                [
                  "expires",
                  `${new Date(rest.expires_at_ms).toISOString().replace("T", " ").slice(0, 19)} UTC`,
                ],
              ] as Array<[string, unknown]>)
            : []),
        ],
      };
    case "preview":
      return { label: "Preview for the approver", fields: omit() };
    case "approval_decided":
      return {
        label:
          rest.verdict === "approve"
            ? "Approved by a person"
            : rest.verdict === "reject"
              ? "Rejected by a person"
              : "Approval decided",
        fields: omit(),
      };
    case "approval_expired":
      return { label: "Approval expired", fields: omit("requested_at_ms") };
    case "reported":
      return { label: "Result delivered to the caller", fields: omit() };
    case "pruned":
      return { label: "Pruned after the retention period", fields: omit() };
    default:
      return { label: humanize(type), fields: omit() };
  }
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

export const OperationCard: FC<{ op: OperationTimeline; originMs: number }> = ({
  op,
  originMs,
}) => (
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
