// Undo (issue 22): the pure rules — templates, the compensation's identity, and which originals
// may be compensated — as tables.
import { describe, expect, it } from "vitest";
import {
  compensable,
  compensationIdOf,
  renderArguments,
  schemaAt,
  templateRef,
  type OriginalFacts,
} from "../../src/domain/compensation.ts";
import {
  currentStep,
  planRollback,
  resumable,
  rollbackState,
  stepAfter,
  type RunWrite,
  type StepState,
} from "../../src/domain/rollback.ts";

const applied: OriginalFacts = {
  phase: "recorded",
  status: "succeeded",
  via: "attempt",
  shadow: false,
  compensates: null,
  declared: true,
};

describe("templates", () => {
  it("exactly {input.x} / {result.x.y} is a reference; anything else is a literal", () => {
    expect(templateRef("{input.amount}")).toEqual({ from: "input", path: ["amount"] });
    expect(templateRef("{result.charge.id}")).toEqual({ from: "result", path: ["charge", "id"] });
    for (const literal of ["x{input.amount}", "{input.amount} ", "{inputs.a}", "{input.}", 5, null])
      expect(templateRef(literal)).toBeNull();
  });

  it("renders values with their JSON type kept; a path the original lacks is refused", () => {
    const input = { amount: 1200, meta: { order: "o1" } };
    const result = { id: "ch_1", nested: { ok: true } };
    expect(
      renderArguments(
        {
          charge_id: "{result.id}",
          amount: "{input.amount}",
          order: "{input.meta.order}",
          flag: "{result.nested.ok}",
          reason: "dup",
          n: 3,
        },
        input,
        result,
      ),
    ).toEqual({
      ok: true,
      value: { charge_id: "ch_1", amount: 1200, order: "o1", flag: true, reason: "dup", n: 3 },
    });
    const missing = renderArguments({ charge_id: "{result.charge}" }, input, result);
    expect(missing).toMatchObject({ ok: false, error: { code: "compensation_arguments_invalid" } });
    expect(renderArguments({ a: "{result.id}" }, input, null).ok).toBe(false);
  });

  it("finds a path's schema through properties, or null", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "object", properties: { b: { type: "string" } } } },
    };
    expect(schemaAt(schema, ["a", "b"])).toEqual({ type: "string" });
    expect(schemaAt(schema, ["a", "c"])).toBeNull();
    expect(schemaAt(schema, ["z"])).toBeNull();
  });
});

describe("which originals may be compensated", () => {
  const table: Array<[string, Partial<OriginalFacts>, string | null]> = [
    ["succeeded by an attempt", {}, null],
    ["resolved by a person as succeeded", { via: "resolve" }, null],
    ["failed", { status: "failed" }, "failed"],
    ["rejected", { status: "rejected" }, "rejected"],
    ["cancelled", { status: "cancelled" }, "cancelled"],
    ["budget_exhausted", { status: "budget_exhausted" }, "budget_exhausted"],
    ["awaiting approval", { phase: "awaiting_approval", status: null }, "awaiting_approval"],
    ["executing", { phase: "executing", status: null }, "executing"],
    ["outcome unknown", { phase: "outcome_unknown", status: null }, "outcome_unknown"],
    ["a shadow run's write", { shadow: true }, "succeeded"],
    ["itself a compensation", { compensates: "op_x" }, "succeeded"],
    ["its tool declares none", { declared: false }, "succeeded"],
  ];
  for (const [what, facts, refusedIn] of table)
    it(`${what} → ${refusedIn === null ? "compensable" : `409 (state ${refusedIn})`}`, () => {
      const decided = compensable({ ...applied, ...facts });
      if (refusedIn === null) expect(decided.ok).toBe(true);
      else
        expect(decided).toMatchObject({
          ok: false,
          error: { code: "operation_not_compensable", state: refusedIn },
        });
    });
});

describe("the compensation's identity", () => {
  it("derives from the original's id alone, keeps its jurisdiction, differs per original", async () => {
    const a = await compensationIdOf("op_0123456789abcdef0123456789abcdef");
    expect(a).toBe(await compensationIdOf("op_0123456789abcdef0123456789abcdef"));
    expect(a).toMatch(/^op_[0-9a-f]{32}$/);
    expect(a).not.toBe(await compensationIdOf("op_fedcba9876543210fedcba9876543210"));
    expect(await compensationIdOf("op_eu_0123456789abcdef0123456789abcdef")).toMatch(
      /^op_eu_[0-9a-f]{32}$/,
    );
  });
});

describe("rollback: the plan and each step", () => {
  const write = (
    id: string,
    atMs: number | null,
    facts: Partial<OriginalFacts> = {},
    risk = "write",
  ): RunWrite => ({
    operation_id: id,
    tool: "charge",
    risk,
    facts: { ...applied, ...facts },
    recorded_at_ms: atMs,
  });

  it("newest applied first; reads and writes that applied nothing are not steps; undeclared ones are reported; unknown ones flagged first", () => {
    const steps = planRollback([
      write("a", 10),
      write("r", 11, {}, "read"),
      write("b", 30),
      write("c", 20, { declared: false }),
      write("f", 25, { status: "failed" }),
      write("u", null, { phase: "outcome_unknown", status: null }),
      write("s", 40, { shadow: true }),
    ]);
    expect(steps.map((s) => [s.operation_id, s.state])).toEqual([
      ["u", "unsettled"],
      ["b", "pending"],
      ["c", "not_compensable"],
      ["a", "pending"],
    ]);
    expect(rollbackState(steps)).toBe("running");
    expect(currentStep(steps)).toBe(1);
  });

  it("goes on only past a succeeded compensation; failed, rejected or unknown stops it", () => {
    expect(stepAfter({ phase: "recorded", status: "succeeded", message: null })).toEqual({
      state: "compensated",
      detail: null,
    });
    for (const status of ["failed", "rejected", "cancelled"])
      expect(stepAfter({ phase: "recorded", status, message: "no" })?.state).toBe("failed");
    expect(stepAfter({ phase: "outcome_unknown", status: null, message: null })?.state).toBe(
      "outcome_unknown",
    );
    // an unknown outcome that settles by itself (a keyed refund resent late) is still under way
    expect(
      stepAfter({ phase: "outcome_unknown", status: null, message: null, settling: true }),
    ).toBeNull();
    for (const phase of ["awaiting_approval", "executing", "retry_scheduled", "awaiting_lock"])
      expect(stepAfter({ phase, status: null, message: null })).toBeNull();
    const step = (state: StepState) => ({
      operation_id: "x",
      tool: "t",
      compensation_id: null,
      state,
      detail: null,
    });
    expect(rollbackState([step("compensated"), step("failed"), step("pending")])).toBe("stopped");
    expect(currentStep([step("compensated"), step("failed"), step("pending")])).toBe(-1);
    expect(rollbackState([step("compensated"), step("not_compensable")])).toBe("completed");
  });

  it("asked again: resumes an unknown outcome, or a step refused before any compensation was recorded; a failed compensation stays final", () => {
    const step = (state: StepState, compensation_id: string | null) => ({
      operation_id: "x",
      tool: "t",
      compensation_id,
      state,
      detail: null,
    });
    expect(resumable([step("compensated", "c1"), step("outcome_unknown", "c2")])).toBe(1);
    expect(
      resumable([step("compensated", "c1"), step("failed", null), step("pending", null)]),
    ).toBe(1);
    expect(resumable([step("failed", "c1"), step("pending", null)])).toBe(-1);
    expect(resumable([step("not_compensable", null), step("unsettled", null)])).toBe(-1);
  });
});
