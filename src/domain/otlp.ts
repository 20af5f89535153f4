// The run trace as OTLP/JSON (`ExportTraceServiceRequest`, opentelemetry-proto's JSON mapping:
// lowerCamelCase fields, hex trace and span ids, timestamps as decimal strings, integer attribute
// values as JSON numbers (always safe integers here), enums as integers). One
// trace id per run; one span per logical operation (its transitions as span events) and, under it,
// one `execute_tool {tool}` span per attempt with the GenAI semantic-convention attributes
// (gen_ai.operation.name, gen_ai.tool.*, error.type). Built from the stored, already redacted events
// only, so the export can never show more than the trace; ids are derived, so repeated exports and
// background pushes of the same operation produce the same spans.
import { eventsOf, firstOf, type TraceEvent } from "./journal/trace-event.ts";
import { sha256HexSync } from "./trace-chain.ts";

export type OtlpValue =
  { stringValue: string } | { boolValue: boolean } | { intValue: number } | { doubleValue: number };
export type OtlpAttribute = { key: string; value: OtlpValue };
export type OtlpEvent = {
  timeUnixNano: string;
  name: string;
  attributes: OtlpAttribute[];
  droppedAttributesCount: number;
};
export type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: OtlpAttribute[];
  droppedAttributesCount: number;
  events: OtlpEvent[];
  droppedEventsCount: number;
  links: [];
  droppedLinksCount: number;
  status: { code: number; message?: string };
};
export type OtlpTrace = {
  resourceSpans: Array<{
    resource: { attributes: OtlpAttribute[]; droppedAttributesCount: number };
    scopeSpans: Array<{ scope: { name: string; version: string }; spans: OtlpSpan[] }>;
  }>;
};
/** One operation's stored events, in log order (as OperationObject.traceFor returns them). */
export type OperationTrace = { operation_id: string; events: readonly TraceEvent[] };

const SPAN_KIND_INTERNAL = 1;
const STATUS_UNSET = 0;
const STATUS_OK = 1;
const STATUS_ERROR = 2;
/** GenAI semconv `gen_ai.tool.type`: a tool run agent-side that calls an external API. */
const TOOL_TYPE = "extension";
export const SCOPE = { name: "toolgate", version: "0.1.0" };

export const traceIdFor = (runId: string) => sha256HexSync(`trace:${runId}`).slice(0, 32);
export const operationSpanId = (operationId: string) =>
  sha256HexSync(`span:${operationId}`).slice(0, 16);
export const attemptSpanId = (operationId: string, attempt: number) =>
  sha256HexSync(`span:${operationId}:attempt:${attempt}`).slice(0, 16);

export function otlpTrace(runId: string, operations: readonly OperationTrace[]): OtlpTrace {
  const traceId = traceIdFor(runId);
  const spans = operations.flatMap((op) => operationSpans(traceId, runId, op));
  return {
    resourceSpans: [
      {
        resource: {
          attributes: attributes({ "service.name": "toolgate", "toolgate.run.id": runId }),
          droppedAttributesCount: 0,
        },
        scopeSpans: [{ scope: SCOPE, spans }],
      },
    ],
  };
}

function operationSpans(traceId: string, runId: string, op: OperationTrace): OtlpSpan[] {
  const { events } = op;
  if (events.length === 0) return [];
  const proposed = firstOf(events, "proposed");
  const validated = firstOf(events, "validated");
  const recorded = firstOf(events, "recorded");
  const starts = eventsOf(events, "attempt_started");
  const tool = proposed?.tool ?? "unknown";
  const callId = proposed?.call_id ?? "";
  const last = events[events.length - 1]!;
  const key = starts[0]?.idempotency_key ?? null;
  const common = {
    "gen_ai.tool.name": tool,
    "gen_ai.tool.call.id": callId,
    "gen_ai.tool.type": TOOL_TYPE,
    "toolgate.operation.id": op.operation_id,
    "toolgate.run.id": runId,
    // Hashed: the key itself lets anyone holding a trace replay the request against the upstream.
    "toolgate.idempotency_key": key === null ? undefined : sha256HexSync(key),
  };
  const outcome = recorded ? recorded.status : (last.state ?? last.type);
  const operationSpan: OtlpSpan = {
    ...spanBase(traceId, operationSpanId(op.operation_id), undefined),
    name: `toolgate.operation ${tool}`,
    startTimeUnixNano: nanos(events[0]!.at_ms),
    endTimeUnixNano: nanos((recorded ?? last).at_ms),
    attributes: attributes({
      ...common,
      "toolgate.risk": validated?.risk ?? undefined,
      "toolgate.outcome": outcome,
      "toolgate.attempts": starts.length,
      "gen_ai.tool.call.arguments":
        validated?.arguments === undefined ? undefined : JSON.stringify(validated.arguments),
      "gen_ai.tool.call.result":
        recorded?.result === undefined ? undefined : JSON.stringify(recorded.result),
      "error.type":
        recorded && recorded.status !== "succeeded"
          ? (recorded.code ?? recorded.status)
          : undefined,
    }),
    events: events.map((event) => spanEvent(event, key)),
    status: !recorded
      ? { code: STATUS_UNSET }
      : recorded.status === "succeeded"
        ? { code: STATUS_OK }
        : { code: STATUS_ERROR, message: recorded.code ?? recorded.status },
  };
  const finishes = eventsOf(events, "attempt_finished");
  const attempts = starts.map((start): OtlpSpan => {
    const { attempt } = start;
    const finished = finishes.find((e) => e.attempt === attempt);
    const status = finished?.upstream_status ?? null;
    const attemptOutcome = finished ? (finished.outcome ?? "unknown") : "in_flight";
    const failed = finished !== undefined && attemptOutcome !== "succeeded";
    return {
      ...spanBase(
        traceId,
        attemptSpanId(op.operation_id, attempt),
        operationSpanId(op.operation_id),
      ),
      name: `execute_tool ${tool}`,
      startTimeUnixNano: nanos(start.at_ms),
      endTimeUnixNano: nanos((finished ?? start).at_ms),
      attributes: attributes({
        "gen_ai.operation.name": "execute_tool",
        ...common,
        "toolgate.attempt": attempt,
        "toolgate.outcome": attemptOutcome,
        "toolgate.latency_ms": finished?.latency_ms ?? undefined,
        "http.response.status_code": status ?? undefined,
        // Semconv: the HTTP status code as a string, else a low-cardinality class of the failure.
        "error.type": failed
          ? status !== null
            ? String(status)
            : (finished?.observed.kind ?? "unknown")
          : undefined,
      }),
      events: [],
      status: !finished
        ? { code: STATUS_UNSET }
        : failed
          ? { code: STATUS_ERROR, message: attemptOutcome }
          : { code: STATUS_OK },
    };
  });
  return [operationSpan, ...attempts];
}

const spanBase = (traceId: string, spanId: string, parentSpanId: string | undefined) => ({
  traceId,
  spanId,
  ...(parentSpanId ? { parentSpanId } : {}),
  kind: SPAN_KIND_INTERNAL,
  droppedAttributesCount: 0,
  droppedEventsCount: 0,
  links: [] as [],
  droppedLinksCount: 0,
});

/**
 * Span events carry the event's own fields; nested objects travel as JSON text. The idempotency
 * key (`attempt_started`, and inside an attempt's `request`) is hashed, as on the spans: the key
 * itself lets anyone holding a trace replay the request against the upstream.
 */
function spanEvent(event: TraceEvent, key: string | null): OtlpEvent {
  const { type, at_ms, ...fields } = event;
  const flat: Record<string, unknown> = {};
  const hashed = key === null ? null : `sha256:${sha256HexSync(key)}`;
  for (const [name, value] of Object.entries(fields))
    flat[`toolgate.${name}`] =
      name === "idempotency_key" && typeof value === "string"
        ? sha256HexSync(value)
        : value !== null && typeof value === "object"
          ? key === null
            ? JSON.stringify(value)
            : JSON.stringify(value).replaceAll(key, hashed!)
          : value;
  return {
    timeUnixNano: nanos(at_ms),
    name: type,
    attributes: attributes(flat),
    droppedAttributesCount: 0,
  };
}

export function attributes(values: Record<string, unknown>): OtlpAttribute[] {
  return Object.entries(values).flatMap(([key, value]): OtlpAttribute[] => {
    if (value === undefined || value === null) return [];
    if (typeof value === "string") return [{ key, value: { stringValue: value } }];
    if (typeof value === "boolean") return [{ key, value: { boolValue: value } }];
    if (typeof value === "number")
      return [
        {
          key,
          // A JSON number: exact for safe integers, accepted for int64 by OTLP receivers.
          value: Number.isSafeInteger(value) ? { intValue: value } : { doubleValue: value },
        },
      ];
    return [{ key, value: { stringValue: JSON.stringify(value) } }];
  });
}

/** Milliseconds since the epoch → nanoseconds, as the decimal string int64 takes in proto JSON. */
const nanos = (ms: number): string => `${Math.round(ms)}000000`;
