// The gate, declarative limits, scopes, budgets and pricing: pure tables.
import { describe, expect, it } from "vitest";
import { admitTurn, reserveCall } from "../../src/domain/turn/budget.ts";
import { admitCall } from "../../src/domain/turn/gate.ts";
import { checkLimits, checkScopes } from "../../src/domain/turn/policy.ts";
import { modelCost } from "../../src/domain/pricing.ts";
import { compileManifest } from "../../src/tools/manifest/compile.ts";
import type { Limit } from "../../src/tools/spec.ts";

const spec = (() => {
  const compiled = compileManifest(
    {
      name: "refund",
      description: "Refund.",
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { amount: { type: "number" }, customer_id: { type: "string" } },
        required: ["amount", "customer_id"],
      },
      risk: "write",
      request: { method: "POST", url: "http://127.0.0.1:1/refunds" },
      bind: { customer_id: "context.customer_id" },
      requires_scopes: ["orders:refund"],
      limits: { amount: { max: "context.refund_limit" } },
    },
    { allowlist: [], allowLoopback: true },
  );
  if (!compiled.ok) throw new Error(compiled.error.detail);
  return compiled.value;
})();
const offered = new Map([["refund", spec]]);
const context = { customer_id: "cus_real", refund_limit: 100 };
const scopes = ["orders:refund"];
const code = (r: ReturnType<typeof admitCall>) => (r.ok ? "ok" : r.error.code);

describe("admitCall", () => {
  it.each([
    [
      "unoffered tool",
      { id: "c", name: "other", arguments: {} },
      context,
      scopes,
      "tool_not_allowed",
    ],
    [
      "missing scope",
      { id: "c", name: "refund", arguments: { amount: 5 } },
      context,
      [],
      "forbidden",
    ],
    [
      "invalid JSON string",
      { id: "c", name: "refund", arguments: "{nope" },
      context,
      scopes,
      "invalid_arguments",
    ],
    [
      "array arguments",
      { id: "c", name: "refund", arguments: [1] },
      context,
      scopes,
      "invalid_arguments",
    ],
    [
      "schema violation",
      { id: "c", name: "refund", arguments: { amount: "5" } },
      context,
      scopes,
      "invalid_arguments",
    ],
    [
      "missing bound context",
      { id: "c", name: "refund", arguments: { amount: 5 } },
      { refund_limit: 100 },
      scopes,
      "invalid_arguments",
    ],
    [
      "over the limit",
      { id: "c", name: "refund", arguments: { amount: 150 } },
      context,
      scopes,
      "policy_denied",
    ],
    [
      "limit reference missing (fails closed)",
      { id: "c", name: "refund", arguments: { amount: 5 } },
      { customer_id: "c" },
      scopes,
      "policy_denied",
    ],
    [
      "JSON-string arguments",
      { id: "c", name: "refund", arguments: '{"amount": 5}' },
      context,
      scopes,
      "ok",
    ],
  ] as const)("%s → %s", (_what, call, ctx, held, expected) => {
    expect(code(admitCall(call, offered, ctx, held))).toBe(expected);
  });

  it("a bound field comes from the context; a model that sends one is refused, naming it", () => {
    const admitted = admitCall(
      { id: "c", name: "refund", arguments: { amount: 5 } },
      offered,
      context,
      scopes,
    );
    expect(admitted.ok && admitted.value.input).toEqual({ amount: 5, customer_id: "cus_real" });
    const sent = admitCall(
      { id: "c", name: "refund", arguments: { amount: 5, customer_id: "cus_attacker" } },
      offered,
      context,
      scopes,
    );
    expect(sent.ok).toBe(false);
    if (!sent.ok)
      expect(sent.error).toMatchObject({
        code: "invalid_arguments",
        message: expect.stringContaining("customer_id is filled in by toolgate"),
      });
  });
});

describe("a limit on an optional field", () => {
  const optional = (() => {
    const compiled = compileManifest(
      {
        name: "refund_optional",
        description: "Refund; without an amount the upstream refunds everything.",
        input_schema: {
          type: "object",
          additionalProperties: false,
          properties: { order_id: { type: "string" }, amount: { type: "number" } },
          required: ["order_id"],
        },
        risk: "write",
        request: { method: "POST", url: "http://127.0.0.1:1/refunds" },
        limits: { amount: { max: "context.refund_limit" } },
      },
      { allowlist: [], allowLoopback: true },
    );
    if (!compiled.ok) throw new Error(compiled.error.detail);
    return compiled.value;
  })();
  const tools = new Map([["refund_optional", optional]]);
  it.each([
    ["amount within the limit → ok", { order_id: "o1", amount: 50 }, "ok"],
    ["amount over the limit → policy_denied", { order_id: "o1", amount: 150 }, "policy_denied"],
    [
      "amount left out (the upstream would refund everything) → policy_denied",
      { order_id: "o1" },
      "policy_denied",
    ],
    [
      "amount null (strict mode: absent) → policy_denied",
      { order_id: "o1", amount: null },
      "policy_denied",
    ],
  ] as const)("%s", (_what, args, expected) => {
    expect(optional.strictExport).toBe(true);
    const call = { id: "c", name: "refund_optional", arguments: args };
    expect(code(admitCall(call, tools, { refund_limit: 100 }, []))).toBe(expected);
  });
});

describe("limits and scopes", () => {
  it("numeric and enum limits", () => {
    expect(checkLimits({ amount: { min: 1, max: 10 } }, { amount: 10 }, {}).ok).toBe(true);
    expect(checkLimits({ amount: { min: 1 } }, { amount: 0 }, {}).ok).toBe(false);
    expect(checkLimits({ reason: { enum: ["damaged"] } }, { reason: "other" }, {}).ok).toBe(false);
  });
  it.each<[string, Record<string, Limit>, Record<string, unknown>]>([
    ["a max limit on an absent field", { amount: { max: 10 } }, {}],
    ["a min limit on an absent field", { amount: { min: 1 } }, { other: 5 }],
    ["an enum limit on an absent field", { reason: { enum: ["damaged"] } }, {}],
    ["a context limit on an absent field", { amount: { max: "context.refund_limit" } }, {}],
  ])("fails closed: %s → policy_denied", (_what, limits, input) => {
    const r = checkLimits(limits, input, { refund_limit: 100 });
    expect(r).toMatchObject({ ok: false, error: { code: "policy_denied" } });
    expect(!r.ok && r.error.message).toMatch(/has a limit and was not given/);
  });
  it("names the missing scopes", () => {
    const r = checkScopes("refund", ["a", "b"], ["a"]);
    expect(!r.ok && r.error.message).toContain("missing b");
  });
});

describe("budgets", () => {
  const usage = { turns: 0, toolCalls: 0, cost: 0 };
  it("reserves calls until a budget runs out", () => {
    const r = admitTurn({ max_tool_calls: 2 }, usage, [1, null, 1, 1], 0, 0);
    expect(r.verdicts.map((v) => v?.code ?? null)).toEqual([null, null, null, "max_tool_calls"]);
    expect(r.usage).toEqual({ turns: 1, toolCalls: 2, cost: 2 });
  });
  it("stops whole turns on max_turns and the deadline", () => {
    expect(admitTurn({ max_turns: 1 }, { ...usage, turns: 1 }, [1], 0, 0).verdicts[0]?.code).toBe(
      "max_turns",
    );
    expect(admitTurn({ max_duration_ms: 100 }, usage, [1], 0, 100).verdicts[0]?.code).toBe(
      "deadline",
    );
  });
  it("max_cost counts the reservation", () => {
    expect(reserveCall({ max_cost: 2 }, { ...usage, cost: 1.5 }, 1)).toMatchObject({
      ok: false,
      error: { code: "max_cost" },
    });
    expect(reserveCall({ max_cost: 2 }, { ...usage, cost: 1 }, 1)).toMatchObject({
      ok: true,
      value: { cost: 2, toolCalls: 1 },
    });
  });
});

describe("modelCost", () => {
  const prices = {
    "claude-*": { input_per_mtok: 3, output_per_mtok: 15 },
    "gpt-5": { input_per_mtok: 1, output_per_mtok: 10 },
  };
  it("prices by exact model, then prefix, then *; unknown models cost nothing", () => {
    expect(
      modelCost({ model: "gpt-5", input_tokens: 1_000_000, output_tokens: 100_000 }, prices),
    ).toBe(2);
    expect(
      modelCost({ model: "claude-sonnet-4-5", input_tokens: 1_000_000, output_tokens: 0 }, prices),
    ).toBe(3);
    expect(modelCost({ model: "other", input_tokens: 1_000_000, output_tokens: 0 }, prices)).toBe(
      0,
    );
    expect(
      modelCost(
        { model: "other", input_tokens: 1_000_000, output_tokens: 0 },
        { "*": { input_per_mtok: 5, output_per_mtok: 0 } },
      ),
    ).toBe(5);
    expect(modelCost(null, prices)).toBe(0);
  });
});
