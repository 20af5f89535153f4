// domain/turn/admit.ts, turn groups: calls of one model response posted separately under one
// turn_key count one turn and charge its usage once.
import { describe, expect, it } from "vitest";
import type { RunState } from "../../../src/domain/turn/turn.ts";
import { admitToGroup, planTurn, type TurnGroup } from "../../../src/domain/turn/admit.ts";
import type { Usage } from "../../../src/domain/turn/budget.ts";
import { run, usage0, call, frozen, shape } from "./fixtures.ts";

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
