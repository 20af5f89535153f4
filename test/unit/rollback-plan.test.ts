// A rollback approved as one plan (issue 35 item 4), pure: the plan approval's checks (exactly the
// plan's (hash, tool version) pairs in order, never the run's user under four eyes) and which approvals cover a
// compensation frozen with a given (input hash, tool version).
import { describe, expect, it } from "vitest";
import {
  approvalsCovering,
  checkPlanApproval,
  refusalBasis,
  standingRefusal,
  type PlanApproval,
  type PlanItem,
} from "../../src/domain/rollback.ts";

const item = (hash: string, fourEyes = true): PlanItem => ({
  operation_id: `op_${hash}`,
  tool: "charge",
  compensation_tool: "refund",
  compensation_id: null,
  input_hash: hash,
  policy_version: "v1",
  arguments: {},
  four_eyes: fourEyes,
  step_up: false,
});
const items = [item("a"), item("b")];

describe("checkPlanApproval", () => {
  // What the approver was shown: "a" for the pair (a, v1); "a@v2" for a under another version.
  const shown = (names: string[]) =>
    names.map((n) => {
      const [hash, version = "v1"] = n.split("@");
      return { input_hash: hash!, policy_version: version };
    });
  const rows: Array<[string, PlanItem[], string[], string, string | null]> = [
    ["the plan's pairs, in order", items, ["a", "b"], "bob", null],
    ["reordered", items, ["b", "a"], "bob", "approval_mismatch"],
    ["one missing", items, ["a"], "bob", "approval_mismatch"],
    ["one extra", items, ["a", "b", "c"], "bob", "approval_mismatch"],
    ["a hash seen under another tool version", items, ["a", "b@v0"], "bob", "approval_mismatch"],
    [
      "the run's user, four eyes on one",
      [item("a", false), item("b")],
      ["a", "b"],
      "u1",
      "self_approval",
    ],
    ["the run's user, no four eyes anywhere", [item("a", false)], ["a"], "u1", null],
    ["nothing left to approve", [], [], "bob", "rollback_not_running"],
  ];
  it.each(rows)("%s", (_name, plan, names, by, code) => {
    const checked = checkPlanApproval(plan, shown(names), by, "u1");
    expect(checked.ok ? null : checked.error.code).toBe(code);
  });
  it("a changed version is named as such", () => {
    const checked = checkPlanApproval(items, shown(["a", "b@v0"]), "bob", "u1");
    expect(checked).toMatchObject({ ok: false, error: { field: "policy_version" } });
  });
});

describe("approvalsCovering", () => {
  const approval = (by: string, hashes: string[], versions: string[]): PlanApproval => ({
    by,
    via: "api_key",
    scopes: [],
    input_hashes: hashes,
    policy_versions: versions,
    reason: null,
    at_ms: 0,
  });
  const stored = [approval("bob", ["a", "b"], ["v1", "v1"]), approval("carol", ["a"], ["v2"])];
  it.each([
    ["a", "v1", ["bob"]],
    ["b", "v1", ["bob"]],
    ["a", "v2", ["carol"]],
    ["b", "v2", []],
    ["c", "v1", []],
  ])("hash %s under %s → %j", (hash, version, expected) => {
    expect(approvalsCovering(stored, hash, version).map((a) => a.by)).toEqual(expected);
  });
});

describe("a plan approval's refusal, remembered", () => {
  it.each([
    ["not_an_approver", true],
    ["self_approval", true],
    ["step_up_required", true],
    ["approval_mismatch", true],
    ["unavailable", false],
    ["not_awaiting_approval", false],
  ])("%s stands: %s", (code, stands) => {
    expect(standingRefusal(code)).toBe(stands);
  });
  const basis = { input_hash: "a", policy_version: "v1", route: { step: 0 } };
  it.each([
    ["the same compensation, looked at again", basis, true],
    ["an edit (another hash)", { ...basis, input_hash: "b" }, false],
    ["another version of the tool", { ...basis, policy_version: "v2" }, false],
    ["an escalation (the route's next step)", { ...basis, route: { step: 1 } }, false],
  ])("%s: the same basis %s", (_name, now, same) => {
    expect(refusalBasis(now) === refusalBasis(basis)).toBe(same);
  });
});
