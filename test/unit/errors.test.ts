// The one error map: every Durable Object error arm → an API error → an HTTP status, and the
// deployment's price table read as a Result (a malformed table is `misconfigured`, never zero cost).
import { describe, expect, it } from "vitest";
import { modelPrices } from "../../src/config.ts";
import type { Env } from "../../src/durable/env.ts";
import { statusOf, toApiError, type ObjectError } from "../../src/http/problem.ts";

describe("toApiError", () => {
  const rows: Array<[ObjectError, string, number]> = [
    [{ code: "not_found" }, "not_found", 404],
    [{ code: "not_found", detail: "no such run" }, "not_found", 404],
    [{ code: "invalid_request", detail: "x" }, "invalid_request", 400],
    [{ code: "turn_conflict", detail: "x" }, "turn_conflict", 409],
    [{ code: "invalid_manifest", detail: "x" }, "invalid_manifest", 422],
    [{ code: "upstream_not_allowed", detail: "x" }, "upstream_not_allowed", 403],
    [{ code: "webhook_url_not_allowed", detail: "x" }, "webhook_url_not_allowed", 422],
    [{ code: "not_outcome_unknown", phase: "recorded" }, "not_outcome_unknown", 409],
    [{ code: "invalid_tool", detail: "x" }, "misconfigured", 500],
    [{ code: "misconfigured", detail: "x" }, "misconfigured", 500],
    [{ code: "not_verifiable", detail: "x" }, "not_verifiable", 422],
    [{ code: "invalid_arguments", detail: "x" }, "invalid_arguments", 422],
    [{ code: "policy_denied", detail: "x" }, "policy_denied", 422],
    [{ code: "tool_changed", detail: "x" }, "tool_changed", 409],
    [{ code: "unavailable", detail: "x" }, "unavailable", 503],
    [{ code: "invalid_compensation", detail: "x" }, "invalid_compensation", 422],
    [
      { code: "compensation_arguments_invalid", detail: "x" },
      "compensation_arguments_invalid",
      422,
    ],
    [
      { code: "operation_not_compensable", state: "failed", detail: "x" },
      "operation_not_compensable",
      409,
    ],
    [{ code: "already_started" }, "internal", 500],
    [{ code: "not_started" }, "internal", 500],
  ];
  it.each(rows)("%j → %s %i", (error, code, status) => {
    const api = toApiError(error);
    expect(api.code).toBe(code);
    expect(statusOf(api)).toBe(status);
    expect(api.detail.length).toBeGreaterThan(0);
  });
});

describe("modelPrices", () => {
  const env = (prices?: string) => ({ TOOLGATE_MODEL_PRICES: prices }) as unknown as Env;
  it.each([
    ["unset: nothing priced", undefined, { ok: true, value: {} }],
    [
      "a valid table",
      '{"*":{"input_per_mtok":1,"output_per_mtok":2}}',
      { ok: true, value: { "*": { input_per_mtok: 1, output_per_mtok: 2 } } },
    ],
    ["not JSON", "{nope", { ok: false, error: { code: "misconfigured" } }],
    [
      "a price that is not a number",
      '{"*":{"input_per_mtok":"1","output_per_mtok":2}}',
      { ok: false, error: { code: "misconfigured" } },
    ],
    [
      "a negative price",
      '{"*":{"input_per_mtok":-1,"output_per_mtok":2}}',
      { ok: false, error: { code: "misconfigured" } },
    ],
    [
      "a misspelt field",
      '{"*":{"input_per_mtoks":1,"output_per_mtok":2}}',
      { ok: false, error: { code: "misconfigured" } },
    ],
    ["not a table", "[1]", { ok: false, error: { code: "misconfigured" } }],
  ] as const)("%s", (_what, prices, expected) => {
    expect(modelPrices(env(prices))).toMatchObject(expected);
  });

  it("a malformed table surfaces as a 500 misconfigured problem", () => {
    const prices = modelPrices(env("{nope"));
    expect(!prices.ok && statusOf(toApiError(prices.error))).toBe(500);
  });
});
