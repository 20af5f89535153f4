// domain/turn/settle.ts as tables: settlement of the cost reservation (once, never refunding what
// was spent) and closed calls answering with their closing envelope.
import { describe, expect, it } from "vitest";
import type { Submission, TurnCall, TurnRecord } from "../../../src/domain/turn/turn.ts";
import { settleTurn, type CallObservation } from "../../../src/domain/turn/settle.ts";
import { closeCalls } from "../../../src/domain/turn/close.ts";
import { refusal, type Envelope } from "../../../src/domain/envelope.ts";

describe("settlement", () => {
  const submission = (operationId: string, cost = 1): Submission => ({
    operationId,
    idempotencyKey: `tg_${operationId}`,
    input: { value: {}, canonical: "{}", hash: "h" },
    source: { kind: "code", name: "x" },
    cost,
  });
  const ok = (id: string): Envelope => ({ status: "succeeded", operation_id: id, result: {} });
  const record = (calls: TurnCall[], settledCost: number | null = null): TurnRecord => ({
    id: "turn_1",
    contentHash: "c",
    seq: 1,
    calls,
    reservedCost: calls.reduce((s, c) => s + ("submit" in c ? c.submit.cost : 0), 0),
    settledCost,
    modelCost: 0,
    createdAtMs: 0,
  });
  const open = (id: string, op: string, cost = 1): TurnCall => ({
    call: { id, name: "t" },
    submit: submission(op, cost),
    closed: null,
  });
  const reply = (envelope: Envelope, executedBy: string, settled = true): CallObservation => ({
    kind: "reply",
    envelope,
    settled,
    terminal: settled,
    executedBy,
  });

  type Row = [
    string,
    TurnRecord,
    Array<CallObservation | null>,
    "settled" | "pending",
    number,
    number,
  ];
  const rows: Row[] = [
    [
      "executed by its own call: pays, no refund",
      record([open("c1", "op_a")]),
      [reply(ok("op_a"), "c1")],
      "settled",
      1,
      0,
    ],
    [
      "two calls of one operation: one pays, one refunded",
      record([open("c1", "op_a"), open("c2", "op_a")]),
      [reply(ok("op_a"), "c1"), reply(ok("op_a"), "c1")],
      "settled",
      1,
      1,
    ],
    [
      "a replay of another turn's call pays nothing",
      record([open("c9", "op_a")]),
      [reply(ok("op_a"), "c1")],
      "settled",
      0,
      1,
    ],
    [
      "cancelled by its operation: refunded",
      record([open("c1", "op_a")]),
      [reply(refusal("cancelled", "op_a", "cancelled", "x"), "c1")],
      "settled",
      0,
      1,
    ],
    [
      "idempotency conflict never ran: refunded",
      record([open("c1", "op_a")]),
      [reply(refusal("rejected", "op_a", "idempotency_conflict", "x"), "c1")],
      "settled",
      0,
      1,
    ],
    [
      "failed after trying: pays",
      record([open("c1", "op_a")]),
      [reply(refusal("failed", "op_a", "permanent_failure", "x"), "c1")],
      "settled",
      1,
      0,
    ],
    [
      "pending: nothing settles yet",
      record([open("c1", "op_a"), open("c2", "op_b")]),
      [reply(ok("op_a"), "c1"), reply(refusal("pending", "op_b", "executing", "x"), "c2", false)],
      "pending",
      2,
      0,
    ],
    [
      "unreachable operation: pending, asked again next poll",
      record([open("c1", "op_a")]),
      [{ kind: "unavailable" }],
      "pending",
      0,
      0,
    ],
    [
      "a tool that no longer compiles keeps its reservation",
      record([open("c1", "op_a")]),
      [{ kind: "invalid_tool" }],
      "settled",
      1,
      0,
    ],
    [
      "already settled: never refunds again",
      record([open("c1", "op_a"), open("c2", "op_a")], 1),
      [reply(ok("op_a"), "c1"), reply(ok("op_a"), "c1")],
      "settled",
      1,
      0,
    ],
    [
      "a closed call keeps its reservation (it may still complete)",
      record([
        {
          call: { id: "c1", name: "t" },
          submit: submission("op_a"),
          closed: refusal("cancelled", "op_a", "cancelled", "x"),
        },
      ]),
      [null],
      "settled",
      1,
      0,
    ],
    [
      "pruned before its first settlement: keeps its reservation (pruning never gives budget back)",
      record([open("c1", "op_a")]),
      [{ kind: "pruned", prunedAt: "2026-12-06T00:00:00.000Z", status: "succeeded" }],
      "settled",
      1,
      0,
    ],
    [
      "settled earlier, polled after pruning: final, no second settlement",
      record([open("c1", "op_a")], 1),
      [{ kind: "pruned", prunedAt: "2026-12-06T00:00:00.000Z", status: "succeeded" }],
      "settled",
      1,
      0,
    ],
    [
      "fixed refusals cost nothing",
      record([
        { call: { id: "c1", name: "t" }, fixed: refusal("rejected", "op_r", "forbidden", "x") },
      ]),
      [null],
      "settled",
      0,
      0,
    ],
  ];
  it.each(rows)("%s", (_what, rec, observed, status, spent, refund) => {
    const s = settleTurn(rec, observed);
    expect([s.status, s.spent, s.refund]).toEqual([status, spent, refund]);
    expect(s.results.map((r) => r.call.id)).toEqual(rec.calls.map((c) => c.call.id));
  });

  it("the first settlement is final: stored whenever a later poll could see it otherwise", () => {
    const paid = record([open("c1", "op_a")]);
    const unknown = refusal("outcome_unknown", "op_a", "timeout", "x");
    // Waiting for a person (settled, not yet recorded): nothing refunded, but stored now, so a
    // later outcome (the person finds it cancelled) cannot refund it.
    const waiting: CallObservation = {
      kind: "reply",
      envelope: unknown,
      settled: true,
      terminal: false,
      executedBy: "c1",
    };
    const first = settleTurn(paid, [waiting]);
    expect(first).toMatchObject({ status: "settled", spent: 1, refund: 0, finalize: true });
    const later = settleTurn(record([open("c1", "op_a")], first.spent), [
      reply(refusal("cancelled", "op_a", "cancelled", "x"), "c1"),
    ]);
    expect(later).toMatchObject({ refund: 0, finalize: false });
    // A refund is stored with its settlement.
    expect(settleTurn(paid, [reply(ok("op_a"), "c9")])).toMatchObject({
      refund: 1,
      finalize: true,
    });
    // Every call answered by a recorded outcome and nothing refunded: stable as it is, so no row is
    // written (a later poll counts the same: the same outcome, or pruned, each at its full cost).
    expect(settleTurn(paid, [reply(ok("op_a"), "c1")])).toMatchObject({
      refund: 0,
      finalize: false,
    });
    const pruned: CallObservation = {
      kind: "pruned",
      prunedAt: "2026-12-06T00:00:00.000Z",
      status: "succeeded",
    };
    expect(settleTurn(paid, [pruned])).toMatchObject({ spent: 1, refund: 0 });
    // Not settled yet, or nothing reserved: nothing to store.
    const pending = settleTurn(paid, [
      reply(refusal("pending", "op_a", "executing", "x"), "c1", false),
    ]);
    expect(pending.finalize).toBe(false);
    expect(settleTurn(record([open("c1", "op_a", 0)]), [waiting]).finalize).toBe(false);
  });

  it("a pruned call says how the identical request had settled, never that it was handled", () => {
    const s = settleTurn(record([open("c1", "op_a")]), [
      { kind: "pruned", prunedAt: "2026-12-06T00:00:00.000Z", status: "rejected" },
    ]);
    const envelope = s.results[0]!.envelope;
    expect(envelope).toMatchObject({ status: "rejected", code: "operation_pruned" });
    expect("message" in envelope && envelope.message).toMatch(/settled earlier as rejected/);
    expect("message" in envelope && envelope.message).not.toMatch(/handled|succeeded/);
  });

  it("a closed call answers with its closing envelope, whatever its operation says later", () => {
    const closed = closeCalls(
      record([open("c1", "op_a"), open("c2", "op_b"), open("c3", "op_c")]),
      new Set(["op_a", "op_b"]),
    )!;
    expect(closed.calls.map((c) => ("submit" in c && c.closed ? c.closed.status : "open"))).toEqual(
      ["cancelled", "cancelled", "open"],
    );
    const s = settleTurn(closed, [
      reply(ok("op_a"), "c1"),
      reply(ok("op_b"), "c2"),
      reply(ok("op_c"), "c3"),
    ]);
    expect(s.results.map((r) => r.envelope.status)).toEqual([
      "cancelled",
      "cancelled",
      "succeeded",
    ]);
    expect(s.results[0]!.envelope).toMatchObject({ code: "cancelled", operation_id: "op_a" });
    expect(closeCalls(closed, new Set(["op_a"]))).toBeNull();
  });
});
