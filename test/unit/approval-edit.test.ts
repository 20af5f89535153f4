// Edit-on-approve's pure parts (issue 35 item 2): the run's gate for an edit (bound and key fields
// untouchable, the turn's own gate), what the model is told, and a reservation re-sized.
import { describe, expect, it } from "vitest";
import { admitEdit, editedCall } from "../../src/domain/turn/edit.ts";
import { decideResize, type Reservation } from "../../src/domain/limit/window.ts";
import type { RunState } from "../../src/domain/turn/turn.ts";
import type { ToolSpec } from "../../src/tools/spec.ts";
import { compileTool } from "../../src/tools/catalog.ts";

const spec = (operationKey: string[] = []): ToolSpec => {
  const compiled = compileTool(
    {
      kind: "manifest",
      manifest: {
        name: "refund",
        description: "Refund the customer.",
        input_schema: {
          type: "object",
          additionalProperties: false,
          properties: {
            amount: { type: "integer", minimum: 1 },
            order_id: { type: "string" },
            customer_id: { type: "string" },
          },
          required: ["amount", "order_id", "customer_id"],
        },
        risk: "write",
        request: { method: "POST", url: "https://api.example.com/refunds" },
        idempotency: { mode: "header", header: "Idempotency-Key" },
        bind: { customer_id: "context.customer_id" },
        ...(operationKey.length > 0 ? { operation_key: operationKey } : {}),
      },
    },
    { allowlist: ["api.example.com"], allowLoopback: false },
  );
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.error));
  return compiled.value;
};
const run = {
  runId: "run_1",
  tenantId: "ten_1",
  user: { id: "u1", scopes: [] },
  tools: {},
  toolsHash: "h",
  context: { customer_id: "cus_1" },
  budgets: {},
  createdAtMs: 0,
  expiresAtMs: Number.MAX_SAFE_INTEGER,
  cancelledAtMs: null,
} as unknown as RunState;
const current = { amount: 100, order_id: "ord_1", customer_id: "cus_1" };

describe("admitEdit", () => {
  it.each([
    [
      "a lower amount",
      {},
      { amount: 40, order_id: "ord_1" },
      { ok: true, input: { amount: 40, order_id: "ord_1", customer_id: "cus_1" } },
    ],
    [
      "a bound field sent with its own value: dropped, filled in",
      {},
      { amount: 40, order_id: "ord_1", customer_id: "cus_1" },
      { ok: true, input: { amount: 40, order_id: "ord_1", customer_id: "cus_1" } },
    ],
    [
      "a bound field changed",
      {},
      { amount: 40, order_id: "ord_1", customer_id: "cus_2" },
      { ok: false, code: "field_not_editable" },
    ],
    [
      "an operation-key field changed",
      { key: ["order_id"] },
      { amount: 40, order_id: "ord_2" },
      { ok: false, code: "field_not_editable" },
    ],
    [
      "an operation-key field kept",
      { key: ["order_id"] },
      { amount: 40, order_id: "ord_1" },
      { ok: true, input: { amount: 40, order_id: "ord_1", customer_id: "cus_1" } },
    ],
    [
      "the schema broken",
      {},
      { amount: "lots", order_id: "ord_1" },
      { ok: false, code: "invalid_arguments" },
    ],
    [
      "an undeclared field",
      {},
      { amount: 4, order_id: "ord_1", note: "x" },
      { ok: false, code: "invalid_arguments" },
    ],
  ] as const)("%s", (_what, opts, edited, expected) => {
    const tool = spec("key" in opts ? [...opts.key] : []);
    const got = admitEdit(run, new Map([["refund", tool]]), "refund", current, edited);
    if (expected.ok) expect(got.ok && got.value.input).toEqual(expected.input);
    else expect(!got.ok && got.error.code).toBe(expected.code);
  });

  it("a tool the run no longer offers is refused", () => {
    const got = admitEdit(run, new Map(), "refund", current, { amount: 1, order_id: "ord_1" });
    expect(!got.ok && got.error.code).toBe("tool_not_allowed");
  });
});

describe("editedCall: what the model reads", () => {
  it("the executed arguments without bound fields, each change, the reason verbatim", () => {
    const said = editedCall(
      current,
      { ...current, amount: 40, note: "x" },
      ["customer_id"],
      "cap “40”",
    );
    expect(said).toEqual({
      arguments: { amount: 40, order_id: "ord_1", note: "x" },
      changes: [
        { field: "amount", proposed: 100, executed: 40 },
        { field: "note", executed: "x" },
      ],
      reason: "cap “40”",
      note: expect.stringContaining('amount: 100 → 40; note: (absent) → "x"'),
    });
    expect(said.note).toContain('Their reason: "cap “40”"');
  });
});

describe("decideResize", () => {
  const T = 1_000_000;
  const claim = (amount: number) => ({
    operationId: "op_a",
    amount,
    max: 150,
    windowMs: 86_400_000,
    over: "refuse" as const,
  });
  const held = (id: string, amount: number): Reservation => ({
    operationId: id,
    amount,
    atMs: T - 10,
    state: "held",
    recordedAtMs: null,
  });

  it.each([
    [
      "lower: re-sized, its time kept",
      [held("op_a", 100)],
      claim(40),
      { kind: "reserved", amount: 40, already: false },
    ],
    [
      "the same amount again: nothing changes (idempotent)",
      [held("op_a", 40)],
      claim(40),
      { kind: "reserved", amount: 40, already: true },
    ],
    [
      "higher, fits without its old amount",
      [held("op_a", 100), held("op_b", 50)],
      claim(99),
      { kind: "reserved", amount: 99, already: false },
    ],
    [
      "higher, over the max counting the others only",
      [held("op_a", 100), held("op_b", 50)],
      claim(101),
      { kind: "refused" },
    ],
    ["not held: reserved as new", [], claim(40), { kind: "reserved", amount: 40, already: false }],
  ] as const)("%s", (_what, rows, c, expected) => {
    const d = decideResize(rows, c, T);
    expect(d.kind).toBe(expected.kind);
    if (d.kind === "reserved" && expected.kind === "reserved") {
      expect(d.row.amount).toBe(expected.amount);
      expect(d.already).toBe(expected.already);
      if (rows.length > 0) expect(d.row.atMs).toBe(T - 10);
    }
  });
});
