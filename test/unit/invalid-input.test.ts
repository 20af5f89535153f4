// describeInvalid: zod's refusals name the refused value and the valid ones, and a union's bare
// "Invalid input" is opened into what its branches asked for.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { describeInvalid } from "../../src/domain/invalid-input.ts";

const detail = (schema: z.ZodType, value: unknown) => {
  const parsed = schema.safeParse(value, { reportInput: true });
  if (parsed.success) throw new Error("expected a refusal");
  return describeInvalid(parsed.error);
};

const Kind = z.enum(["standard", "slack"]);
const Mode = z.discriminatedUnion("mode", [
  z.strictObject({ mode: z.literal("header") }),
  z.strictObject({ mode: z.literal("none") }),
]);
const Events = z.array(z.union([z.literal("*"), z.enum(["a.b", "c.d"])]));

describe("describeInvalid", () => {
  it.each<[string, z.ZodType, unknown, string]>([
    [
      "an enum names the value and the choices",
      z.object({ format: Kind }),
      { format: "discord" },
      '✖ Invalid option "discord": expected one of "standard", "slack"\n  → at format',
    ],
    [
      "a union of literals and an enum is one set of choices, at the element's place",
      z.object({ events: Events }),
      { events: ["a.b", "a.x"] },
      '✖ Invalid option "a.x": expected one of "*", "a.b", "c.d"\n  → at events[1]',
    ],
    [
      "a discriminator names the value it was given",
      z.object({ idempotency: Mode }),
      { idempotency: { mode: "headr" } },
      '✖ Invalid option "headr": expected one of "header", "none"\n  → at idempotency.mode',
    ],
    [
      "a union whose every branch refuses the type says which types and what came",
      z.object({ v: z.union([z.string(), z.array(z.string())]) }),
      { v: 3 },
      "✖ Invalid input: expected string or array, received number\n  → at v",
    ],
    [
      "a missing union says so",
      z.object({ v: z.union([z.string(), z.array(z.string())]) }),
      {},
      "✖ Invalid input: expected string or array, received nothing\n  → at v",
    ],
    [
      "one branch of the right type: its own complaint",
      z.object({ v: z.union([z.string(), z.array(z.number())]) }),
      { v: ["x"] },
      "✖ Invalid input: expected number, received string\n  → at v[0]",
    ],
    [
      "an object is not echoed",
      z.object({ format: Kind }),
      { format: { secret: "s3cr3t" } },
      '✖ Invalid option: expected one of "standard", "slack"\n  → at format',
    ],
    [
      "a long value is cut",
      z.object({ format: Kind }),
      { format: "x".repeat(200) },
      `✖ Invalid option "${"x".repeat(80)}…": expected one of "standard", "slack"\n  → at format`,
    ],
    [
      "other issues pass as zod words them",
      z.object({ n: z.number().min(2) }),
      { n: 1 },
      "✖ Too small: expected number to be >=2\n  → at n",
    ],
  ])("%s", (_, schema, value, expected) => {
    expect(detail(schema, value)).toBe(expected);
  });

  it("branches of different shapes are each stated", () => {
    const Either = z.union([z.object({ a: z.number() }), z.object({ b: z.string() })]);
    expect(detail(Either, { a: "1", b: 2 })).toBe(
      "✖ Invalid input: either Invalid input: expected number, received string (at a), or Invalid input: expected string, received number (at b)",
    );
  });
});
