// domain/check-status.ts: who may read an operation through toolgate_check_status.
import { describe, expect, it } from "vitest";
import { mayReadOperation } from "../../src/domain/check-status.ts";

describe("mayReadOperation", () => {
  const op = { run_id: "run_a", input_hash: "h_alice" };
  it.each([
    ["the run that created it", "run_a", [], true],
    ["the creating run, through a call with other arguments", "run_a", ["h_other"], true],
    ["another run whose call joined it with the identical input", "run_b", ["h_alice"], true],
    ["another run whose call conflicted (other arguments)", "run_b", ["h_bob"], false],
    ["another run with no call of it", "run_b", [], false],
  ] as const)("%s → %s", (_what, runId, hashes, expected) => {
    expect(mayReadOperation(runId, op, hashes)).toBe(expected);
  });
});
