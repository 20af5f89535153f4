// What the export moves out of a schema for a provider's strict mode is still enforced: the model
// reads "at least 2 items" in words, and a call that breaks it is refused before anything is sent.
// Through the public API: register a tool, read its Anthropic export, post the calls an Anthropic
// model could make with that export (which no longer forbids them), count what the upstream got.
import { describe, expect, it } from "vitest";
import { api, manifest, upstream } from "../support/api.ts";

const schema = {
  type: "object",
  additionalProperties: false,
  properties: {
    order_id: { type: "string", pattern: "^ord_[a-z0-9]+$" },
    amount: { type: "integer", minimum: 1, maximum: 500 },
    lines: { type: "array", minItems: 2, items: { type: "string" } },
    ship_at: { type: ["string", "null"], format: "date-time" },
  },
  required: ["order_id", "amount", "lines"],
};

async function setUp() {
  const up = upstream();
  const tool = manifest({ url: up.url, input_schema: schema });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs?format=anthropic", {
    user: { id: "u1" },
    tools: [tool.name],
  });
  expect(run.status).toBe(201);
  return { up, name: tool.name as string, runId: run.body.run_id as string };
}

describe("constraints the export states in words are still enforced", () => {
  it("the Anthropic export drops pattern, minimum/maximum, minItems 2 and a nullable format, states them, and the gate refuses calls that break them", async () => {
    const { up, name, runId } = await setUp();
    const exported = (await api("GET", `/v1/runs/${runId}/tools?format=anthropic`)).body.tools[0];
    expect(exported.strict).toBe(true);
    const props = exported.input_schema.properties;
    const text = JSON.stringify(exported.input_schema);
    for (const keyword of ['"pattern"', '"minimum"', '"maximum"', '"minItems"', '"format"'])
      expect(text).not.toContain(keyword);
    expect(props.order_id.description).toBe("Constraints: matches the pattern `^ord_[a-z0-9]+$`.");
    expect(props.amount.description).toBe("Constraints: at least 1; at most 500.");
    expect(props.lines.description).toBe("Constraints: at least 2 items.");
    expect(props.ship_at.description).toBe("Constraints: in date-time format.");

    const ok = { order_id: "ord_1", amount: 5, lines: ["a", "b"], ship_at: null };
    const broken: Array<[string, Record<string, unknown>]> = [
      ["pattern", { ...ok, order_id: "ORDER-1" }],
      ["minimum", { ...ok, amount: 0 }],
      ["maximum", { ...ok, amount: 501 }],
      ["minItems", { ...ok, lines: ["a"] }],
      ["format", { ...ok, ship_at: "next tuesday" }],
    ];
    const res = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=anthropic`,
      {
        role: "assistant",
        content: [
          ...broken.map(([what, input]) => ({ type: "tool_use", id: `t_${what}`, name, input })),
          { type: "tool_use", id: "t_ok", name, input: ok },
        ],
      },
      { Prefer: "wait=5" },
    );
    expect(res.status).toBe(200);
    const results = res.body.results.content.map((block: any) => ({
      id: block.tool_use_id,
      is_error: block.is_error,
      ...JSON.parse(block.content),
    }));
    for (const [what] of broken)
      expect(
        results.find((r: any) => r.id === `t_${what}`),
        what,
      ).toMatchObject({
        is_error: true,
        status: "rejected",
        code: "invalid_arguments",
      });
    expect(results.find((r: any) => r.id === "t_ok")).toMatchObject({ status: "succeeded" });
    // Only the conforming call reached the upstream (ship_at is nullable as declared: null is sent).
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests.map((r) => r.body)).toEqual([ok]);
  });

  it("the OpenAI export keeps what OpenAI's strict mode enforces itself", async () => {
    const { runId } = await setUp();
    const [tool] = (await api("GET", `/v1/runs/${runId}/tools?format=openai-responses`)).body.tools;
    expect(tool.strict).toBe(true);
    expect(tool.parameters.properties).toMatchObject({
      order_id: { type: "string", pattern: "^ord_[a-z0-9]+$" },
      amount: { type: "integer", minimum: 1, maximum: 500 },
      lines: { type: "array", minItems: 2 },
      ship_at: { type: ["string", "null"], format: "date-time" },
    });
  });
});
