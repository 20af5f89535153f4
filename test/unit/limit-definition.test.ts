// Limits across runs, one definition per name (audit N4) and subjects named with their kind (N7):
// the contradiction a PUT is refused for, and the bucket keys, as tables.
import { describe, expect, it } from "vitest";
import {
  claimsFor,
  describeSubject,
  legacySubject,
  subjectKey,
  type AcrossRunsLimit,
} from "../../src/domain/limit/claims.ts";
import { limitConflict } from "../../src/domain/limit/definition.ts";

const H = 3_600_000;
const spend = (over: Partial<AcrossRunsLimit> = {}): AcrossRunsLimit => ({
  name: "spend",
  subject: "context.customer_id",
  window: "24h",
  windowMs: 24 * H,
  measure: { kind: "sum", field: "amount" },
  max: 1000,
  over: "refuse",
  ...over,
});

describe("limitConflict: one definition per limit name", () => {
  const cardTool = { tool: "charge_card", limits: [spend()] };
  it.each([
    ["the same definition", spend(), null],
    [
      "the same, but asks a person when over (over is the tool's own)",
      spend({ over: "approve" }),
      null,
    ],
    ["the same, window written otherwise (1d = 24h)", spend({ window: "1d" }), null],
    ["window 1h against 24h", spend({ window: "1h", windowMs: H }), ["window"]],
    ["another max", spend({ max: 500 }), ["max"]],
    ["a count against a sum", spend({ measure: { kind: "count" } }), ["measure"]],
    [
      "the sum of another argument",
      spend({ measure: { kind: "sum", field: "total" } }),
      ["measure"],
    ],
    ["per user against per customer", spend({ subject: "user" }), ["subject"]],
    [
      "everything",
      spend({ subject: "tenant", window: "1h", windowMs: H, measure: { kind: "count" }, max: 3 }),
      ["subject", "window", "measure", "max"],
    ],
  ] as const)("%s", (_, mine, fields) => {
    const conflict = limitConflict("charge_wallet", [mine], [cardTool]);
    if (fields === null) expect(conflict).toBeNull();
    else expect(conflict).toMatchObject({ limit: "spend", tool: "charge_card", fields });
  });

  it("names the other tool and both values", () => {
    const conflict = limitConflict(
      "charge_wallet",
      [spend({ window: "1h", windowMs: H })],
      [cardTool],
    );
    expect(conflict?.detail).toContain("spend is already defined by the tool charge_card");
    expect(conflict?.detail).toContain("window 1h here, 24h there");
  });

  it("a tool's own earlier version does not count: the only tool using a name may change it", () => {
    expect(
      limitConflict("charge_card", [spend({ window: "1h", windowMs: H })], [cardTool]),
    ).toBeNull();
  });

  it("another name never conflicts", () => {
    expect(limitConflict("x", [spend({ name: "other", max: 1 })], [cardTool])).toBeNull();
  });
});

describe("subjects are named with their kind (audit N7)", () => {
  const limit = (subject: string): AcrossRunsLimit =>
    spend({ subject, measure: { kind: "count" }, max: 3 });
  const subjectOf = (subject: string, context: Record<string, unknown>, userId: string) => {
    const claims = claimsFor([limit(subject)], {}, context, userId);
    if (!claims.ok) throw new Error(claims.error.message);
    return claims.value[0]!.subject;
  };

  it("user cus_1 and customer cus_1 are two buckets; a user named tenant is not the tenant", () => {
    const user = subjectOf("user", {}, "cus_1");
    const customer = subjectOf("context.customer_id", { customer_id: "cus_1" }, "u1");
    expect([user, customer]).toEqual(["user:cus_1", "context.customer_id:cus_1"]);
    expect(subjectOf("user", {}, "tenant")).toBe("user:tenant");
    expect(subjectOf("tenant", {}, "tenant")).toBe("tenant");
    // Two context fields with the same value, too.
    expect(subjectOf("context.order_id", { order_id: "cus_1" }, "u1")).not.toBe(customer);
  });

  it.each([
    ["context.customer_id:cus_1", "cus_1", "customer_id cus_1"],
    ["user:u:1", "u:1", "user u:1"],
    ["tenant", null, "the tenant"],
    ["cus_1", null, "cus_1"],
  ])("%s: legacy %s, in words %s", (key, legacy, words) => {
    expect(legacySubject(key)).toBe(legacy);
    expect(describeSubject(key)).toBe(words);
  });

  it("subjectKey", () => {
    expect(subjectKey("context.customer_id", "a:b")).toBe("context.customer_id:a:b");
    expect(subjectKey("tenant", "")).toBe("tenant");
  });
});
