// RunObject row codecs: what a turn row holds round-trips exactly (the input kept once, as its
// canonical text), and a row that does not decode is refused loudly, never guessed at.
import { describe, expect, it } from "vitest";
import { refusal } from "../../src/domain/envelope.ts";
import type { RunState, TurnCall } from "../../src/domain/turn.ts";
import {
  decodeRun,
  decodeTurn,
  decodeUsage,
  encodeRun,
  encodeTurnCalls,
} from "../../src/durable/store.ts";

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
