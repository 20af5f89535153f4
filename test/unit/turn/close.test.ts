// domain/turn/close.ts as a table: planClose (a run cancels only operations it created).
import { describe, expect, it } from "vitest";
import type { TurnCall, TurnRecord } from "../../../src/domain/turn/turn.ts";
import { planClose, type Standing } from "../../../src/domain/turn/close.ts";

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
