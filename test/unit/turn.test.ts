// domain/turn.ts as tables: turn identity, admission (gate → freeze → budgets, cancelled runs),
// settlement of the cost reservation, closing calls on cancel, and mayExecute vs the gate.
import { describe, expect, it } from "vitest";
import type { Usage } from "../../src/domain/budget.ts";
import { refusal, type Envelope } from "../../src/domain/envelope.ts";
import { admitCall } from "../../src/domain/gate.ts";
import {
  admitToGroup,
  closeCalls,
  freezeTurn,
  gateTurn,
  mayExecute,
  planClose,
  planTurn,
  settleTurn,
  turnIdentity,
  unofferedNames,
  type CallObservation,
  type RunState,
  type Standing,
  type Submission,
  type TurnCall,
  type TurnGroup,
  type TurnRecord,
} from "../../src/domain/turn.ts";
import { compileManifest } from "../../src/tools/manifest/compile.ts";

const manifestOf = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: "Charge.",
  input_schema: {
    type: "object",
    additionalProperties: false,
    properties: { amount: { type: "number" } },
    required: ["amount"],
  },
  risk: "write",
  request: { method: "POST", url: "http://127.0.0.1:1/charges" },
  idempotency: { mode: "header" },
  ...extra,
});
const compile = (manifest: unknown) => {
  const compiled = compileManifest(manifest, { allowlist: [], allowLoopback: true });
  if (!compiled.ok) throw new Error(compiled.error.detail);
  return compiled.value;
};
const chargeManifest = manifestOf("charge", { requires_scopes: ["pay"], cost: 2 });
const offered = new Map([["charge", compile(chargeManifest)]]);
const run = (over: Partial<RunState> = {}): RunState => ({
  runId: "run_1",
  tenantId: "t_1",
  user: { id: "u", scopes: ["pay"] },
  tools: { charge: { kind: "manifest", manifest: chargeManifest } },
  toolsHash: "h",
  context: {},
  budgets: {},
  createdAtMs: 0,
  expiresAtMs: 1e12,
  cancelledAtMs: null,
  ...over,
});
const usage0: Usage = { turns: 0, toolCalls: 0, cost: 0 };
const KEY_SECRET = new Uint8Array(32).fill(7);
const call = (id: string, amount: number, name = "charge") => ({ id, name, arguments: { amount } });

async function frozen(
  r: RunState,
  calls: Array<ReturnType<typeof call>>,
  registered: string[] = [],
) {
  return freezeTurn(r, gateTurn(r, offered, calls), new Set(registered), KEY_SECRET);
}
const shape = (calls: TurnCall[]) =>
  calls.map((c) =>
    "fixed" in c ? `${c.fixed.status}/${"code" in c.fixed ? c.fixed.code : ""}` : "submit",
  );

describe("turnIdentity", () => {
  const base = [call("call_0", 1)];
  it.each([
    ["same calls", [call("call_0", 1)], true, true],
    ["other arguments", [call("call_0", 2)], true, false],
    ["other name", [call("call_0", 1, "refund")], true, false],
    [
      "arguments as a JSON string, other key order",
      [{ id: "call_0", name: "charge", arguments: ' {"amount":1} ' }],
      true,
      true,
    ],
    ["other call id", [call("call_1", 1)], false, false],
  ] as const)("%s: same id %s, same content %s", async (_what, calls, sameId, sameContent) => {
    const [a, b] = await Promise.all([turnIdentity(base), turnIdentity(calls as never)]);
    expect(a.id).toMatch(/^turn_[0-9a-f]{26}$/);
    expect(a.id === b.id).toBe(sameId);
    expect(a.contentHash === b.contentHash).toBe(sameContent);
  });
});

describe("admission", () => {
  it.each([
    [
      "unknown name (tenant does not know it)",
      run(),
      [call("c", 1, "nope")],
      [],
      ["rejected/unknown_tool"],
    ],
    [
      "registered but not offered",
      run(),
      [call("c", 1, "other")],
      ["other"],
      ["rejected/tool_not_allowed"],
    ],
    [
      "missing scope",
      run({ user: { id: "u", scopes: [] } }),
      [call("c", 1)],
      [],
      ["rejected/forbidden"],
    ],
    ["admitted", run(), [call("c", 1)], [], ["submit"]],
  ] as const)("%s", async (_what, r, calls, registered, expected) => {
    expect(shape(await frozen(r, [...calls], [...registered]))).toEqual(expected);
  });

  it("asks the tenant only about names the run does not offer", () => {
    const verdicts = gateTurn(run(), offered, [
      call("a", 1),
      call("b", 1, "x"),
      call("c", 1, "x"),
      call("d", "no" as never),
    ]);
    expect(unofferedNames(verdicts)).toEqual(["x"]);
  });

  it("freezes the input as one value: value, canonical text, hash", async () => {
    const [stored] = await frozen(run(), [call("c", 5)]);
    expect(stored && "submit" in stored && stored.submit.input).toMatchObject({
      value: { amount: 5 },
      canonical: '{"amount":5}',
    });
  });

  type Row = [string, RunState, Usage, number[], number, string[], Usage, number];
  const rows: Row[] = [
    [
      "reserves each admitted call's cost",
      run(),
      usage0,
      [1, 2],
      0,
      ["submit", "submit"],
      { turns: 1, toolCalls: 2, cost: 4 },
      4,
    ],
    [
      "max_tool_calls stops in call order",
      run({ budgets: { max_tool_calls: 1 } }),
      usage0,
      [1, 2],
      0,
      ["submit", "budget_exhausted/max_tool_calls"],
      { turns: 1, toolCalls: 1, cost: 2 },
      2,
    ],
    [
      "max_cost counts model cost first",
      run({ budgets: { max_cost: 3 } }),
      usage0,
      [1, 2],
      0.5,
      ["submit", "budget_exhausted/max_cost"],
      { turns: 1, toolCalls: 1, cost: 2.5 },
      2,
    ],
    [
      "max_turns refuses the whole turn",
      run({ budgets: { max_turns: 1 } }),
      { ...usage0, turns: 1 },
      [1],
      0,
      ["budget_exhausted/max_turns"],
      { turns: 2, toolCalls: 0, cost: 0 },
      0,
    ],
    [
      "deadline",
      run({ budgets: { max_duration_ms: 10 } }),
      usage0,
      [1],
      0,
      ["budget_exhausted/deadline"],
      { turns: 1, toolCalls: 0, cost: 0 },
      0,
    ],
    [
      "a cancelled run refuses every call and charges nothing",
      run({ cancelledAtMs: 5 }),
      usage0,
      [1, 2],
      7,
      ["cancelled/cancelled", "cancelled/cancelled"],
      { turns: 1, toolCalls: 0, cost: 0 },
      0,
    ],
  ];
  it.each(rows)("%s", async (_what, r, before, amounts, modelCost, expected, after, reserved) => {
    const calls = await frozen(
      r,
      amounts.map((amount, i) => call(`c${i}`, amount)),
    );
    const plan = planTurn(r, before, { id: "turn_x", contentHash: "ch" }, calls, modelCost, 100);
    expect(shape(plan.record.calls)).toEqual(expected);
    expect(plan.usage).toEqual(after);
    expect(plan.record.reservedCost).toBe(reserved);
    expect(plan.dispatch).toHaveLength(expected.filter((s) => s === "submit").length);
    expect(plan.record).toMatchObject({
      id: "turn_x",
      contentHash: "ch",
      seq: before.turns + 1,
      settledCost: null,
    });
  });
});

describe("a call of an operation known recorded (a replay)", () => {
  const ids = { id: "turn_r", contentHash: "ch" };
  const opOf = (c: TurnCall) => ("submit" in c ? c.submit.operationId : "");

  it("reserves nothing and counts as a tool call: nothing to refund at settlement", async () => {
    const calls = await frozen(run(), [call("c0", 1), call("c1", 2)]);
    const plan = planTurn(run(), usage0, ids, calls, 0, 100, null, new Set([opOf(calls[0]!)]));
    expect(shape(plan.record.calls)).toEqual(["submit", "submit"]);
    expect(plan.usage).toEqual({ turns: 1, toolCalls: 2, cost: 2 });
    expect(plan.record.reservedCost).toBe(2);
    expect(plan.dispatch.map((d) => d.cost)).toEqual([0, 2]);
    const observed: CallObservation[] = plan.dispatch.map((d, i) => ({
      kind: "reply",
      envelope: { status: "succeeded", operation_id: d.operationId, result: {} },
      settled: true,
      terminal: true,
      executedBy: i === 0 ? "an_earlier_call" : "c1",
    }));
    expect(settleTurn(plan.record, observed)).toMatchObject({ spent: 2, refund: 0 });
  });

  it("is checked at its full cost: the verdicts are those of a run that remembers nothing", async () => {
    const r = run({ budgets: { max_cost: 3 } });
    const calls = await frozen(r, [call("c0", 1), call("c1", 2)]);
    const remembered = planTurn(r, usage0, ids, calls, 0, 100, null, new Set([opOf(calls[0]!)]));
    const forgotten = planTurn(r, usage0, ids, calls, 0, 100);
    expect(shape(remembered.record.calls)).toEqual(["submit", "budget_exhausted/max_cost"]);
    expect(shape(forgotten.record.calls)).toEqual(shape(remembered.record.calls));
    expect(remembered.usage).toEqual({ turns: 1, toolCalls: 1, cost: 0 });
    expect(forgotten.usage).toEqual({ turns: 1, toolCalls: 1, cost: 2 });
    // Out of budget: refused either way (never "executed" from memory past the budget).
    const spent = { ...usage0, cost: 3 };
    const late = planTurn(r, spent, ids, [calls[0]!], 0, 100, null, new Set([opOf(calls[0]!)]));
    expect(shape(late.record.calls)).toEqual(["budget_exhausted/max_cost"]);
    expect(late.usage.cost).toBe(3);
  });
});

describe("a call a budget or a cancel would refuse, whose operation was peeked", () => {
  const ids = { id: "turn_p", contentHash: "ch" };
  const opOf = (c: TurnCall) => ("submit" in c ? c.submit.operationId : "");
  const hashOf = (c: TurnCall) => ("submit" in c ? c.submit.input.hash : "");
  type Row = [
    string,
    Partial<RunState>,
    Usage,
    /** What the peek said for each call: "same" (this input), "other" (a conflict), "none", or unasked. */
    Array<"same" | "other" | "none" | "unasked">,
    string[],
    Usage,
    number,
    /** unpeeked: which calls' operations the plan asks to peek first. */
    number[],
  ];
  const spentCalls: Usage = { turns: 1, toolCalls: 1, cost: 2 };
  const rows: Row[] = [
    [
      "over max_tool_calls, not yet asked: the plan asks for a peek (and must not be committed)",
      { budgets: { max_tool_calls: 1 } },
      spentCalls,
      ["unasked"],
      ["budget_exhausted/max_tool_calls"],
      { turns: 2, toolCalls: 1, cost: 2 },
      0,
      [0],
    ],
    [
      "over max_tool_calls, the identical operation exists: a free, uncounted replay",
      { budgets: { max_tool_calls: 1 } },
      spentCalls,
      ["same"],
      ["submit"],
      { turns: 2, toolCalls: 1, cost: 2 },
      0,
      [],
    ],
    [
      "over max_tool_calls, no such operation: refused",
      { budgets: { max_tool_calls: 1 } },
      spentCalls,
      ["none"],
      ["budget_exhausted/max_tool_calls"],
      { turns: 2, toolCalls: 1, cost: 2 },
      0,
      [],
    ],
    [
      "over max_tool_calls, the operation holds other arguments (a conflict): refused",
      { budgets: { max_tool_calls: 1 } },
      spentCalls,
      ["other"],
      ["budget_exhausted/max_tool_calls"],
      { turns: 2, toolCalls: 1, cost: 2 },
      0,
      [],
    ],
    [
      "over max_cost: the identical operation replays, a new call is refused; usage unchanged",
      { budgets: { max_cost: 2 } },
      spentCalls,
      ["same", "none"],
      ["submit", "budget_exhausted/max_cost"],
      { turns: 2, toolCalls: 1, cost: 2 },
      0,
      [],
    ],
    [
      "a cancelled run: the identical operation's outcome, the others refused",
      { cancelledAtMs: 5 },
      usage0,
      ["same", "none"],
      ["submit", "cancelled/cancelled"],
      { turns: 1, toolCalls: 0, cost: 0 },
      0,
      [],
    ],
    [
      "a cancelled run, not yet asked: peek first",
      { cancelledAtMs: 5 },
      usage0,
      ["unasked", "unasked"],
      ["cancelled/cancelled", "cancelled/cancelled"],
      { turns: 1, toolCalls: 0, cost: 0 },
      0,
      [0, 1],
    ],
  ];
  it.each(rows)("%s", async (_what, over, before, said, expected, after, reserved, unpeeked) => {
    const r = run(over);
    const calls = await frozen(
      r,
      said.map((_, i) => call(`c${i}`, i + 1)),
    );
    const peeked = new Map<string, string | null>();
    said.forEach((what, i) => {
      const c = calls[i]!;
      if (what === "same") peeked.set(opOf(c), hashOf(c));
      if (what === "other") peeked.set(opOf(c), "another_hash");
      if (what === "none") peeked.set(opOf(c), null);
    });
    const plan = planTurn(r, before, ids, calls, 0, 100, null, new Set(), peeked);
    expect(shape(plan.record.calls)).toEqual(expected);
    expect(plan.usage).toEqual(after);
    expect(plan.record.reservedCost).toBe(reserved);
    expect(plan.unpeeked).toEqual(unpeeked.map((i) => opOf(calls[i]!)));
    // A replay is dispatched (it can only read its stored outcome) and costs nothing.
    said.forEach((what, i) => {
      if (what === "same")
        expect(plan.dispatch.find((d) => d.operationId === opOf(calls[i]!))?.cost).toBe(0);
    });
  });

  it("a refusal never claims the call was not executed (an identical earlier one may have run)", async () => {
    for (const over of [{ budgets: { max_tool_calls: 0 } }, { cancelledAtMs: 5 }]) {
      const r = run(over);
      const calls = await frozen(r, [call("c0", 1)]);
      const plan = planTurn(
        r,
        usage0,
        ids,
        calls,
        0,
        100,
        null,
        new Set(),
        new Map([[opOf(calls[0]!), null]]),
      );
      const refused = plan.record.calls[0]!;
      expect("fixed" in refused && "message" in refused.fixed && refused.fixed.message).toMatch(
        /did not send this call now\. If an identical earlier call already ran, its result stands/,
      );
      expect(JSON.stringify(refused)).not.toMatch(
        /not executed|did not take effect|nothing was sent/,
      );
    }
  });
});

describe("planClose: a run cancels only operations it created", () => {
  const sub = (op: string, hash: string): TurnCall => ({
    call: { id: `c_${op}_${hash}`, name: "t" },
    submit: {
      operationId: op,
      idempotencyKey: `tg_${op}`,
      input: { value: {}, canonical: "{}", hash },
      source: { kind: "code", name: "x" },
      cost: 1,
    },
    closed: null,
  });
  const turnOf = (calls: TurnCall[]): TurnRecord => ({
    id: "turn_c",
    contentHash: "c",
    seq: 1,
    calls,
    reservedCost: 0,
    settledCost: null,
    modelCost: 0,
    createdAtMs: 0,
  });
  type Row = [string, Standing, "close+cancel" | "close" | "nothing"];
  const rows: Row[] = [
    [
      "created by this run, still open",
      { kind: "open", runId: "run_1", inputHash: "h1" },
      "close+cancel",
    ],
    [
      "not created yet, or unreachable: closed, and a tombstone bound to this run",
      { kind: "absent" },
      "close+cancel",
    ],
    ["recorded", { kind: "recorded" }, "nothing"],
    [
      "another run's, joined with the identical input: closed only",
      { kind: "open", runId: "run_2", inputHash: "h1" },
      "close",
    ],
    [
      "another run's, reached by a conflicting call: left alone",
      { kind: "open", runId: "run_2", inputHash: "h9" },
      "nothing",
    ],
  ];
  it.each(rows)("%s", (_what, standing, expected) => {
    const turns = [turnOf([sub("op_a", "h1")])];
    for (const only of [null, "op_a"]) {
      const plan = planClose("run_1", turns, new Map([["op_a", standing]]), only);
      const got = plan.cancel.has("op_a")
        ? "close+cancel"
        : plan.close.has("op_a")
          ? "close"
          : "nothing";
      expect(got).toBe(expected);
      expect(plan.cancel.has("op_a")).toBe(expected === "close+cancel");
    }
  });

  it("only: another of the run's operations is neither closed nor cancelled; an operation no call points at is cancelled only if ours", () => {
    const turns = [turnOf([sub("op_a", "h1"), sub("op_b", "h2")])];
    const mine: Standing = { kind: "open", runId: "run_1", inputHash: "h1" };
    const plan = planClose(
      "run_1",
      turns,
      new Map([
        ["op_a", mine],
        ["op_b", mine],
        ["op_z", mine],
      ]),
      "op_z",
    );
    expect([...plan.close]).toEqual([]);
    expect([...plan.cancel]).toEqual(["op_z"]);
    const theirs: Standing = { kind: "open", runId: "run_2", inputHash: "h1" };
    expect([...planClose("run_1", turns, new Map([["op_z", theirs]]), "op_z").cancel]).toEqual([]);
  });
});

describe("turn groups (calls of one model response posted separately under one turn_key)", () => {
  const plan = async (
    r: RunState,
    before: Usage,
    existing: TurnGroup | null,
    usageHash: string | null,
    modelCost = 3,
    nowMs = 100,
  ) => {
    const admission = admitToGroup(existing, usageHash, 1, 64);
    if (!admission.ok) throw new Error(admission.error.detail);
    const calls = await frozen(r, [call("c1", 1)]);
    return planTurn(r, before, { id: "turn_g", contentHash: "ch" }, calls, modelCost, nowMs, {
      key: "k1",
      existing,
      usageHash,
      admission: admission.value,
    });
  };

  it("the first post counts one turn, charges the usage and stores the verdict", async () => {
    const p = await plan(run(), usage0, null, "u1");
    expect(p.usage).toEqual({ turns: 1, toolCalls: 1, cost: 2 + 3 });
    expect(p.group).toEqual({ key: "k1", turnStop: null, usageHash: "u1", calls: 1 });
    expect(p.record.modelCost).toBe(3);
  });
  it("a later post with the same usage joins: no new turn, usage not charged again", async () => {
    const before = { turns: 1, toolCalls: 1, cost: 5 };
    const p = await plan(
      run(),
      before,
      { key: "k1", turnStop: null, usageHash: "u1", calls: 1 },
      "u1",
    );
    expect(p.usage).toEqual({ turns: 1, toolCalls: 2, cost: 7 });
    expect(p.record.modelCost).toBe(0);
    expect(p.record.seq).toBe(1);
    // Only its calls are counted in the key's row.
    expect(p.group).toEqual({ key: "k1", turnStop: null, usageHash: "u1", calls: 2 });
  });
  it("a joining post is admitted even when max_turns is now used up by its own model turn", async () => {
    const r = run({ budgets: { max_turns: 1 } });
    const p = await plan(
      r,
      { turns: 1, toolCalls: 1, cost: 2 },
      { key: "k1", turnStop: null, usageHash: null, calls: 1 },
      null,
    );
    expect(shape(p.record.calls)).toEqual(["submit"]);
  });
  it("a joining post gets the refusal its model turn got", async () => {
    const r = run({ budgets: { max_turns: 1 } });
    const p = await plan(
      r,
      { turns: 2, toolCalls: 1, cost: 2 },
      { key: "k1", turnStop: "max_turns", usageHash: null, calls: 1 },
      null,
    );
    expect(shape(p.record.calls)).toEqual(["budget_exhausted/max_turns"]);
    expect(p.usage.turns).toBe(2);
  });
  it("a joining post past the deadline is stopped by the deadline", async () => {
    const r = run({ budgets: { max_duration_ms: 50 } });
    const p = await plan(
      r,
      { turns: 1, toolCalls: 1, cost: 2 },
      { key: "k1", turnStop: null, usageHash: null, calls: 1 },
      null,
      3,
      100,
    );
    expect(shape(p.record.calls)).toEqual(["budget_exhausted/deadline"]);
  });
  it("usage first seen on a later post is charged once, then stored", async () => {
    const p = await plan(
      run(),
      { turns: 1, toolCalls: 1, cost: 2 },
      { key: "k1", turnStop: null, usageHash: null, calls: 1 },
      "u1",
    );
    expect(p.record.modelCost).toBe(3);
    expect(p.group).toEqual({ key: "k1", turnStop: null, usageHash: "u1", calls: 2 });
  });
  it("other usage for the same key is a turn_conflict", () => {
    const verdict = admitToGroup(
      { key: "k1", turnStop: null, usageHash: "u1", calls: 1 },
      "u2",
      1,
      64,
    );
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.error.code).toBe("turn_conflict");
  });
  // The key is the agent's: without a bound, every post under one key would join the first turn.
  it.each([
    ["the first post of a key", null, 64, true],
    ["a join up to one response's calls", 63, 1, true],
    ["a join of many calls up to the cap", 32, 32, true],
    ["a join one call past the cap", 64, 1, false],
    ["a join that would cross the cap", 60, 5, false],
  ] as const)("%s (held %s, posting %s): admitted %s", (_what, held, post, admitted) => {
    const existing =
      held === null ? null : { key: "k1", turnStop: null, usageHash: null, calls: held };
    const verdict = admitToGroup(existing, null, post, 64);
    expect(verdict.ok).toBe(admitted);
    if (!verdict.ok) {
      expect(verdict.error.code).toBe("turn_conflict");
      expect(verdict.error.detail).toContain("new turn_key");
    }
  });
});

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

describe("mayExecute uses the gate's checks", () => {
  type Row = [string, RunState | null, string, number, string];
  const rows: Row[] = [
    ["allowed", run(), "charge", 0, "ok"],
    ["run gone", null, "charge", 0, "cancelled"],
    ["run cancelled", run({ cancelledAtMs: 1 }), "charge", 0, "cancelled"],
    ["deadline passed", run({ budgets: { max_duration_ms: 10 } }), "charge", 10, "deadline"],
    ["tool withdrawn", run(), "other", 0, "tool_not_allowed"],
    ["scope revoked", run({ user: { id: "u", scopes: [] } }), "charge", 0, "forbidden"],
  ];
  it.each(rows)("%s → %s", (_what, r, tool, nowMs, expected) => {
    const verdict = mayExecute(r, offered, tool, nowMs);
    expect(verdict.ok ? "ok" : verdict.error.code).toBe(expected);
  });

  it("agrees with the gate on offered tools and scopes, case by case", () => {
    for (const scopes of [[], ["pay"], ["pay", "other"], ["other"]]) {
      for (const tool of ["charge", "other"]) {
        const gate = admitCall(
          { id: "c", name: tool, arguments: { amount: 1 } },
          offered,
          {},
          scopes,
        );
        const retry = mayExecute(run({ user: { id: "u", scopes } }), offered, tool, 0);
        expect(retry.ok ? "ok" : retry.error.code).toBe(gate.ok ? "ok" : gate.error.code);
      }
    }
  });
});
