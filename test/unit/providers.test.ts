// Provider adapters: fixtures typed against the official SDKs (a fixture that drifts from the real
// shape fails typecheck), parse order, pairing of results to calls, error flags, tolerance of
// unknown fields, usage extraction, and every refusal of a malformed turn.
import type { Message } from "@anthropic-ai/sdk/resources/messages";
import type { ChatCompletion } from "openai/resources/chat/completions";
import type { Response, ResponseFunctionToolCall } from "openai/resources/responses/responses";
import { Usage as AgentsUsage, type ModelResponse } from "@openai/agents";
import type { LanguageModelCallEndEvent, LanguageModelUsage, StepResult, ToolSet } from "ai";
import { describe, expect, it } from "vitest";
import type { Envelope } from "../../src/domain/envelope.ts";
import { adapters, exportTools } from "../../src/providers/index.ts";
import { exportSchema } from "../../src/providers/strict-schema.ts";

const ok = (id: string): Envelope => ({ status: "succeeded", operation_id: id, result: { id } });
const refused = (id: string): Envelope => ({
  status: "rejected",
  operation_id: id,
  code: "invalid_arguments",
  message: "fix",
  allowed_next_actions: ["fix_arguments"],
});

const anthropicMessage = {
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  container: null,
  diagnostics: null,
  stop_details: null,
  stop_reason: "tool_use",
  stop_sequence: null,
  content: [
    { type: "text", text: "Let me do that.", citations: null },
    {
      type: "tool_use",
      id: "toolu_1",
      name: "charge_card",
      input: { amount: 5 },
      caller: { type: "direct" },
    },
    {
      type: "tool_use",
      id: "toolu_2",
      name: "lookup_order",
      input: { order_id: "o1" },
      caller: { type: "direct" },
    },
  ],
  usage: {
    input_tokens: 100,
    output_tokens: 20,
    cache_creation_input_tokens: 10,
    cache_read_input_tokens: 5,
    cache_creation: null,
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: null,
    speed: null,
  },
} satisfies Message;

const responseCall = (callId: string, name: string, args: string): ResponseFunctionToolCall => ({
  type: "function_call",
  call_id: callId,
  name,
  arguments: args,
  id: `fc_${callId}`,
  status: "completed",
});
const responsesOutput = {
  model: "gpt-5",
  output: [
    { type: "reasoning", id: "rs_1", summary: [] },
    responseCall("call_a", "charge_card", '{"amount":5}'),
    responseCall("call_b", "lookup_order", '{"order_id":"o1"}'),
  ],
  usage: {
    input_tokens: 50,
    output_tokens: 7,
    total_tokens: 57,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  },
} satisfies Pick<Response, "model" | "output" | "usage">;

const chatCompletion = {
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
            function: { name: "charge_card", arguments: '{"amount":5}' },
          },
          {
            id: "call_y",
            type: "function",
            function: { name: "lookup_order", arguments: '{"order_id":"o1"}' },
          },
        ],
      },
    },
  ],
  usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 },
} satisfies ChatCompletion;

describe("anthropic", () => {
  it("parses tool_use blocks in order, tolerating caller and other blocks, with usage (cache tokens counted as input)", () => {
    const parsed = adapters.anthropic.parse(anthropicMessage);
    expect(parsed).toEqual({
      ok: true,
      value: {
        calls: [
          { id: "toolu_1", name: "charge_card", arguments: { amount: 5 } },
          { id: "toolu_2", name: "lookup_order", arguments: { order_id: "o1" } },
        ],
        usage: { model: "claude-sonnet-4-5", input_tokens: 115, output_tokens: 20 },
      },
    });
    // The assistant message alone and the bare content array parse to the same calls.
    const message = adapters.anthropic.parse({
      role: "assistant",
      content: anthropicMessage.content,
    });
    const content = adapters.anthropic.parse([
      ...anthropicMessage.content,
      { type: "server_tool_use", id: "srv_1", name: "web_search", input: {} },
    ]);
    expect(message.ok && message.value.calls).toEqual(parsed.ok && parsed.value.calls);
    expect(content.ok && content.value.calls.map((c) => c.id)).toEqual(["toolu_1", "toolu_2"]);
  });

  it("formats the next user message: tool_result blocks only, in call order, is_error on failures", () => {
    const parsed = adapters.anthropic.parse(anthropicMessage);
    if (!parsed.ok) throw new Error("parse failed");
    const [a, b] = parsed.value.calls as [any, any];
    const formatted = adapters.anthropic.format([
      { call: a, envelope: ok("op_1") },
      { call: b, envelope: refused("op_2") },
    ]) as any;
    expect(formatted.role).toBe("user");
    expect(
      formatted.content.map((block: any) => [block.type, block.tool_use_id, block.is_error]),
    ).toEqual([
      ["tool_result", "toolu_1", false],
      ["tool_result", "toolu_2", true],
    ]);
    expect(JSON.parse(formatted.content[1].content)).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
  });
});

describe("openai responses", () => {
  it("parses function_call items (arguments stay the JSON string), skips other items, reads usage", () => {
    const parsed = adapters["openai-responses"].parse(responsesOutput);
    expect(parsed).toEqual({
      ok: true,
      value: {
        calls: [
          { id: "call_a", name: "charge_card", arguments: '{"amount":5}' },
          { id: "call_b", name: "lookup_order", arguments: '{"order_id":"o1"}' },
        ],
        usage: { model: "gpt-5", input_tokens: 50, output_tokens: 7 },
      },
    });
    const bare = adapters["openai-responses"].parse(responsesOutput.output);
    expect(bare.ok && bare.value.usage).toBeNull();
  });

  it("formats function_call_output items paired by call_id", () => {
    const parsed = adapters["openai-responses"].parse(responsesOutput);
    if (!parsed.ok) throw new Error("parse failed");
    const items = adapters["openai-responses"].format(
      parsed.value.calls.map((call, i) => ({ call, envelope: ok(`op_${i}`) })),
    ) as any[];
    expect(
      items.map((item) => [item.type, item.call_id, JSON.parse(item.output).operation_id]),
    ).toEqual([
      ["function_call_output", "call_a", "op_0"],
      ["function_call_output", "call_b", "op_1"],
    ]);
  });
});

describe("the agent SDKs' own shapes", () => {
  // @openai/agents: result.rawResponses[i] is a ModelResponse; items spell callId, usage inputTokens.
  const agentsResponse: ModelResponse = {
    usage: new AgentsUsage({ requests: 1, inputTokens: 40, outputTokens: 6, totalTokens: 46 }),
    output: [
      { type: "function_call", callId: "call_1", name: "charge_card", arguments: '{"amount":5}' },
      {
        type: "function_call",
        callId: "call_2",
        name: "lookup_order",
        arguments: '{"order_id":"o1"}',
        status: "completed",
        providerData: { id: "fc_2" },
      },
    ],
    responseId: "resp_1",
  };
  const overTheWire = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

  it("@openai/agents ModelResponse: callId items in order, usage.inputTokens/outputTokens", () => {
    expect(adapters["openai-responses"].parse(overTheWire(agentsResponse))).toEqual({
      ok: true,
      value: {
        calls: [
          { id: "call_1", name: "charge_card", arguments: '{"amount":5}' },
          { id: "call_2", name: "lookup_order", arguments: '{"order_id":"o1"}' },
        ],
        usage: { model: null, input_tokens: 40, output_tokens: 6 },
      },
    });
    const items = adapters["openai-responses"].parse(overTheWire(agentsResponse.output));
    expect(items.ok && items.value.calls.map((c) => c.id)).toEqual(["call_1", "call_2"]);
  });

  it("refuses call_id and callId that disagree, and usage spellings that disagree", () => {
    const both = [{ type: "function_call", call_id: "a", callId: "b", name: "x", arguments: "{}" }];
    expect(adapters["openai-responses"].parse(both)).toMatchObject({
      ok: false,
      error: { detail: expect.stringContaining("output[0].callId") },
    });
    const usage = {
      output: both.slice(0, 0).concat([{ ...both[0]!, callId: "a" }]),
      usage: { input_tokens: 1, inputTokens: 2, output_tokens: 0 },
    };
    expect(adapters["openai-responses"].parse(usage)).toMatchObject({
      ok: false,
      error: { detail: expect.stringContaining("usage.inputTokens") },
    });
    const missing = { output: usage.output, usage: { inputTokens: 2 } };
    expect(adapters["openai-responses"].parse(missing)).toMatchObject({
      ok: false,
      error: { detail: expect.stringContaining("usage.output_tokens") },
    });
  });

  // Vercel AI SDK: a model call (onLanguageModelCallEnd) or a step carries tool-call parts.
  const aiUsage: LanguageModelUsage = {
    inputTokens: 70,
    inputTokenDetails: { noCacheTokens: 70, cacheReadTokens: 0, cacheWriteTokens: 0 },
    outputTokens: 11,
    outputTokenDetails: { textTokens: 11, reasoningTokens: 0 },
    totalTokens: 81,
  };
  const aiContent = [
    { type: "text", text: "Refunding." },
    {
      type: "tool-call",
      toolCallId: "tc_1",
      toolName: "refund_order",
      input: { order_id: "o1", amount: 5 },
    },
    {
      type: "tool-call",
      toolCallId: "tc_h",
      toolName: "web_search",
      input: {},
      providerExecuted: true,
    },
    { type: "tool-call", toolCallId: "tc_2", toolName: "lookup_order", input: { order_id: "o2" } },
  ] as const satisfies ReadonlyArray<
    | StepResult<ToolSet>["content"][number]
    | {
        type: "tool-call";
        toolCallId: string;
        toolName: string;
        input: unknown;
        providerExecuted: true;
      }
  >;
  const aiCall: Pick<LanguageModelCallEndEvent, "content" | "usage" | "modelId"> = {
    content: aiContent as unknown as LanguageModelCallEndEvent["content"],
    usage: aiUsage,
    modelId: "gpt-5-mini",
  };

  it("AI SDK model call: tool-call parts (provider-executed ones skipped), usage, modelId", () => {
    expect(adapters.native.parse(overTheWire(aiCall))).toEqual({
      ok: true,
      value: {
        calls: [
          { id: "tc_1", name: "refund_order", arguments: { order_id: "o1", amount: 5 } },
          { id: "tc_2", name: "lookup_order", arguments: { order_id: "o2" } },
        ],
        usage: { model: "gpt-5-mini", input_tokens: 70, output_tokens: 11 },
      },
    });
    const parts = adapters.native.parse(overTheWire(aiContent));
    expect(parts.ok && parts.value.calls.map((c) => c.id)).toEqual(["tc_1", "tc_2"]);
    expect(parts.ok && parts.value.usage).toBeNull();
  });

  it("AI SDK step: response.modelId; unreported token counts are absent, not refused", () => {
    const step = { content: aiCall.content, usage: { inputTokens: 9 }, response: { modelId: "m" } };
    const parsed = adapters.native.parse(overTheWire(step));
    expect(parsed.ok && parsed.value.usage).toEqual({
      model: "m",
      input_tokens: 9,
      output_tokens: 0,
    });
    const none = adapters.native.parse({ content: aiCall.content, usage: {} });
    expect(none.ok && none.value.usage).toBeNull();
  });

  it("native: turn_key and usage are read, not ignored", () => {
    const parsed = adapters.native.parse({
      calls: [{ id: "c1", name: "x", arguments: {} }],
      turn_key: "resp_1",
      model: "gpt-5",
      usage: { inputTokens: 3, outputTokens: 4 },
    });
    expect(parsed).toEqual({
      ok: true,
      value: {
        calls: [{ id: "c1", name: "x", arguments: {} }],
        usage: { model: "gpt-5", input_tokens: 3, output_tokens: 4 },
        turnKey: "resp_1",
      },
    });
  });

  it.each([
    [
      "a tool-call part without toolCallId",
      { content: [{ type: "tool-call", toolName: "x", input: {} }] },
    ],
    ["only provider-executed calls", { content: [aiContent[2]] }],
    ["an empty turn_key", { calls: [{ id: "c", name: "x" }], turn_key: "" }],
    ["negative tokens", { content: [aiContent[1]], usage: { inputTokens: -1 } }],
  ])("refuses %s", (_what, body) => {
    expect(adapters.native.parse(body)).toMatchObject({
      ok: false,
      error: { code: "invalid_request" },
    });
  });
});

describe("openai chat", () => {
  it("parses tool_calls from a completion or a message, with usage from the completion", () => {
    const parsed = adapters["openai-chat"].parse(chatCompletion);
    expect(parsed.ok && parsed.value).toEqual({
      calls: [
        { id: "call_x", name: "charge_card", arguments: '{"amount":5}' },
        { id: "call_y", name: "lookup_order", arguments: '{"order_id":"o1"}' },
      ],
      usage: { model: "gpt-4.1", input_tokens: 30, output_tokens: 9 },
    });
    const message = adapters["openai-chat"].parse(chatCompletion.choices[0]!.message);
    expect(message.ok && message.value.calls).toHaveLength(2);
  });

  it("formats one role: tool message per call", () => {
    const parsed = adapters["openai-chat"].parse(chatCompletion);
    if (!parsed.ok) throw new Error("parse failed");
    const messages = adapters["openai-chat"].format(
      parsed.value.calls.map((call) => ({ call, envelope: refused(call.id) })),
    ) as any[];
    expect(messages.map((m) => [m.role, m.tool_call_id])).toEqual([
      ["tool", "call_x"],
      ["tool", "call_y"],
    ]);
  });
});

describe("malformed turns", () => {
  const cases: Array<[string, keyof typeof adapters, unknown]> = [
    ["anthropic: no tool_use", "anthropic", { content: [{ type: "text", text: "hi" }] }],
    ["anthropic: tool_use without id", "anthropic", [{ type: "tool_use", name: "x", input: {} }]],
    [
      "anthropic: duplicate ids",
      "anthropic",
      [
        { type: "tool_use", id: "t", name: "x", input: {} },
        { type: "tool_use", id: "t", name: "y", input: {} },
      ],
    ],
    ["anthropic: not a message", "anthropic", { hello: "world" }],
    [
      "responses: function_call without call_id",
      "openai-responses",
      [{ type: "function_call", name: "x", arguments: "{}" }],
    ],
    ["responses: no calls", "openai-responses", { output: [{ type: "message" }] }],
    ["chat: no choices", "openai-chat", { choices: [] }],
    ["chat: no tool calls", "openai-chat", { role: "assistant", content: "hi" }],
    ["native: empty", "native", { calls: [] }],
    [
      "native: too many",
      "native",
      { calls: Array.from({ length: 65 }, (_, i) => ({ id: `c${i}`, name: "x", arguments: {} })) },
    ],
    ["native: wrong shape", "native", { calls: [{ name: "x" }] }],
  ];
  for (const [name, format, body] of cases) {
    it(name, () => {
      const parsed = adapters[format].parse(body);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.error.code).toBe("invalid_request");
    });
  }
});

describe("tool export", () => {
  const schema = {
    type: "object",
    additionalProperties: false,
    properties: {
      order_id: { type: "string", minLength: 1 },
      amount: { type: "number", exclusiveMinimum: 0 },
      note: { type: "string" },
      address: {
        type: "object",
        properties: { city: { type: "string" }, zip: { type: "string" } },
        required: ["city"],
      },
      customer_id: { type: "string" },
    },
    required: ["order_id", "amount", "address", "customer_id"],
  };

  it("removes bound fields, closes every object, requires every property, makes optional ones nullable", () => {
    const exported = exportSchema(schema, ["customer_id"]) as any;
    expect(Object.keys(exported.properties)).toEqual(["order_id", "amount", "note", "address"]);
    expect(exported.required).toEqual(["order_id", "amount", "note", "address"]);
    expect(exported.additionalProperties).toBe(false);
    expect(exported.properties.note.type).toEqual(["string", "null"]);
    expect(exported.properties.address).toMatchObject({
      additionalProperties: false,
      required: ["city", "zip"],
    });
    expect(exported.properties.address.properties.zip.type).toEqual(["string", "null"]);
    // Unsupported constraints move into the description; toolgate still enforces them.
    expect(exported.properties.amount.exclusiveMinimum).toBeUndefined();
    expect(exported.properties.amount.description).toContain("greater than 0");
  });

  it("wraps definitions for each provider", () => {
    const defs = [
      {
        name: "refund",
        description: "Refund.",
        inputJsonSchema: schema,
        bound: ["customer_id"],
        risk: "write" as const,
        builtIn: false,
      },
    ];
    expect(exportTools(defs, "anthropic")[0]).toMatchObject({
      name: "refund",
      strict: true,
      input_schema: { type: "object" },
    });
    expect(exportTools(defs, "openai-responses")[0]).toMatchObject({
      type: "function",
      name: "refund",
      strict: true,
      parameters: { type: "object" },
    });
    expect(exportTools(defs, "openai-chat")[0]).toMatchObject({
      type: "function",
      function: { name: "refund", strict: true },
    });
    expect(exportTools(defs, "mcp")[0]).toMatchObject({
      name: "refund",
      inputSchema: { type: "object" },
    });
    expect(JSON.stringify(exportTools(defs, "openai-chat"))).not.toContain("customer_id");
  });
});

describe("the argument size cap is one rule for every format", () => {
  // 11,000 euro signs: 11,000 UTF-16 units but 33,000 UTF-8 bytes, over the 32 KiB cap.
  const big = { note: "€".repeat(11_000) };
  const small = { note: "€".repeat(10_000) };
  const bodies = (args: unknown) => ({
    native: { calls: [{ id: "c1", name: "t", arguments: args }] },
    anthropic: {
      role: "assistant",
      content: [{ type: "tool_use", id: "c1", name: "t", input: args }],
    },
    "openai-responses": {
      output: [
        { type: "function_call", call_id: "c1", name: "t", arguments: JSON.stringify(args) },
      ],
    },
    "openai-chat": {
      choices: [
        {
          message: {
            role: "assistant",
            tool_calls: [
              {
                id: "c1",
                type: "function",
                function: { name: "t", arguments: JSON.stringify(args) },
              },
            ],
          },
        },
      ],
    },
  });
  it.each(Object.keys(adapters) as Array<keyof typeof adapters>)("%s", (format) => {
    const refused = adapters[format].parse(bodies(big)[format]);
    expect(refused).toMatchObject({ ok: false, error: { code: "invalid_request" } });
    expect(!refused.ok && refused.error.detail).toContain("exceed 32768 bytes");
    expect(adapters[format].parse(bodies(small)[format]).ok).toBe(true);
  });
});
