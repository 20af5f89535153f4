// Every export format, fed through the official SDKs' own strict transforms, comes out unchanged:
// what toolgate exports is exactly what that provider's strict mode accepts, so an agent can pass
// it on as it is. The oracles are the installed devDependencies, not copies of their rules:
// - Anthropic: `transformJSONSchema` (@anthropic-ai/sdk/lib/transform-json-schema), the transform
//   the SDK applies to strict tools;
// - OpenAI: `toStrictJsonSchema` (openai/lib/transform), and the Agents SDK's `tool({ strict })`,
//   which is how toolgate's own bridge (src/client/openai-agents.ts) offers the Responses export;
// - the AI SDK: `jsonSchema()` + `tool()` through @ai-sdk/openai, as toolgate's bridge
//   (src/client/ai-sdk.ts) offers the native export: the request the provider would receive.
//   (@ai-sdk/anthropic is not installed, so the AI SDK's Anthropic path is not exercised here;
//   the native export is also checked against Anthropic's transform directly.)
import { transformJSONSchema } from "@anthropic-ai/sdk/lib/transform-json-schema";
import { createOpenAI } from "@ai-sdk/openai";
import { tool as agentsTool } from "@openai/agents";
import { generateText, jsonSchema, tool as aiTool } from "ai";
import { toStrictJsonSchema } from "openai/lib/transform";
import { describe, expect, it } from "vitest";
import { exportTools } from "../../src/providers/index.ts";
import { exportSchema, toStrictSchema } from "../../src/providers/strict-schema.ts";
import type { ToolDefinition } from "../../src/tools/spec.ts";

type Schema = Record<string, unknown>;

/** Schemas that hold every keyword strict modes disagree on. */
const AWKWARD: Record<string, Schema> = {
  lookup_order: {
    type: "object",
    properties: {
      order_id: { type: "string", pattern: "^ord_[a-z0-9]+$", minLength: 5, maxLength: 40 },
      include: {
        type: "array",
        items: { type: "string", enum: ["lines", "refunds", "customer"] },
        uniqueItems: true,
      },
    },
    required: ["order_id"],
    additionalProperties: false,
  },
  refund: {
    type: "object",
    description: "A refund of part or all of an order.",
    properties: {
      order_id: { type: "string", description: "The order.", pattern: "^ord_" },
      amount: { type: "integer", minimum: 1, maximum: 100_000, description: "In cents." },
      fee: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 10, multipleOf: 0.01 },
      currency: { type: "string", enum: ["usd", "eur"] },
      reason: { type: "string", enum: ["duplicate", "fraud", "requested_by_customer"] },
      note: { type: "string", default: "none", maxLength: 200 },
      customer_id: { type: "string" },
    },
    required: ["order_id", "amount", "currency", "customer_id"],
  },
  batch_ship: {
    type: "object",
    properties: {
      lines: {
        type: "array",
        minItems: 2,
        maxItems: 10,
        items: {
          type: "object",
          properties: {
            sku: { type: "string", pattern: "^[A-Z]{3}-\\d+$" },
            quantity: { type: "integer", minimum: 1 },
          },
          required: ["sku", "quantity"],
        },
      },
      gift: { type: "array", minItems: 1, items: { type: "string" } },
      labels: { type: "array", minItems: 3, items: { type: "string" } },
    },
    required: ["lines"],
  },
  schedule: {
    type: "object",
    properties: {
      at: { type: "string", format: "date-time", description: "When to send." },
      until: { type: ["string", "null"], format: "date-time" },
      on: { type: "string", format: "date" },
      callback: { type: "string", format: "uri" },
      every: { type: "string", format: "duration" },
      zone: { type: "string", format: "iana-time-zone" },
    },
    required: ["on"],
  },
  pay: {
    type: "object",
    title: "Payment",
    properties: {
      method: {
        oneOf: [
          {
            type: "object",
            properties: { kind: { const: "card" }, last4: { type: "string", pattern: "^\\d{4}$" } },
            required: ["kind", "last4"],
            additionalProperties: false,
          },
          {
            type: "object",
            properties: { kind: { const: "iban" }, iban: { type: "string", minLength: 15 } },
            required: ["kind", "iban"],
            additionalProperties: false,
          },
        ],
      },
      amount: {
        anyOf: [
          { type: "integer", minimum: 0 },
          { type: "string", pattern: "^\\d+$" },
        ],
      },
      memo: { anyOf: [{ type: "string" }, { type: "null" }], default: null },
      priority: { type: "integer", enum: [1, 2, 3] },
      channel: { const: "api" },
      tag: { type: "string", oneOf: [{ const: "a" }, { const: "b" }] },
    },
    required: ["method", "amount", "priority"],
  },
  ship_to: {
    type: "object",
    properties: {
      address: {
        type: "object",
        description: "Where to.",
        properties: {
          line1: { type: "string", minLength: 1 },
          country: { type: "string", pattern: "^[A-Z]{2}$", examples: ["NO", "DE"] },
          geo: {
            type: "object",
            properties: {
              lat: { type: "number", minimum: -90, maximum: 90 },
              lon: { type: "number", minimum: -180, maximum: 180 },
            },
            required: ["lat"],
            additionalProperties: false,
          },
        },
        required: ["line1", "country"],
        additionalProperties: false,
      },
      contact: { $ref: "#/definitions/contact" },
      backup: { $ref: "#/$defs/phone", description: "A second number." },
      meta: { type: "object", properties: { source: { type: "string" } }, minProperties: 1 },
    },
    required: ["address"],
    definitions: {
      contact: {
        type: "object",
        properties: {
          email: { type: "string", format: "email" },
          phone: { $ref: "#/$defs/phone" },
        },
        required: ["email"],
      },
    },
    $defs: { phone: { type: "string", pattern: "^\\+[0-9]{6,15}$" } },
  },
};

const definitions: ToolDefinition[] = Object.entries(AWKWARD).map(([name, schema]) => ({
  name,
  description: `The ${name} tool.`,
  inputJsonSchema: schema,
  bound: name === "refund" ? ["customer_id"] : [],
  risk: "write",
  builtIn: false,
}));

const clone = <T>(value: T): T => structuredClone(value);

describe("every exported tool is accepted as it is by the provider's own strict transform", () => {
  it("is exported strict (so the checks below are not about a non-strict fallback)", () => {
    for (const format of ["anthropic", "openai-responses", "openai-chat"] as const)
      for (const tool of exportTools(definitions, format) as any[])
        expect(tool.strict ?? tool.function.strict, `${format} ${JSON.stringify(tool)}`).toBe(true);
  });

  it("Anthropic: transformJSONSchema leaves every input_schema unchanged", () => {
    for (const tool of exportTools(definitions, "anthropic") as Array<{
      name: string;
      input_schema: Schema;
    }>)
      expect(transformJSONSchema(clone(tool.input_schema)), tool.name).toEqual(tool.input_schema);
  });

  it.each(["openai-responses", "openai-chat"] as const)(
    "OpenAI (%s): toStrictJsonSchema leaves every schema unchanged",
    (format) => {
      for (const tool of exportTools(definitions, format) as any[]) {
        const parameters = tool.parameters ?? tool.function.parameters;
        expect(toStrictJsonSchema(clone(parameters)), tool.name ?? tool.function.name).toEqual(
          parameters,
        );
      }
    },
  );

  it("the Agents SDK's tool({ strict: true }) keeps the Responses export's parameters as they are", () => {
    for (const exported of exportTools(definitions, "openai-responses") as any[]) {
      const made = agentsTool({
        name: exported.name,
        description: exported.description,
        parameters: clone(exported.parameters),
        strict: true,
        execute: async () => "",
      } as never) as unknown as { parameters: Schema; strict: boolean };
      expect(made.strict).toBe(true);
      expect(made.parameters, exported.name).toEqual(exported.parameters);
    }
  });

  it.each(["native", "mcp"] as const)(
    "%s (offered to any model): both providers' strict transforms leave it unchanged",
    (format) => {
      for (const tool of exportTools(definitions, format) as any[]) {
        const schema = tool.input_schema ?? tool.inputSchema;
        expect(transformJSONSchema(clone(schema)), `${tool.name} anthropic`).toEqual(schema);
        expect(toStrictJsonSchema(clone(schema)), `${tool.name} openai`).toEqual(schema);
      }
    },
  );

  it("the AI SDK sends the native export's schemas to the provider as they are", async () => {
    const exported = exportTools(definitions, "native") as Array<{
      name: string;
      description: string;
      input_schema: Schema;
    }>;
    let sent: any = null;
    const openai = createOpenAI({
      apiKey: "test",
      fetch: async (_url, init) => {
        sent = JSON.parse(String(init?.body));
        return new Response(JSON.stringify({ error: { message: "stop here" } }), { status: 400 });
      },
    });
    const tools = Object.fromEntries(
      exported.map((d) => [
        d.name,
        aiTool({ description: d.description, inputSchema: jsonSchema(clone(d.input_schema)) }),
      ]),
    );
    await generateText({ model: openai("gpt-test"), tools, prompt: "hi", maxRetries: 0 }).catch(
      () => null,
    );
    expect(sent).not.toBeNull();
    const byName = Object.fromEntries(sent.tools.map((t: any) => [t.name, t.parameters]));
    for (const d of exported) expect(byName[d.name], d.name).toEqual(d.input_schema);
  });
});

describe("what each provider's export keeps, and what it states in words", () => {
  // [what, property schema, required?, anthropic, openai, portable (native, MCP)]
  const rows: Array<[string, Schema, boolean, Schema, Schema, Schema]> = [
    [
      "a pattern",
      { type: "string", pattern: "^ord_" },
      true,
      { type: "string", description: "Constraints: matches the pattern `^ord_`." },
      { type: "string", pattern: "^ord_" },
      { type: "string", description: "Constraints: matches the pattern `^ord_`." },
    ],
    [
      "an integer minimum and maximum",
      { type: "integer", minimum: 1, maximum: 500, description: "Cents." },
      true,
      { type: "integer", description: "Cents.\n\nConstraints: at least 1; at most 500." },
      { type: "integer", minimum: 1, maximum: 500, description: "Cents." },
      { type: "integer", description: "Cents.\n\nConstraints: at least 1; at most 500." },
    ],
    [
      "exclusive bounds and multipleOf",
      { type: "number", exclusiveMinimum: 0, multipleOf: 0.5 },
      true,
      { type: "number", description: "Constraints: greater than 0; a multiple of 0.5." },
      { type: "number", exclusiveMinimum: 0, multipleOf: 0.5 },
      { type: "number", description: "Constraints: greater than 0; a multiple of 0.5." },
    ],
    [
      "minItems 2 and maxItems",
      { type: "array", items: { type: "string" }, minItems: 2, maxItems: 5 },
      true,
      {
        type: "array",
        items: { type: "string" },
        description: "Constraints: at least 2 items; at most 5 items.",
      },
      { type: "array", items: { type: "string" }, minItems: 2, maxItems: 5 },
      {
        type: "array",
        items: { type: "string" },
        description: "Constraints: at least 2 items; at most 5 items.",
      },
    ],
    [
      "minItems 1 (Anthropic's limit)",
      { type: "array", items: { type: "string" }, minItems: 1 },
      true,
      { type: "array", items: { type: "string" }, minItems: 1 },
      { type: "array", items: { type: "string" }, minItems: 1 },
      { type: "array", items: { type: "string" }, minItems: 1 },
    ],
    [
      "an optional date-time",
      { type: "string", format: "date-time" },
      false,
      { anyOf: [{ type: "string", format: "date-time" }, { type: "null" }] },
      { type: ["string", "null"], format: "date-time" },
      { anyOf: [{ type: "string", format: "date-time" }, { type: "null" }] },
    ],
    [
      "a nullable date-time as declared",
      { type: ["string", "null"], format: "date-time" },
      true,
      { type: ["string", "null"], description: "Constraints: in date-time format." },
      { type: ["string", "null"], format: "date-time" },
      { type: ["string", "null"], description: "Constraints: in date-time format." },
    ],
    [
      "a uri (Anthropic only)",
      { type: "string", format: "uri" },
      true,
      { type: "string", format: "uri" },
      { type: "string", description: "Constraints: in uri format." },
      { type: "string", description: "Constraints: in uri format." },
    ],
    [
      "string lengths (neither)",
      { type: "string", minLength: 1, maxLength: 1 },
      true,
      { type: "string", description: "Constraints: at least 1 character; at most 1 character." },
      { type: "string", description: "Constraints: at least 1 character; at most 1 character." },
      { type: "string", description: "Constraints: at least 1 character; at most 1 character." },
    ],
    [
      "an enum (Anthropic drops the type beside it)",
      { type: "string", enum: ["usd", "eur"] },
      true,
      { enum: ["usd", "eur"] },
      { type: "string", enum: ["usd", "eur"] },
      { enum: ["usd", "eur"] },
    ],
    [
      "an optional enum",
      { type: "string", enum: ["usd", "eur"] },
      false,
      { enum: ["usd", "eur", null] },
      { type: ["string", "null"], enum: ["usd", "eur", null] },
      { enum: ["usd", "eur", null] },
    ],
    [
      "a default and examples",
      { type: "string", default: "none", examples: ["a", "b"] },
      true,
      { type: "string", description: 'Default: "none". Examples: "a", "b".' },
      { type: "string", description: 'Default: "none". Examples: "a", "b".' },
      { type: "string", description: 'Default: "none". Examples: "a", "b".' },
    ],
    [
      "a type beside a union moves into its branches",
      { type: "string", oneOf: [{ const: "a" }, { const: "b" }] },
      true,
      { anyOf: [{ const: "a" }, { const: "b" }] },
      {
        anyOf: [
          { type: "string", const: "a" },
          { type: "string", const: "b" },
        ],
      },
      { anyOf: [{ const: "a" }, { const: "b" }] },
    ],
  ];

  it.each(rows)("%s", (_what, property, required, anthropic, openai, portable) => {
    const schema = {
      type: "object",
      properties: { x: property },
      required: required ? ["x"] : [],
      additionalProperties: false,
    };
    const x = (profile: "anthropic" | "openai" | "portable") =>
      (exportSchema(schema, [], profile).properties as Schema).x;
    expect(x("anthropic")).toEqual(anthropic);
    expect(x("openai")).toEqual(openai);
    expect(x("portable")).toEqual(portable);
  });

  it("draft-7 definitions export as $defs (Anthropic's transform keeps only $defs)", () => {
    const schema = {
      type: "object",
      properties: { to: { $ref: "#/definitions/addr" } },
      required: ["to"],
      definitions: { addr: { type: "object", properties: { city: { type: "string" } } } },
    };
    const exported = exportSchema(schema, [], "anthropic");
    expect(exported.definitions).toBeUndefined();
    expect((exported.properties as any).to).toEqual({ $ref: "#/$defs/addr" });
    expect((exported.$defs as any).addr.properties.city).toEqual({ type: ["string", "null"] });
  });

  it("a union with object constraints beside it cannot be strict (reported, exported non-strict)", () => {
    const schema = {
      type: "object",
      properties: {
        x: {
          type: "object",
          properties: { a: { type: "string" } },
          anyOf: [{ required: ["a"] }, { required: ["b"] }],
        },
      },
    };
    const result = toStrictSchema(schema, [], "openai");
    expect(result.strict).toBe(false);
    expect(result.problems.join()).toContain("a union with properties");
  });
});
