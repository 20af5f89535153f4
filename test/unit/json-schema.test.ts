// One schema for the gate and the export: closing objects, folding allOf, strict-mode nulls, and
// undeclared keys, as tables over plain JSON Schema.
import { describe, expect, it } from "vitest";
import { closeSchema, normalizeArguments, refProblem } from "../../src/domain/json-schema.ts";
import { exportSchema } from "../../src/providers/strict-schema.ts";

describe("closeSchema", () => {
  it("closes every object that does not explicitly allow more keys, at every depth", () => {
    const closed = closeSchema({
      type: "object",
      properties: {
        a: { type: "object", properties: { b: { type: "string" } } },
        list: { type: "array", items: { type: "object", properties: { c: { type: "number" } } } },
      },
      $defs: { D: { type: "object", properties: { d: { type: "string" } } } },
    }) as any;
    expect(closed.additionalProperties).toBe(false);
    expect(closed.properties.a.additionalProperties).toBe(false);
    expect(closed.properties.list.items.additionalProperties).toBe(false);
    expect(closed.$defs.D.additionalProperties).toBe(false);
  });

  it("leaves explicit openness alone", () => {
    expect(closeSchema({ type: "object", additionalProperties: true }).additionalProperties).toBe(
      true,
    );
    expect(
      closeSchema({ type: "object", additionalProperties: { type: "string" } })
        .additionalProperties,
    ).toEqual({ type: "string" });
    expect(
      closeSchema({ type: "object", patternProperties: { "^x": {} } }).additionalProperties,
    ).toBeUndefined();
  });

  it("folds allOf of objects into one closed object (closing each branch would refuse the other's keys)", () => {
    const closed = closeSchema({
      allOf: [
        { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
        { type: "object", properties: { b: { type: "number" } } },
      ],
    }) as any;
    expect(closed.allOf).toBeUndefined();
    expect(Object.keys(closed.properties)).toEqual(["a", "b"]);
    expect(closed.required).toEqual(["a"]);
    expect(closed.additionalProperties).toBe(false);
  });
});

describe("normalizeArguments", () => {
  const schema = closeSchema({
    type: "object",
    properties: {
      amount: { type: "integer" },
      note: { type: "string" },
      maybe: { type: ["string", "null"] },
      address: {
        type: "object",
        properties: { city: { type: "string" }, zip: { type: "string" } },
        required: ["city"],
      },
      items: {
        type: "array",
        items: {
          type: "object",
          properties: { sku: { type: "string" }, gift: { type: "boolean" } },
          required: ["sku"],
        },
      },
      ref: { $ref: "#/$defs/Ref" },
      choice: {
        anyOf: [
          { type: "object", properties: { card: { type: "string" } } },
          { type: "object", properties: { iban: { type: "string" } } },
        ],
      },
    },
    required: ["amount"],
    $defs: {
      Ref: {
        type: "object",
        properties: { id: { type: "string" }, label: { type: "string" } },
        required: ["id"],
      },
    },
  });
  const ok = (value: unknown, strict = true) => {
    const r = normalizeArguments(schema, value, strict);
    return r.ok ? r.value : `refused ${r.error.path}`;
  };
  it.each([
    ["optional nulls read as absent", { amount: 1, note: null }, { amount: 1 }],
    ["a nullable field keeps its null", { amount: 1, maybe: null }, { amount: 1, maybe: null }],
    ["a required null stays (the validator refuses it)", { amount: null }, { amount: null }],
    [
      "nested optional null",
      { amount: 1, address: { city: "Oslo", zip: null } },
      { amount: 1, address: { city: "Oslo" } },
    ],
    [
      "in array items",
      { amount: 1, items: [{ sku: "a", gift: null }] },
      { amount: 1, items: [{ sku: "a" }] },
    ],
    [
      "through a $ref",
      { amount: 1, ref: { id: "r", label: null } },
      { amount: 1, ref: { id: "r" } },
    ],
    [
      "an undeclared top-level key",
      { amount: 1, refund_to_account: "x" },
      "refused /refund_to_account",
    ],
    [
      "an undeclared nested key",
      { amount: 1, address: { city: "Oslo", country: "NO" } },
      "refused /address/country",
    ],
    [
      "an undeclared key in an array item",
      { amount: 1, items: [{ sku: "a", price: 0 }] },
      "refused /items/0/price",
    ],
    [
      "an undeclared key behind a $ref",
      { amount: 1, ref: { id: "r", admin: true } },
      "refused /ref/admin",
    ],
    [
      "a union branch that declares the keys",
      { amount: 1, choice: { iban: "NO93" } },
      { amount: 1, choice: { iban: "NO93" } },
    ],
    [
      "no union branch declares the key",
      { amount: 1, choice: { bitcoin: "x" } },
      "refused /choice/bitcoin",
    ],
  ] as const)("%s", (_what, value, expected) => {
    expect(ok(value)).toEqual(expected);
  });

  it("outside strict mode a null is not rewritten (the export never offered it)", () => {
    expect(ok({ amount: 1, note: null }, false)).toEqual({ amount: 1, note: null });
  });

  it("the export makes exactly these optional fields nullable, objects as anyOf", () => {
    const exported = exportSchema(schema, []) as any;
    expect(exported.required).toEqual(Object.keys(exported.properties));
    expect(exported.properties.note).toEqual({ type: ["string", "null"] });
    expect(exported.properties.address.anyOf[1]).toEqual({ type: "null" });
    expect(exported.properties.address.anyOf[0].properties.zip).toEqual({
      type: ["string", "null"],
    });
    expect(exported.properties.items.anyOf[0].type).toBe("array");
  });
});

describe("refProblem", () => {
  it.each([
    [{ properties: { a: { $ref: "#/$defs/x" } }, $defs: { x: { type: "string" } } }, null],
    [{ $defs: { t: { properties: { c: { $ref: "#/$defs/t" } } } }, $ref: "#/$defs/t" }, null],
    [
      { $defs: { t: { items: { $ref: "#/$defs/t" } } }, properties: { a: { $ref: "#/$defs/t" } } },
      null,
    ],
    [
      { $defs: { a: { $ref: "#/$defs/a" } }, properties: { x: { $ref: "#/$defs/a" } } },
      "never ends",
    ],
    [
      { $defs: { a: { oneOf: [{ $ref: "#/$defs/b" }] }, b: { not: { $ref: "#/$defs/a" } } } },
      "never ends",
    ],
    [{ $ref: "#" }, "never ends"],
    [{ properties: { a: { $ref: "#/$defs/missing" } } }, "does not resolve"],
    [{ properties: { a: { $ref: "other.json#/x" } } }, "does not resolve"],
  ])("%j → %s", (schema, expected) => {
    const problem = refProblem(schema);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toContain(expected);
  });
});
