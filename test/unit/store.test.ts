// RunObject row codecs: what a turn row holds round-trips exactly (the input kept once, as its
// canonical text), and a row that does not decode is refused loudly, never guessed at.
import { describe, expect, it } from "vitest";
import { refusal } from "../../src/domain/envelope.ts";
import type { RunState, TurnCall } from "../../src/domain/turn/turn.ts";
import {
  decodeRun,
  decodeTurn,
  decodeUsage,
  encodeRun,
  encodeTurnCalls,
} from "../../src/durable/store/run-rows.ts";

const run: RunState = {
  runId: "run_1",
  tenantId: "t_1",
  user: { id: "u", scopes: ["a"] },
  tools: { x: { kind: "code", name: "x" }, y: { kind: "manifest", manifest: { name: "y" } } },
  toolsHash: "h",
  context: { limit: 5 },
  budgets: { max_cost: 2 },
  createdAtMs: 1,
  expiresAtMs: 2,
  cancelledAtMs: null,
};
const calls: TurnCall[] = [
  { call: { id: "c1", name: "x" }, fixed: refusal("rejected", "op_r", "forbidden", "no") },
  {
    call: { id: "c2", name: "y" },
    submit: {
      operationId: "op_1",
      idempotencyKey: "tg_1",
      input: { value: { amount: 5 }, canonical: '{"amount":5}', hash: "ab" },
      source: { kind: "code", name: "x" },
      cost: 1,
    },
    closed: null,
  },
  {
    call: { id: "c3", name: "y" },
    submit: {
      operationId: "op_2",
      idempotencyKey: "tg_2",
      input: { value: {}, canonical: "{}", hash: "cd" },
      source: { kind: "code", name: "x" },
      cost: 1,
    },
    closed: refusal("cancelled", "op_2", "cancelled", "closed"),
  },
];
const row = (over: Record<string, unknown> = {}) => ({
  id: "turn_1",
  seq: 1,
  content_hash: "ch",
  calls: encodeTurnCalls(calls),
  reserved_cost: 2,
  settled_cost: null,
  model_cost: 0,
  created_at: 9,
  ...over,
});

describe("row codecs", () => {
  it("a run round-trips", () => expect(decodeRun(encodeRun(run))).toEqual(run));
  it("usage maps its columns", () =>
    expect(decodeUsage({ turns: 1, calls: 2, cost: 0.5 })).toEqual({
      turns: 1,
      toolCalls: 2,
      cost: 0.5,
    }));
  it("a turn round-trips, storing each input once (as canonical text)", () => {
    expect(decodeTurn(row())).toEqual({
      id: "turn_1",
      contentHash: "ch",
      seq: 1,
      calls,
      reservedCost: 2,
      settledCost: null,
      modelCost: 0,
      createdAtMs: 9,
    });
    expect(encodeTurnCalls(calls)).not.toContain('"value"');
  });
  it.each([
    ["run: not JSON", () => decodeRun("{")],
    ["run: missing field", () => decodeRun(JSON.stringify({ ...run, toolsHash: undefined }))],
    ["run: wrong type", () => decodeRun(JSON.stringify({ ...run, cancelledAtMs: "soon" }))],
    ["usage: null row", () => decodeUsage(null)],
    [
      "turn: unknown call shape",
      () => decodeTurn(row({ calls: JSON.stringify([{ call: { id: "c", name: "x" } }]) })),
    ],
    [
      "turn: envelope with a bad status",
      () =>
        decodeTurn(
          row({
            calls: JSON.stringify([
              { call: { id: "c", name: "x" }, fixed: { status: "done", operation_id: "o" } },
            ]),
          }),
        ),
    ],
    ["turn: missing content hash", () => decodeTurn(row({ content_hash: null }))],
  ])("%s is refused", (_what, decode) => {
    expect(decode).toThrow(/corrupt/);
  });
});

describe("tool sources are stored once per run; a call row names its source by hash", () => {
  const big = {
    kind: "manifest" as const,
    manifest: { name: "y", description: "d".repeat(42_000) },
  };
  const manyCalls: TurnCall[] = Array.from({ length: 64 }, (_, i) => ({
    call: { id: `c${i}`, name: "y" },
    submit: {
      operationId: `op_${i}`,
      idempotencyKey: `tg_${i}`,
      input: { value: { amount: i }, canonical: `{"amount":${i}}`, hash: `h${i}` },
      source: big,
      cost: 1,
    },
    closed: null,
  }));
  const hashOf = (source: unknown) => (source === big ? "src_big" : undefined);
  const sourceOf = (hash: string) => (hash === "src_big" ? big : null);

  it("a 64-call turn of a 42 KB manifest stays small, and decodes back to the same calls", () => {
    const text = encodeTurnCalls(manyCalls, hashOf);
    expect(text.length).toBeLessThan(16 * 1024);
    expect(text).not.toContain("ddd");
    const decoded = decodeTurn(row({ id: "turn_hashed", calls: text }), sourceOf);
    expect(decoded.calls).toEqual(manyCalls);
  });
  it("a row naming a source the run does not hold is refused as corrupt", () => {
    const text = encodeTurnCalls(manyCalls.slice(0, 1), hashOf);
    expect(() => decodeTurn(row({ id: "turn_orphan", calls: text }), () => null)).toThrow(
      /corrupt turn row: no stored tool source src_big/,
    );
  });
  it("a row written before sources were stored by hash (the source in every call) still decodes", () => {
    // Exactly what e1168c0's encodeTurnCalls wrote: a deployed run keeps working.
    const old = JSON.stringify([
      { call: { id: "c1", name: "x" }, fixed: refusal("rejected", "op_r", "forbidden", "no") },
      {
        call: { id: "c2", name: "y" },
        submit: {
          operationId: "op_1",
          idempotencyKey: "tg_1",
          source: { kind: "manifest", manifest: { name: "y" } },
          cost: 1,
          canonical: '{"amount":5}',
          hash: "ab",
        },
        closed: refusal("cancelled", "op_1", "cancelled", "closed"),
      },
    ]);
    const decoded = decodeTurn(row({ id: "turn_old", calls: old }), () => null);
    expect(decoded.calls[1]).toEqual({
      call: { id: "c2", name: "y" },
      submit: {
        operationId: "op_1",
        idempotencyKey: "tg_1",
        input: { value: { amount: 5 }, canonical: '{"amount":5}', hash: "ab" },
        source: { kind: "manifest", manifest: { name: "y" } },
        cost: 1,
      },
      closed: refusal("cancelled", "op_1", "cancelled", "closed"),
    });
    // Re-encoded (a cancel closing a call) without a known hash, it keeps its source inline.
    expect(JSON.parse(encodeTurnCalls(decoded.calls))).toEqual(JSON.parse(old));
  });
  it("a call holding both a source and a source hash is refused as corrupt", () => {
    const both = JSON.stringify([
      {
        call: { id: "c2", name: "y" },
        submit: {
          operationId: "op_1",
          idempotencyKey: "tg_1",
          source: { kind: "code", name: "x" },
          sourceHash: "src_big",
          cost: 1,
          canonical: "{}",
          hash: "ab",
        },
        closed: null,
      },
    ]);
    expect(() => decodeTurn(row({ id: "turn_both", calls: both }), sourceOf)).toThrow(/corrupt/);
  });
});

describe("decoded rows are cached by their exact text (the replay path reads them per turn)", () => {
  it("the same run text decodes once: the same frozen value comes back", () => {
    const text = encodeRun({ ...run, runId: "run_cached" });
    const first = decodeRun(text);
    expect(decodeRun(`${text}`)).toBe(first);
    expect(Object.isFrozen(first.user.scopes)).toBe(true);
    expect(() => (first.user.scopes as string[]).push("admin")).toThrow(TypeError);
  });
  it("other text is another run, and corrupt text is still refused after a valid decode", () => {
    const text = encodeRun(run);
    const changed = decodeRun(text.replace('"cancelledAtMs":null', '"cancelledAtMs":5'));
    expect(changed.cancelledAtMs).toBe(5);
    expect(decodeRun(text).cancelledAtMs).toBe(null);
    expect(() => decodeRun(text.replace('"cancelledAtMs":null', '"cancelledAtMs":"5"'))).toThrow(
      /corrupt/,
    );
  });
  it("a turn is keyed by every column: a settled cost is a new decode, the same row is a hit", () => {
    const open = decodeTurn(row({ id: "turn_cached" }));
    expect(decodeTurn(row({ id: "turn_cached" }))).toBe(open);
    const settled = decodeTurn(row({ id: "turn_cached", settled_cost: 1 }));
    expect(settled.settledCost).toBe(1);
    expect(open.settledCost).toBe(null);
    expect(() => decodeTurn(row({ id: "turn_cached", seq: "1" }))).toThrow(/corrupt/);
  });
});
