// The trace core as tables: which state each transition entered, what an attempt cost, where a
// tampered chain breaks, what a log line may carry, and the OTLP mapping checked against the
// OTLP protobuf schema itself (opentelemetry-proto, as generated in @opentelemetry/otlp-transformer).
import { createRequire } from "node:module";
import type { IExportTraceServiceRequest } from "@opentelemetry/otlp-transformer/build/src/trace/internal-types";
import { describe, expect, it } from "vitest";
import type { Observation } from "../../src/domain/observation.ts";
import {
  transition,
  type OperationEvent,
  type OperationPlan,
  type OperationState,
  type TraceEvent,
} from "../../src/domain/operation/index.ts";
import { attemptSpanId, operationSpanId, otlpTrace, traceIdFor } from "../../src/domain/otlp.ts";
import { NO_REDACTION, redactionFor } from "../../src/domain/redact.ts";
import { reportedEvent } from "../../src/domain/journal/trace-event.ts";
import { logLine, traceStep, type TraceDetails } from "../../src/domain/trace.ts";
import { GENESIS_HASH, seal, verifyChain } from "../../src/domain/trace-chain.ts";

const plan = (over: Partial<OperationPlan> = {}): OperationPlan => ({
  operationId: "op_trace",
  idempotencyKey: "tg_trace",
  safety: "keyed",
  retry: {
    maxAttempts: 4,
    minDelayMs: 0,
    initialDelayMs: 1_000,
    maxDelayMs: 60_000,
    maxElapsedMs: 3_600_000,
  },
  timeoutMs: 2_000,
  approval: null,
  resource: null,
  hasLookup: false,
  settleMs: 5_000,
  ...over,
});
const details: TraceDetails = { redaction: NO_REDACTION, risk: "write", includeResult: false };
const start: OperationEvent = { type: "start", inputHash: "h", callId: "c1", tool: "charge" };
const http = (status: number): Extract<Observation, { kind: "http_error" }> => ({
  kind: "http_error",
  status,
  retryAfterMs: null,
  detail: `HTTP ${status}`,
});
const okAnswer: Observation = { kind: "ok", result: { id: "ch_1" }, status: 200 };

/** Runs events through the state machine and the trace step, as the shell does; returns the stored log. */
function drive(
  steps: Array<[OperationEvent, number]>,
  p = plan(),
  d = details,
): { state: OperationState; log: TraceEvent[] } {
  let state: OperationState | null = null;
  const log: TraceEvent[] = [];
  for (const [event, nowMs] of steps) {
    const result = transition(state, event, p, nowMs);
    if (!result.ok) throw new Error(result.error.code);
    if (!result.value.changed) continue;
    const last = log.at(-1);
    log.push(
      ...traceStep({
        prev: state,
        next: result.value.state,
        events: result.value.trace,
        nowMs,
        last: last ? { seq: last.seq as number, hash: last.hash as string } : null,
        details: d,
      }),
    );
    state = result.value.state;
  }
  return { state: state!, log };
}

const finished = (attempt: number, observation: Observation): OperationEvent => ({
  type: "attempt_finished",
  attempt,
  observation,
});
const retried503s = (): Array<[OperationEvent, number]> => [
  [start, 1_000],
  [finished(1, http(503)), 1_040],
  [{ type: "alarm", inFlight: false }, 5_000],
  [finished(2, http(503)), 5_070],
  [{ type: "alarm", inFlight: false }, 9_000],
  [finished(3, okAnswer), 9_025],
];

describe("annotate: every transition names the state it entered", () => {
  it("503, 503, 200", () => {
    const { log } = drive(retried503s());
    expect(log.filter((e) => e.state).map((e) => [e.type, e.state])).toEqual([
      ["proposed", "proposed"],
      ["validated", "validated"],
      ["attempt_started", "executing"],
      ["retry_scheduled", "retry_scheduled"],
      ["attempt_started", "executing"],
      ["retry_scheduled", "retry_scheduled"],
      ["attempt_started", "executing"],
      ["recorded", "recorded"],
    ]);
    expect(
      log
        .filter((e) => e.type === "attempt_finished")
        .map((e) => [e.attempt, e.outcome, e.upstream_status, e.latency_ms]),
    ).toEqual([
      [1, "retryable", 503, 40],
      [2, "retryable", 503, 70],
      [3, "succeeded", 200, 25],
    ]);
    expect(log.find((e) => e.type === "validated")?.risk).toBe("write");
  });

  it("Retry-After is named as the basis of the delay", () => {
    const { log } = drive([
      [start, 0],
      [finished(1, { ...http(429), retryAfterMs: 3_000 }), 10],
    ]);
    expect(log.find((e) => e.type === "retry_scheduled")).toMatchObject({
      basis: "retry_after",
      delay_ms: 3_000,
    });
  });

  it("a resend after an unknown outcome is planned but the state stays outcome_unknown", () => {
    const { state, log } = drive([
      [start, 0],
      [finished(1, { kind: "timeout", detail: "no response" }), 2_000],
    ]);
    expect(state.phase).toBe("outcome_unknown");
    const resend = log.find((e) => e.type === "retry_scheduled")!;
    expect(resend.state).toBeUndefined();
    expect(log.filter((e) => e.state).at(-1)).toMatchObject({ state: "outcome_unknown" });
    expect(log.find((e) => e.type === "attempt_finished")?.outcome).toBe("unknown");
  });

  it("a status lookup that answers 'later' is still a transition: back to outcome_unknown", () => {
    const p = plan({ safety: "lookup", hasLookup: true });
    const { state, log } = drive(
      [
        [start, 0],
        [finished(1, http(503)), 100],
        [
          {
            type: "lookup_finished",
            lookups: 1,
            observation: { kind: "inconclusive", detail: "HTTP 500" },
          },
          200,
        ],
      ],
      p,
    );
    expect(state.phase).toBe("outcome_unknown");
    expect(log.filter((e) => e.state).map((e) => e.state)).toEqual([
      "proposed",
      "validated",
      "executing",
      "outcome_unknown",
      "reconciling",
      "outcome_unknown",
    ]);
  });
});

describe("the hash chain", () => {
  const { log } = drive(retried503s());
  const reported = [
    ...log,
    ...seal([reportedEvent("turn_1", "native", 9_100)], {
      seq: log.at(-1)!.seq as number,
      hash: log.at(-1)!.hash as string,
    }),
  ];

  it("links every event to its predecessor from the genesis hash", () => {
    expect(reported[0]!.prev_hash).toBe(GENESIS_HASH);
    expect(verifyChain(reported)).toEqual({
      ok: true,
      events: reported.length,
      head_hash: reported.at(-1)!.hash,
    });
    expect(reported.at(-1)).toMatchObject({
      type: "reported",
      state: "reported",
      seq: reported.length,
    });
  });

  const tampered = (index: number, change: (e: TraceEvent) => TraceEvent) =>
    reported.map((e, i) => (i === index ? change(e) : e));
  it.each([
    ["a changed field", tampered(4, (e) => ({ ...e, upstream_status: 200 })), 5, "hash_mismatch"],
    ["a recomputed hash", tampered(4, (e) => ({ ...e, hash: "0".repeat(64) })), 5, "hash_mismatch"],
    ["a removed event", reported.filter((_, i) => i !== 3), 5, "sequence_gap"],
    ["two swapped events", [reported[1]!, reported[0]!, ...reported.slice(2)], 2, "sequence_gap"],
    [
      "an event written without a hash",
      tampered(2, ({ hash: _h, ...e }) => e as TraceEvent),
      3,
      "unsealed",
    ],
    [
      "a forged predecessor link",
      tampered(6, (e) => ({ ...e, prev_hash: "f".repeat(64) })),
      7,
      "chain_broken",
    ],
  ])("%s is found where it is", (_what, events, seq, reason) => {
    expect(verifyChain(events)).toMatchObject({ ok: false, broken_at: { seq, reason } });
  });
});

describe("log lines", () => {
  it("carry the run, call, operation, tool and fixed fields only: never free text", () => {
    const { log } = drive(retried503s());
    const context = { run_id: "run_1", call_id: "c1", operation_id: "op_trace", tool: "charge" };
    const lines = log.map((e) => logLine(e, context)).filter((l) => l !== null);
    expect(lines.map((l) => l.event)).toEqual([
      "toolgate.attempt_finished",
      "toolgate.retry_scheduled",
      "toolgate.attempt_finished",
      "toolgate.retry_scheduled",
      "toolgate.attempt_finished",
      "toolgate.recorded",
    ]);
    expect(lines[0]).toMatchObject({
      ...context,
      level: "warn",
      attempt: 1,
      outcome: "retryable",
      latency_ms: 40,
      upstream_status: 503,
      observed: "http_error",
    });
    // The retry's reason quotes what the upstream said; a log line never carries it.
    expect(JSON.stringify(lines)).not.toContain("HTTP 503");
    expect(lines.every((l) => !("reason" in l) && !("detail" in l) && !("message" in l))).toBe(
      true,
    );
  });
});

describe("redaction in the trace", () => {
  it("hides the tool's paths in arguments and results, and the hidden values in free text", () => {
    const input = { amount: 5, card: { number: "4242424242424242" } };
    const { log } = drive(
      [
        [start, 0],
        [finished(1, { kind: "invalid_output", detail: "echo 4242424242424242" }), 10],
      ],
      plan(),
      {
        redaction: redactionFor(["/card/number"], input),
        risk: "write",
        arguments: input,
        includeResult: true,
      },
    );
    expect(log.find((e) => e.type === "validated")?.arguments).toEqual({
      amount: 5,
      card: { number: "[redacted]" },
    });
    expect(JSON.stringify(log)).not.toContain("4242424242424242");
    expect(verifyChain(log).ok).toBe(true);
  });
});

// ── OTLP, checked against the protobuf schema ────────────────────────────────────────────────

const require = createRequire(import.meta.url);
const proto = require("@opentelemetry/otlp-transformer/build/src/generated/root.js").opentelemetry
  .proto.collector.trace.v1.ExportTraceServiceRequest as {
  fromObject(object: unknown): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
};
const ID_FIELDS = new Set(["traceId", "spanId", "parentSpanId"]);
/** OTLP/JSON ids are hex; protobufjs's JSON form is base64 bytes. */
function mapIds(value: unknown, convert: (id: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => mapIds(v, convert));
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        ID_FIELDS.has(k) && typeof v === "string" ? convert(v) : mapIds(v, convert),
      ]),
    );
  return value;
}
/** Proto3 omits default values; drop them on both sides before comparing. */
function withoutDefaults(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutDefaults);
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => !(v === 0 || v === "" || (Array.isArray(v) && v.length === 0)))
        .map(([k, v]) => [k, withoutDefaults(v)]),
    );
  return value;
}
/** protobufjs renders int64 as strings (longs: String); OTLP/JSON sends safe integers as numbers. */
const intsAsStrings = (key: string, value: unknown) =>
  key === "intValue" && typeof value === "number" ? String(value) : value;
const hexToBase64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");
const base64ToHex = (b64: string) => Buffer.from(b64, "base64").toString("hex");

describe("OTLP export", () => {
  const { log } = drive(retried503s());
  const exported = otlpTrace("run_1", [{ operation_id: "op_trace", events: log }]);

  it("is an ExportTraceServiceRequest: every field survives a round trip through the proto schema", () => {
    const typed: IExportTraceServiceRequest = exported; // field names and types, at compile time
    const asProto = mapIds(typed, hexToBase64);
    const back = proto.toObject(proto.fromObject(asProto), {
      longs: String,
      enums: Number,
      bytes: String,
    });
    // A misspelt or misplaced field would be dropped by fromObject and missing here.
    expect(withoutDefaults(mapIds(back, base64ToHex))).toEqual(
      withoutDefaults(JSON.parse(JSON.stringify(exported, intsAsStrings))),
    );
  });

  it("has one operation span and one execute_tool span per attempt under it, in one trace", () => {
    const spans = exported.resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(spans.map((s) => [s.name, s.spanId, s.parentSpanId])).toEqual([
      ["toolgate.operation charge", operationSpanId("op_trace"), undefined],
      ["execute_tool charge", attemptSpanId("op_trace", 1), operationSpanId("op_trace")],
      ["execute_tool charge", attemptSpanId("op_trace", 2), operationSpanId("op_trace")],
      ["execute_tool charge", attemptSpanId("op_trace", 3), operationSpanId("op_trace")],
    ]);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([traceIdFor("run_1")]));
    expect(spans[1]!.startTimeUnixNano).toBe("1000000000");
    expect(spans[1]!.endTimeUnixNano).toBe("1040000000");
    expect(spans[0]!.events.map((e) => e.name)).toEqual(log.map((e) => e.type));
  });
});
