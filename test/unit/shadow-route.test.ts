// Shadow runs (issue 22): where an operation's request goes is decided from its plan alone, and a
// shadow operation's traffic never counts against (or spends) production's retry budget.
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { budgetKeyFor } from "../../src/durable/retry-budget-client.ts";
import { compileManifest } from "../../src/tools/manifest/compile.ts";
import { routeOf, sandboxed, wouldSend } from "../../src/tools/shadow.ts";

const hosts = { allowlist: ["api.shop.example", "sandbox.shop.example"], allowLoopback: false };
const tool = (sandbox: unknown) => {
  const spec = compileManifest(
    {
      name: "charge",
      description: "Charge.",
      input_schema: { type: "object", properties: { amount: { type: "integer" } } },
      output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
      risk: "write",
      request: {
        method: "POST",
        url: "https://api.shop.example/v1/charges",
        headers: { Authorization: "Bearer {secret:SHOP_KEY}" },
      },
      idempotency: { mode: "header" },
      ...(sandbox ? { sandbox } : {}),
    },
    hosts,
  );
  if (!spec.ok) throw new Error(spec.error.detail);
  return spec.value;
};
const input = { value: { amount: 5 }, canonical: '{"amount":5}', hash: "h" };
const env = {} as Env;

describe("the route of a shadow operation's requests", () => {
  it("a live plan goes to production; a shadow plan to the sandbox base, to the fixed result, or (no sandbox) nowhere", () => {
    const withBase = tool({ base_url: "https://sandbox.shop.example/prefix/" });
    const built = {
      method: "POST",
      url: "https://api.shop.example/v1/charges?x=1",
      headers: {},
      body: null,
    };
    expect(sandboxed(built, routeOf({}, withBase))).toEqual({ send: built });
    expect(sandboxed(built, routeOf({ shadow: {} }, withBase))).toEqual({
      send: { ...built, url: "https://sandbox.shop.example/prefix/v1/charges?x=1" },
    });
    const withResult = tool({ result: { id: "ch_shadow" } });
    expect(sandboxed(built, routeOf({ shadow: {} }, withResult))).toEqual({
      answer: { id: "ch_shadow" },
    });
    expect(sandboxed(built, routeOf({ shadow: {} }, tool(null)))).toHaveProperty("refuse");
  });

  it("the retry budget is keyed by where the request really goes: the sandbox's host, or none for a fixed result", () => {
    const withBase = tool({ base_url: "https://sandbox.shop.example" });
    const key = (plan: object, spec = withBase) =>
      budgetKeyFor(env, "t1", spec, input, routeOf(plan, spec));
    expect(key({})).toBe("t1:https://api.shop.example");
    expect(key({ shadow: {} })).toBe("t1:https://sandbox.shop.example");
    expect(key({ shadow: {} }, tool({ result: { id: "x" } }))).toBeNull();
  });

  it("the would-be request names secrets, never values, and carries the idempotency key", () => {
    expect(wouldSend(tool(null), input, "tg_k")).toEqual({
      method: "POST",
      url: "https://api.shop.example/v1/charges",
      headers: {
        Authorization: "Bearer {secret:SHOP_KEY}",
        "Content-Type": "application/json",
        "Idempotency-Key": "tg_k",
      },
      body: '{"amount":5}',
    });
  });
});
