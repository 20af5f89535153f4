// domain/run-limits.ts as tables: which new turn rows a run still stores, and which turns count as
// stopped (only repeating that the run's budgets or its cancellation refuse it).
import { describe, expect, it } from "vitest";
import { refusal, type Envelope } from "../../src/domain/envelope.ts";
import {
  admitStored,
  countStored,
  NO_STORED,
  RUN_LIMITS,
  stoppedTurn,
} from "../../src/domain/run-limits.ts";
import type { TurnCall, TurnRecord } from "../../src/domain/turn/turn.ts";

const fixed = (envelope: Envelope): TurnCall => ({ call: { id: "c", name: "t" }, fixed: envelope });
const submitted: TurnCall = {
  call: { id: "c", name: "t" },
  submit: {
    operationId: "op_1",
    idempotencyKey: "tg_1",
    input: { value: {}, canonical: "{}", hash: "h" },
    source: { kind: "code", name: "t" },
    cost: 0,
  },
  closed: null,
};
const turnOf = (...calls: TurnCall[]): TurnRecord => ({
  id: "turn_1",
  contentHash: "ch",
  seq: 1,
  calls,
  reservedCost: 0,
  settledCost: null,
  modelCost: 0,
  createdAtMs: 0,
});
const budget = fixed(refusal("budget_exhausted", "op_b", "max_turns", "spent"));
const cancelled = fixed(refusal("cancelled", "op_c", "cancelled", "cancelled"));
const invalid = fixed(refusal("rejected", "op_r", "invalid_arguments", "bad"));
const answered = fixed({ status: "succeeded", operation_id: "op_s", result: {} });
const checkSpent = fixed(refusal("budget_exhausted", "op_s", "max_status_checks", "spent"));

describe("stoppedTurn", () => {
  it.each([
    ["a call refused by a budget", [budget], false, true],
    ["a call refused by the cancel", [cancelled], true, true],
    ["a status check past the allowance", [checkSpent], false, true],
    ["bad arguments while the run still admits turns", [invalid], false, false],
    ["bad arguments once the run admits no new turn", [invalid], true, true],
    ["bad arguments beside a spent budget", [invalid, budget], false, true],
    ["a call sent", [submitted, budget], false, false],
    ["a status check answered", [answered, budget], true, false],
  ] as const)("%s: stopped %s → %s", (_what, calls, runStopped, stopped) => {
    expect(stoppedTurn(turnOf(...calls), runStopped)).toBe(stopped);
  });
});

describe("admitStored", () => {
  const max = RUN_LIMITS;
  it.each([
    ["an empty run", NO_STORED, 100, false, null],
    [
      "a stopped turn within the grace",
      { ...NO_STORED, stopped: max.maxStoppedTurns - 1 },
      1,
      true,
      null,
    ],
    [
      "a stopped turn past the grace",
      { ...NO_STORED, stopped: max.maxStoppedTurns },
      1,
      true,
      "turns that its budgets",
    ],
    [
      "a sent turn after many stopped ones",
      { ...NO_STORED, stopped: max.maxStoppedTurns },
      1,
      false,
      null,
    ],
    ["the last turn row", { ...NO_STORED, turns: max.maxStoredTurns - 1 }, 1, false, null],
    [
      "a turn row past the most",
      { ...NO_STORED, turns: max.maxStoredTurns },
      1,
      false,
      "the most turns",
    ],
    [
      "a row that fits the bytes exactly",
      { ...NO_STORED, bytes: max.maxStoredBytes - 10 },
      10,
      false,
      null,
    ],
    [
      "a row one byte over",
      { ...NO_STORED, bytes: max.maxStoredBytes - 10 },
      11,
      false,
      "call data",
    ],
  ] as const)("%s", (_what, counts, bytes, stopped, refused) => {
    const verdict = admitStored(counts, bytes, stopped);
    if (refused === null) expect(verdict).toBeNull();
    else {
      expect(verdict?.code).toBe("run_turn_limit");
      expect(verdict?.detail).toContain(refused);
      expect(verdict?.detail).toContain("nothing was stored or sent");
    }
  });
  it("counts a stored row: one turn, its bytes, stopped or not, its checks", () => {
    expect(countStored({ turns: 2, bytes: 10, stopped: 1, checks: 3 }, 5, true, 2)).toEqual({
      turns: 3,
      bytes: 15,
      stopped: 2,
      checks: 5,
    });
    expect(countStored(NO_STORED, 5, false, 0)).toEqual({
      turns: 1,
      bytes: 5,
      stopped: 0,
      checks: 0,
    });
  });
});
