// Undo (issue 22): the pure rules — templates, the compensation's identity, and which originals
// may be compensated — as tables.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  admitCompensation,
  asksAnew,
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
import { defineTool } from "../../src/tools/define.ts";

const applied: OriginalFacts = {
  phase: "recorded",
  status: "succeeded",
  code: null,
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
    [
      "failed/invalid_output: it took effect, its answer unreadable",
      { status: "failed", code: "invalid_output" },
      null,
    ],
    ["failed (nothing applied)", { status: "failed", code: "permanent_failure" }, "failed"],
    ["failed: credentials refused", { status: "failed", code: "upstream_forbidden" }, "failed"],
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

describe("generations: asking again after a compensation that applied nothing", () => {
  it("the first generation keeps the id it had before generations; each next one differs", async () => {
    const original = "op_0123456789abcdef0123456789abcdef";
    const first = await compensationIdOf(original);
    expect(await compensationIdOf(original, 1)).toBe(first);
    const second = await compensationIdOf(original, 2);
    expect(second).not.toBe(first);
    expect(await compensationIdOf(original, 3)).not.toBe(second);
    expect(await compensationIdOf("op_eu_0123456789abcdef0123456789abcdef", 2)).toMatch(/^op_eu_/);
  });

  it.each<[string, string | null, string | null, boolean]>([
    ["recorded", "rejected", "approval_rejected", true],
    ["recorded", "rejected", "approval_expired", true],
    ["recorded", "rejected", "policy_denied", true],
    ["recorded", "failed", "permanent_failure", true],
    ["recorded", "failed", "upstream_forbidden", true],
    ["recorded", "failed", "invalid_output", false],
    ["recorded", "succeeded", null, false],
    ["outcome_unknown", null, null, false],
    ["awaiting_approval", null, null, false],
    ["executing", null, null, false],
    ["retry_scheduled", null, null, false],
  ])("%s %s/%s → asks anew: %s", (phase, status, code, expected) => {
    expect(asksAnew({ phase, status, code })).toBe(expected);
  });

  it("a rollback asked again resumes at its first failed or unknown step: looked at again if unknown, asked again if failed", () => {
    const step = (state: StepState) => ({
      operation_id: "x",
      tool: "t",
      compensation_id: "c",
      state,
      detail: null,
    });
    expect(resumable([step("compensated"), step("failed"), step("pending")])).toEqual({
      index: 1,
      state: "pending",
    });
    expect(resumable([step("outcome_unknown"), step("pending")])).toEqual({
      index: 0,
      state: "submitted",
    });
    expect(resumable([step("compensated"), step("not_compensable")])).toBeNull();
  });
});

describe("rollback: the plan and each step", () => {
  const write = (
    id: string,
    atMs: number | null,
    facts: Partial<OriginalFacts> = {},
    risk = "write",
    runId = "run_1",
  ): RunWrite => ({
    operation_id: id,
    run_id: runId,
    tool: "charge",
    risk,
    facts: { ...applied, ...facts },
    recorded_at_ms: atMs,
  });

  it("newest applied first; reads and writes that applied nothing are not steps; undeclared ones are reported; unknown ones flagged first", () => {
    const steps = planRollback("run_1", [
      write("a", 10),
      write("r", 11, {}, "read"),
      write("b", 30),
      write("c", 20, { declared: false }),
      write("f", 25, { status: "failed", code: "permanent_failure" }),
      write("i", 35, { status: "failed", code: "invalid_output" }),
      write("u", null, { phase: "outcome_unknown", status: null }),
      write("s", 40, { shadow: true }),
    ]);
    expect(steps.map((s) => [s.operation_id, s.state])).toEqual([
      ["u", "unsettled"],
      ["i", "pending"],
      ["b", "pending"],
      ["c", "not_compensable"],
      ["a", "pending"],
    ]);
    expect(rollbackState(steps)).toBe("running");
    expect(currentStep(steps)).toBe(1);
  });

  it("plans only the run's own operations: another run's (joined or conflicted with) is no step, whatever its state", () => {
    const steps = planRollback("run_1", [
      write("theirs", 50, {}, "write", "run_2"),
      write("own", 10),
      write("their_unknown", null, { phase: "outcome_unknown", status: null }, "write", "run_2"),
      write("their_undeclared", 60, { declared: false }, "write", "run_2"),
    ]);
    expect(steps.map((s) => [s.operation_id, s.state])).toEqual([["own", "pending"]]);
    expect(planRollback("run_1", [write("theirs", 50, {}, "write", "run_2")])).toEqual([]);
  });

  it("goes on only past a succeeded compensation; failed, rejected or unknown stops it", () => {
    expect(
      stepAfter({ phase: "recorded", status: "succeeded", code: null, message: null }),
    ).toEqual({
      state: "compensated",
      detail: null,
    });
    for (const [status, code] of <Array<[string, string]>>[
      ["failed", "permanent_failure"],
      ["failed", "upstream_forbidden"],
      ["rejected", "approval_rejected"],
      ["rejected", "approval_expired"],
      ["cancelled", "cancelled"],
    ])
      expect(stepAfter({ phase: "recorded", status, code, message: "no" })?.state).toBe("failed");
    // The refund took effect (the tool answered success) but its answer was unreadable: undone.
    expect(
      stepAfter({
        phase: "recorded",
        status: "failed",
        code: "invalid_output",
        message: "took effect",
      }),
    ).toEqual({ state: "compensated", detail: expect.stringMatching(/took effect/) });
    expect(
      stepAfter({ phase: "outcome_unknown", status: null, code: null, message: null })?.state,
    ).toBe("outcome_unknown");
    // an unknown outcome that settles by itself (a keyed refund resent late) is still under way
    expect(
      stepAfter({
        phase: "outcome_unknown",
        status: null,
        code: null,
        message: null,
        settling: true,
      }),
    ).toBeNull();
    for (const phase of ["awaiting_approval", "executing", "retry_scheduled", "awaiting_lock"])
      expect(stepAfter({ phase, status: null, code: null, message: null })).toBeNull();
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

  it("asked again: resumes an unknown outcome (looked at again), a step refused before any compensation was recorded and a failed one (asked again: a new generation only if it applied nothing)", () => {
    const step = (state: StepState, compensation_id: string | null) => ({
      operation_id: "x",
      tool: "t",
      compensation_id,
      state,
      detail: null,
    });
    expect(resumable([step("compensated", "c1"), step("outcome_unknown", "c2")])).toEqual({
      index: 1,
      state: "submitted",
    });
    expect(
      resumable([step("compensated", "c1"), step("failed", null), step("pending", null)]),
    ).toEqual({ index: 1, state: "pending" });
    expect(resumable([step("failed", "c1"), step("pending", null)])).toEqual({
      index: 0,
      state: "pending",
    });
    expect(resumable([step("not_compensable", null), step("unsettled", null)])).toBeNull();
  });
});

describe("admitCompensation: the turn's gate, with the person's scopes, before anything is recorded", () => {
  const refund = (risk: "write" | "read", requiresScopes: string[] = []) =>
    defineTool({
      name: "refund",
      description: "refund a charge",
      input: z.object({ charge: z.string().regex(/^ch_/) }),
      risk,
      requiresScopes,
      limitsAcrossRuns: [{ name: "refunds", subject: "user", window: "1h", max: 5, count: true }],
      request: (input) => ({
        method: "POST",
        url: "https://api.example/refunds",
        headers: {},
        body: JSON.stringify(input),
      }),
    });
  const declared = {
    tool: "refund",
    arguments: { charge: "{result.id}" },
    approval: "required" as const,
  };
  const original = (status: string, result: unknown) => ({
    operationId: "op_1",
    facts: { status },
    input: {},
    result,
  });
  const run = { context: {}, user: { id: "u_1", scopes: [] } };
  const rows: Array<[string, Parameters<typeof admitCompensation>, RegExp | null]> = [
    [
      "admitted: the tool's own scopes, not the run user's",
      [refund("write", ["refunds:write"]), declared, original("succeeded", { id: "ch_9" }), run],
      null,
    ],
    [
      "the tool became a read",
      [refund("read"), declared, original("succeeded", { id: "ch_9" }), run],
      /refund is now a read; nothing was sent/,
    ],
    [
      "a template the result lacks",
      [refund("write"), declared, original("succeeded", {}), run],
      /has no id/,
    ],
    [
      "no result to take it from (failed, took effect)",
      [refund("write"), declared, original("failed", null), run],
      /no result to take \{result\.\*\} from/,
    ],
    [
      "the schema refuses the rendered value",
      [refund("write"), declared, original("succeeded", { id: "x_9" }), run],
      /refund refuses the rendered arguments/,
    ],
  ];
  it.each(rows)("%s", (_name, args, refused) => {
    const admitted = admitCompensation(...args);
    if (refused === null) {
      expect(admitted).toMatchObject({ ok: true, value: { input: { charge: "ch_9" } } });
      expect(admitted.ok && admitted.value.claims).toHaveLength(1);
    } else
      expect(admitted).toMatchObject({
        ok: false,
        error: { code: "compensation_arguments_invalid", detail: expect.stringMatching(refused) },
      });
  });
});
