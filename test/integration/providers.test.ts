// Round trips in each provider's own format through the public API: the model's response goes in
// as-is, the results come out ready to append, one per call, in call order, with errors flagged;
// tool definitions come out with bound arguments removed; model usage counts towards max_cost.
import { describe, expect, it } from "vitest";
import { api, manifest, upstream } from "../support/api.ts";

async function runWithTools(
  context: Record<string, unknown> = {},
  budgets: Record<string, number> = {},
) {
  const up = upstream();
  const charge = manifest({
    url: up.url,
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
        customer_id: { type: "string" },
      },
      required: ["amount", "currency", "customer_id"],
    },
    bind: { customer_id: "context.customer_id" },
  });
  expect((await api("PUT", `/v1/tools/${charge.name}`, charge)).status).toBe(201);
  const run = await api("POST", "/v1/runs?format=openai-chat", {
    user: { id: "u1" },
    tools: [charge.name],
    context: { customer_id: "cus_1", ...context },
    budgets,
  });
  expect(run.status).toBe(201);
  return { up, runId: run.body.run_id as string, name: charge.name as string, created: run.body };
}

const post = (runId: string, format: string, body: unknown) =>
  api("POST", `/v1/runs/${runId}/turns?format=${format}`, body, { Prefer: "wait=5" });

describe("provider formats", () => {
  it("Anthropic: tool_use blocks in, a user message of tool_result blocks out, in order, is_error on refusals", async () => {
    const { up, runId, name } = await runWithTools();
    const message = {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      stop_reason: "tool_use",
      content: [
        { type: "text", text: "Charging now." },
        {
          type: "tool_use",
          id: "toolu_b",
          name,
          input: { amount: 0, currency: "usd" },
          caller: { type: "direct" },
        },
        {
          type: "tool_use",
          id: "toolu_a",
          name,
          input: { amount: 250, currency: "usd" },
          caller: { type: "direct" },
        },
      ],
      usage: { input_tokens: 10, output_tokens: 5 },
    };
    const res = await post(runId, "anthropic", message);
    expect(res.status).toBe(200);
    expect(res.body.results.role).toBe("user");
    const blocks = res.body.results.content;
    expect(blocks.map((b: any) => [b.type, b.tool_use_id, b.is_error])).toEqual([
      ["tool_result", "toolu_b", true],
      ["tool_result", "toolu_a", false],
    ]);
    expect(JSON.parse(blocks[0].content)).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
    expect(JSON.parse(blocks[1].content)).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);
    // Re-posting the same response is the same turn.
    expect((await post(runId, "anthropic", message)).body).toEqual(res.body);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("OpenAI Responses: function_call items in, function_call_output items out", async () => {
    const { up, runId, name } = await runWithTools();
    const response = {
      id: "resp_1",
      object: "response",
      model: "gpt-5",
      output: [
        { type: "reasoning", id: "rs_1", summary: [] },
        {
          type: "function_call",
          id: "fc_1",
          call_id: "call_1",
          name,
          arguments: '{"amount":100,"currency":"eur"}',
          status: "completed",
        },
        {
          type: "function_call",
          id: "fc_2",
          call_id: "call_2",
          name: "not_offered",
          arguments: "{}",
          status: "completed",
        },
      ],
      usage: { input_tokens: 20, output_tokens: 4, total_tokens: 24 },
    };
    const res = await post(runId, "openai-responses", response);
    expect(res.status).toBe(200);
    expect(
      res.body.results.map((item: any) => [
        item.type,
        item.call_id,
        JSON.parse(item.output).status,
      ]),
    ).toEqual([
      ["function_call_output", "call_1", "succeeded"],
      ["function_call_output", "call_2", "rejected"],
    ]);
    expect((await up.state()).requests[0]!.body).toEqual({
      amount: 100,
      currency: "eur",
      customer_id: "cus_1",
    });
  });

  it("OpenAI Chat: tool_calls in, role: tool messages out; polling the turn keeps the format", async () => {
    const { up, runId, name } = await runWithTools();
    await up.script({ kind: "status", status: 429 });
    const completion = {
      id: "chatcmpl_1",
      object: "chat.completion",
      created: 1,
      model: "gpt-4.1",
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          logprobs: null,
          message: {
            role: "assistant",
            content: null,
            refusal: null,
            tool_calls: [
              {
                id: "call_x",
                type: "function",
                function: { name, arguments: '{"amount":7,"currency":"usd"}' },
              },
            ],
          },
        },
      ],
    };
    const res = await post(runId, "openai-chat", completion);
    expect(res.status).toBe(202);
    expect(res.body.results).toEqual([
      { role: "tool", tool_call_id: "call_x", content: expect.any(String) },
    ]);
    expect(JSON.parse(res.body.results[0].content)).toMatchObject({
      status: "pending",
      code: "retry_scheduled",
    });
    expect(res.body.poll_url).toContain("format=openai-chat");
    const polled = await api(
      "GET",
      new URL(res.body.poll_url).pathname + new URL(res.body.poll_url).search,
    );
    expect(polled.body.results[0]).toMatchObject({ role: "tool", tool_call_id: "call_x" });
  });

  it("native: one envelope per call in call order", async () => {
    const { runId, name } = await runWithTools();
    const res = await post(runId, "native", {
      calls: [
        { id: "n2", name, arguments: { amount: 2, currency: "usd" } },
        { id: "n1", name: "nope", arguments: {} },
      ],
    });
    expect(res.body.results.map((e: any) => e.status)).toEqual(["succeeded", "rejected"]);
  });

  it("rejects a provider body that is not that provider's shape, and unknown formats", async () => {
    const { up, runId } = await runWithTools();
    expect((await post(runId, "anthropic", { choices: [] })).body.code).toBe("invalid_request");
    expect(
      (await post(runId, "openai-chat", { content: [{ type: "text", text: "no calls" }] })).body
        .code,
    ).toBe("invalid_request");
    expect((await post(runId, "gemini", { calls: [] })).status).toBe(400);
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("exports tool definitions per format with bound arguments removed, valid for strict mode", async () => {
    const { runId, name, created } = await runWithTools();
    expect(created.tools[0]).toMatchObject({ type: "function", function: { name, strict: true } });
    for (const format of ["anthropic", "openai-responses", "openai-chat", "mcp", "native"]) {
      const res = await api("GET", `/v1/runs/${runId}/tools?format=${format}`);
      expect(res.status).toBe(200);
      const text = JSON.stringify(res.body.tools);
      expect(text).toContain(name);
      expect(text).not.toContain("customer_id");
    }
    const anthropicTools = (await api("GET", `/v1/runs/${runId}/tools?format=anthropic`)).body
      .tools;
    expect(anthropicTools[0].input_schema).toMatchObject({
      type: "object",
      additionalProperties: false,
      required: ["amount", "currency"],
    });
    expect((await api("GET", `/v1/runs/${runId}/tools?format=xml`)).status).toBe(400);
  });

  it("model usage in a provider response counts towards max_cost", async () => {
    // The test deployment prices every model at 1 cost unit per 1,000 input and 2 per 1,000 output tokens.
    const { up, runId, name } = await runWithTools({}, { max_cost: 3 });
    const message = (id: string, amount: number, input: number) => ({
      role: "assistant",
      model: "claude-test",
      content: [{ type: "tool_use", id, name, input: { amount, currency: "usd" } }],
      usage: { input_tokens: input, output_tokens: 0 },
    });
    expect(
      JSON.parse(
        (await post(runId, "anthropic", message("t1", 1, 1000))).body.results.content[0].content,
      ).status,
    ).toBe("succeeded");
    expect((await api("GET", `/v1/runs/${runId}`)).body.usage.cost).toBe(2); // 1 model + 1 tool
    const over = JSON.parse(
      (await post(runId, "anthropic", message("t2", 2, 1000))).body.results.content[0].content,
    );
    expect(over).toMatchObject({ status: "budget_exhausted", code: "max_cost" });
    expect((await up.state()).effects).toHaveLength(1);
  });
});
