// The Cedar schema generated from a tenant's tools (issue 21 part 2): what policies may reference.
import { describe, expect, it } from "vitest";
import { argumentTypes, cedarSchemaFor, cedarTypeOf } from "../../src/policies/schema.ts";

describe("cedarTypeOf", () => {
  it.each([
    [{ type: "integer" }, "Long"],
    [{ type: "number" }, "Long"],
    [{ type: "string" }, "String"],
    [{ type: "boolean" }, "Boolean"],
    [{ enum: ["usd", "eur"] }, "String"],
    [{ enum: [1, 2] }, null],
    [{ type: "array" }, null],
    [{ type: "object" }, null],
  ])("%j → %s", (field, type) => expect(cedarTypeOf(field)).toBe(type));
});

describe("cedarSchemaFor", () => {
  const refund = {
    name: "refund_order",
    inputJsonSchema: {
      type: "object",
      properties: {
        amount: { type: "integer" },
        reason: { type: "string" },
        lines: { type: "array" },
        "customer-id": { type: "string" },
      },
      required: ["amount", "customer-id"],
    },
  };
  it("scalar arguments only, optional ones marked, names quoted", () => {
    expect(argumentTypes(refund)).toEqual([
      { name: "amount", type: "Long", required: true },
      { name: "reason", type: "String", required: false },
      { name: "customer-id", type: "String", required: true },
    ]);
    expect(cedarSchemaFor([refund])).toBe(
      [
        "entity User { id: String, scopes: Set<String> } tags String;",
        "entity Run tags String;",
        "entity Target;",
        'action "refund_order" appliesTo { principal: User, resource: Target, context: { "arguments": { "amount": Long, "reason"?: String, "customer-id": String }, "run": Run } };',
      ].join("\n"),
    );
  });
});
