// domain/turn/admit.ts as tables: admission (gate → freeze → budgets, cancelled runs) and calls of
// operations known recorded (replays reserve nothing).
import { describe, expect, it } from "vitest";
import type { RunState, TurnCall } from "../../../src/domain/turn/turn.ts";
import { gateTurn, planTurn, unofferedNames } from "../../../src/domain/turn/admit.ts";
import { settleTurn, type CallObservation } from "../../../src/domain/turn/settle.ts";
import type { Usage } from "../../../src/domain/turn/budget.ts";
import { offered, run, usage0, call, frozen, shape } from "./fixtures.ts";

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
