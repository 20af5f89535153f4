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
