// The console's run timeline as tables: how a run trace is grouped (run events, turns, one list per
// operation), which status each operation shows, and how each event type reads. Unknown event types
// must still render with all their fields, and rendered HTML escapes every value.
import { describe, expect, it } from "vitest";
import type { TraceEvent } from "../../src/domain/journal/trace-event.ts";
import { describeEvent, groupTrace, OperationCard } from "../../src/console/timeline.tsx";

// Stored rows, as read back: any type (older ones too), any fields.
const ev = (type: string, at_ms: number, fields: Record<string, unknown> = {}): TraceEvent =>
  ({ type, at_ms, ...fields }) as TraceEvent;
const trace: TraceEvent[] = [
  ev("run_created", 0, { run_id: "run_1" }),
  ev("turn_received", 1, {
    turn_id: "turn_1",
    calls: [
      { call_id: "c1", name: "charge", operation_id: "op_a" },
      {
        call_id: "c2",
        name: "nope",
        operation_id: "op_r",
        fixed: "rejected",
        code: "unknown_tool",
      },
    ],
  }),
  ev("proposed", 2, { call_id: "c1", tool: "charge", operation_id: "op_a" }),
  ev("attempt_started", 3, { attempt: 1, idempotency_key: "tg_a", operation_id: "op_a" }),
  ev("proposed", 3, { call_id: "c3", tool: "email", operation_id: "op_b" }),
  ev("attempt_finished", 4, {
    attempt: 1,
    observed: { kind: "http_error", status: 503, retry_after_ms: null },
    operation_id: "op_a",
  }),
  ev("outcome_unknown", 5, {
    attempt: 1,
    code: "timeout_unknown",
    reconcile: "human",
    operation_id: "op_b",
  }),
  ev("recorded", 6, { status: "succeeded", via: "attempt", operation_id: "op_a" }),
  ev("run_cancelled", 7),
];

describe("groupTrace", () => {
  it("splits run events, turns and per-operation lists, keeping each list in trace order", () => {
    const grouped = groupTrace(trace);
    expect(grouped.run.map((e) => e.type)).toEqual(["run_created", "run_cancelled"]);
    expect(grouped.turns.map((e) => e.turn_id)).toEqual(["turn_1"]);
    expect(
      grouped.operations.map((op) => [op.operationId, op.tool, op.callId, op.events.length]),
    ).toEqual([
      ["op_a", "charge", "c1", 4],
      ["op_b", "email", "c3", 2],
    ]);
  });

  it.each([
    [
      "recorded wins",
      [
        ev("outcome_unknown", 1, { code: "crash_unknown" }),
        ev("recorded", 2, { status: "failed", code: "permanent_failure" }),
      ],
      "failed",
      "permanent_failure",
    ],
    [
      "unknown until resolved",
      [ev("attempt_started", 1), ev("outcome_unknown", 2, { code: "timeout_unknown" })],
      "outcome_unknown",
      "timeout_unknown",
    ],
    ["waiting for a person", [ev("approval_requested", 1)], "awaiting_approval", null],
    [
      "anything else is pending",
      [ev("attempt_started", 1), ev("retry_scheduled", 2)],
      "pending",
      null,
    ],
  ] as const)("status: %s", (_name, events, status, code) => {
    const [op] = groupTrace([
      ev("proposed", 0, { operation_id: "op_x", tool: "t", call_id: "c" }),
      ...events.map((e) => ({ ...e, operation_id: "op_x" })),
    ]).operations;
    expect([op!.status, op!.code]).toEqual([status, code]);
  });
});

describe("describeEvent", () => {
  it.each([
    [
      ev("attempt_started", 0, { attempt: 2, idempotency_key: "tg_k" }),
      "Attempt 2 sent",
      [["idempotency_key", "tg_k"]],
    ],
    [
      ev("attempt_finished", 0, {
        attempt: 1,
        observed: { kind: "http_error", status: 503, retry_after_ms: null },
      }),
      "Attempt 1 answered",
      [
        ["observed", "http_error"],
        ["status", 503],
        ["retry_after_ms", null],
      ],
    ],
    [
      ev("retry_scheduled", 0, { attempt: 1, delay_ms: 4_120, due_at_ms: 9, reason: "HTTP 503" }),
      "Retry scheduled",
      [
        ["in", "4.1 s"],
        ["reason", "HTTP 503"],
      ],
    ],
    [
      ev("recorded", 0, { status: "succeeded", via: "attempt" }),
      "Recorded: succeeded",
      [["via", "attempt"]],
    ],
    [
      ev("resolved", 0, { outcome: "failed", reason: "checked by phone", by: "key_1" }),
      "Resolved by a person",
      [
        ["outcome", "failed"],
        ["reason", "checked by phone"],
        ["by", "key_1"],
      ],
    ],
    [
      ev("lock_granted", 0, { fencing_token: 7, operation_id: "op_a" }),
      "Lock granted",
      [["fencing_token", 7]],
    ],
  ] as const)("%o reads as %s", (event, label, fields) => {
    expect(describeEvent(event)).toEqual({ label, fields });
  });
});

it("renders untrusted values as escaped text", async () => {
  const [op] = groupTrace([
    ev("proposed", 0, {
      operation_id: "op_x",
      tool: "<script>alert(1)</script>",
      call_id: 'c"><img src=x>',
    }),
    ev("attempt_finished", 1, {
      operation_id: "op_x",
      attempt: 1,
      observed: { kind: "invalid_output", detail: "<b onmouseover=alert(1)>hi</b>" },
    }),
  ]).operations;
  const html = String(await OperationCard({ op: op!, originMs: 0 })!.toString());
  expect(html).not.toMatch(/<script|<img|<b /);
  expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  expect(html).toContain("&lt;b onmouseover=alert(1)&gt;hi&lt;/b&gt;");
});
