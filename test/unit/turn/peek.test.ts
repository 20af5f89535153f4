// domain/turn/admit.ts, planTurn's `peeked`: a call a budget or a cancel would refuse whose
// operation already exists with this very input is a replay (dispatched, free), never a new execution.
import { describe, expect, it } from "vitest";
import type { RunState, TurnCall } from "../../../src/domain/turn/turn.ts";
import { planTurn } from "../../../src/domain/turn/admit.ts";
import type { Usage } from "../../../src/domain/turn/budget.ts";
import { run, usage0, call, frozen, shape } from "./fixtures.ts";

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
