// The real SDKs against the shared toolgate under `wrangler dev` with demo/upstream.ts as the tool
// upstream (test/support/e2e-setup.ts; a tenant and an upstream namespace per test), each driving
// a conversation against a local fake of its provider API that refuses requests the real API
// refuses (test/support/fake-providers.ts). The loops are the README examples (examples/*.ts), run
// as shown. Effects are counted upstream; readiness is waited for.
import Anthropic from "@anthropic-ai/sdk";
import { createOpenAI } from "@ai-sdk/openai";
import { setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { Toolgate, ToolgateRun, UNREACHABLE_TEXT, type Envelope } from "toolgate/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDemo } from "../../demo/agent.ts";
import { agent as aiSdkAgent } from "../../examples/ai-sdk.ts";
import { agent as anthropicAgent } from "../../examples/anthropic.ts";
import { agent as agentsAgent } from "../../examples/openai-agents.ts";
import { agent as chatAgent } from "../../examples/openai-chat.ts";
import { agent as responsesAgent } from "../../examples/openai-responses.ts";
import { registerDemo, ROOT } from "../../scripts/lib/dev-server.mjs";
import { e2eServer, shopNamespace } from "../support/e2e.ts";
import { startFakeProviders, type FakeProviders } from "../support/fake-providers.ts";

const { toolgateUrl, upstreamUrl } = e2eServer();
let fake: FakeProviders;

beforeAll(async () => {
  fake = await startFakeProviders();
  setTracingDisabled(true);
}, 240_000);

afterAll(async () => {
  await fake?.close();
});

let nsCounter = 0;
/** A fresh tenant whose demo tools point at their own upstream namespace, and one run. */
async function demo(budgets: Record<string, number> = {}) {
  const ns = `sdk${Date.now().toString(36)}${nsCounter++}`;
  const shop = shopNamespace(ns);
  const registered = await registerDemo(toolgateUrl, shop.url, { budgets });
  const backend = new Toolgate({ baseUrl: toolgateUrl, apiKey: registered.key });
  const run = backend.run(registered.run);
  const effects = async () => (await shop.state()).effects;
  const usage = async () =>
    (
      (await (
        await fetch(`${toolgateUrl}/v1/runs/${registered.run.run_id}`, {
          headers: { Authorization: `Bearer ${registered.key}` },
        })
      ).json()) as { usage: { turns: number; tool_calls: number; cost: number } }
    ).usage;
  return { ...registered, runInfo: registered.run, backend, run, effects, usage, ns };
}

const envelopeOf = (text: unknown) => JSON.parse(String(text)) as Envelope;
const MODEL = "fake-model";

describe("Anthropic SDK (Messages)", () => {
  it("parallel calls in one response come back paired in order; a re-POST after a lost response is the same turn", async () => {
    const d = await demo();
    let dropped = 0;
    // The first turn POST reaches toolgate, then its response is lost: the client must re-POST.
    const flaky: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (init?.method === "POST" && String(input).includes("/turns") && dropped++ === 0) {
        await response.text();
        throw new TypeError("fetch failed: connection reset");
      }
      return response;
    };
    const run = new ToolgateRun({
      baseUrl: toolgateUrl,
      runId: d.runInfo.run_id,
      runToken: d.runInfo.run_token,
      fetch: flaky,
    });
    fake.script(
      "anthropic",
      () =>
        anthropicMessage([
          toolUse("toolu_a", "charge_card", { amount: 500, currency: "usd" }),
          toolUse("toolu_b", "lookup_order", { order_id: "ord_1" }),
        ]),
      () => anthropicMessage([{ type: "text", text: "Charged and looked up.", citations: null }]),
    );
    const anthropic = new Anthropic({ baseURL: fake.url, apiKey: "test", maxRetries: 0 });
    const messages: Anthropic.MessageParam[] = [
      { role: "user", content: "Charge $5, check ord_1" },
    ];
    const end = await anthropicAgent(anthropic, run, MODEL, messages);
    expect(end.status).toBe("no_tool_calls");
    expect(dropped).toBe(2);
    const results = (messages[2]!.content as Anthropic.ToolResultBlockParam[]).map((b) => [
      b.tool_use_id,
      envelopeOf(b.content).status,
      b.is_error,
    ]);
    expect(results).toEqual([
      ["toolu_a", "succeeded", false],
      ["toolu_b", "succeeded", false],
    ]);
    expect(fake.refused).toEqual([]);
    expect((await d.effects()).map((e) => e.path)).toEqual(["/charges"]);
    expect(await d.usage()).toMatchObject({ turns: 1, tool_calls: 2 });
  });
});

describe("OpenAI SDK (Responses)", () => {
  it("a re-proposal after a simulated crash gets the stored result, and no second charge", async () => {
    const d = await demo();
    const openai = new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "test", maxRetries: 0 });
    const charge = (callId: string) => () =>
      responsesBody([functionCall(callId, "charge_card", { amount: 900, currency: "usd" })]);
    // First agent process: the model charges, toolgate records it, the process dies before replying.
    fake.script("responses", charge("call_1"));
    const crashed = await d.run.turn(
      "openai-responses",
      await openai.responses.create({ model: MODEL, input: "charge 9" }),
    );
    expect(crashed.status).toBe("settled");
    // The restarted agent starts over; the model proposes the same charge with a new call id.
    fake.script("responses", charge("call_2"), () => responsesBody([outputText("Done.")]));
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "charge 9" }];
    await responsesAgent(openai, d.run, MODEL, input);
    const output = input.find(
      (i): i is OpenAI.Responses.ResponseInputItem.FunctionCallOutput =>
        i.type === "function_call_output",
    )!;
    const replay = envelopeOf(output.output);
    expect(replay.status).toBe("succeeded");
    expect(crashed.status === "settled" && crashed.calls[0]!.envelope).toEqual(replay);
    expect(fake.refused).toEqual([]);
    expect(await d.effects()).toHaveLength(1);
  });
});

describe("OpenAI SDK (Chat Completions)", () => {
  it("an approval pauses the turn (nothing sent, nothing appended) and resumes; strict-mode nulls are absent", async () => {
    const d = await demo();
    await registerNoteTool(d.key, `${upstreamUrl}/ns/${d.ns}`);
    await fetch(`${toolgateUrl}/v1/runs/${d.runInfo.run_id}`, {
      method: "PATCH",
      headers: { Authorization: `Bearer ${d.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ tools: ["refund_order", "add_note"] }),
    });
    const openai = new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "test", maxRetries: 0 });
    const exported = (await d.run.tools("openai-chat")) as OpenAI.ChatCompletionFunctionTool[];
    const note = exported.find((t) => t.function.name === "add_note")!;
    expect(note.function.strict).toBe(true);
    expect((note.function.parameters as any).properties.tag.type).toEqual(["string", "null"]);
    fake.script("chat", () =>
      chatBody([
        chatCall("c_refund", "refund_order", { order_id: "ord_7", amount: 150, reason: "damaged" }),
        chatCall("c_note", "add_note", { order_id: "ord_7", text: "refund asked", tag: null }),
      ]),
    );
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "refund 150" }];
    const paused = await chatAgent(openai, d.run, MODEL, messages);
    expect(paused.status).toBe("waiting");
    if (paused.status !== "waiting") return;
    expect(paused.awaiting_approval.map((c) => c.call_id)).toEqual(["c_refund"]);
    expect(messages.at(-1)!.role).toBe("assistant"); // no interim result was appended
    expect((await d.effects()).map((e) => e.path)).toEqual(["/notes"]); // the note, not the refund
    expect((await d.effects())[0]!.body).not.toHaveProperty("tag");
    // A person approves through the API; the agent resumes the same turn.
    const operationId = paused.awaiting_approval[0]!.envelope.operation_id;
    const decided = await d.backend.approve(operationId, { reason: "photos checked" });
    expect(decided.approval).toMatchObject({ state: "approved", decided_by: "demo" });
    const resumed = await d.run.poll("openai-chat", paused.turn_id, [], { maxWaitMs: 20_000 });
    expect(resumed.status).toBe("settled");
    if (resumed.status !== "settled") return;
    messages.push(...resumed.results);
    fake.script("chat", () => chatBody([], "Refunded 150."));
    expect((await chatAgent(openai, d.run, MODEL, messages)).status).toBe("no_tool_calls");
    expect(resumed.calls.map((c) => c.envelope.status)).toEqual(["succeeded", "succeeded"]);
    expect(fake.refused).toEqual([]);
    expect((await d.effects()).map((e) => e.path).sort()).toEqual([
      "/notes",
      "/orders/ord_7/refunds",
    ]);
  });
});

describe("OpenAI Agents SDK", () => {
  it("one toolgate turn per model response with its usage in max_cost; needsApproval follows toolgate; the decision is recorded; a settled refund never asks again", async () => {
    const d = await demo({ max_cost: 1000 });
    setDefaultOpenAIClient(
      new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "test", maxRetries: 0 }) as never,
    );
    const refund = (callId: string) =>
      functionCall(callId, "refund_order", { order_id: "ord_9", amount: 150, reason: "damaged" });
    fake.script(
      "responses",
      () =>
        responsesBody(
          [
            functionCall("a_charge", "charge_card", { amount: 300, currency: "usd" }),
            refund("a_refund"),
          ],
          { input_tokens: 40, output_tokens: 6 },
        ),
      () => responsesBody([refund("a_refund_again")], { input_tokens: 10, output_tokens: 2 }),
      () =>
        responsesBody([outputText("Charged and refunded.")], { input_tokens: 5, output_tokens: 1 }),
    );
    const asked: string[] = [];
    const result = await agentsAgent(
      d.backend,
      d.run,
      MODEL,
      "charge 3, refund 150",
      async (item) => {
        asked.push((item.rawItem as { callId: string }).callId);
        expect(await d.effects()).toHaveLength(1); // the charge ran; the refund waits
        return true;
      },
    );
    expect(result.finalOutput).toBe("Charged and refunded.");
    expect(asked).toEqual(["a_refund"]); // the re-proposal of the settled refund did not ask
    const outputs = fake.requests.responses
      .at(-1)!
      .input.filter((i: any) => i.type === "function_call_output")
      .map((i: any) => [i.call_id, envelopeOf(i.output.text ?? i.output).status]);
    expect(outputs).toEqual([
      ["a_charge", "succeeded"],
      ["a_refund", "succeeded"],
      ["a_refund_again", "succeeded"],
    ]);
    expect((await d.effects()).map((e) => e.path)).toEqual(["/charges", "/orders/ord_9/refunds"]);
    // Two model responses with tool calls → two turns; model usage 46 + 12 units; tools 1 + 1
    // (the re-proposal of the settled refund executed nothing, so it costs nothing).
    expect(await d.usage()).toMatchObject({ turns: 2, tool_calls: 3, cost: 46 + 12 + 2 });
    expect(fake.refused).toEqual([]);
  });

  it("when toolgate is unreachable the model is told the outcome is unknown, never to try again", async () => {
    const d = await demo();
    setDefaultOpenAIClient(
      new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: "test", maxRetries: 0 }) as never,
    );
    const down: typeof fetch = async (input, init) => {
      if (String(input).includes("/turns")) throw new TypeError("fetch failed: ECONNREFUSED");
      return fetch(input, init);
    };
    const run = new ToolgateRun({
      baseUrl: toolgateUrl,
      runId: d.runInfo.run_id,
      runToken: d.runInfo.run_token,
      fetch: down,
      attempts: 2,
    });
    fake.script(
      "responses",
      () => responsesBody([functionCall("u_1", "charge_card", { amount: 100, currency: "usd" })]),
      () => responsesBody([outputText("I could not confirm the charge.")]),
    );
    await agentsAgent(d.backend, run, MODEL, "charge 1", async () => true);
    const output = fake.requests.responses
      .at(-1)!
      .input.find((i: any) => i.type === "function_call_output");
    const text = String(output.output.text ?? output.output);
    expect(text).toBe(UNREACHABLE_TEXT);
    expect(text.toLowerCase()).not.toContain("try again");
  });
});

describe("Vercel AI SDK", () => {
  it("one turn per model response (tool-call parts + usage); toolApproval follows toolgate; the decision is recorded", async () => {
    const d = await demo({ max_cost: 1000 });
    const model = createOpenAI({ baseURL: `${fake.url}/v1`, apiKey: "test" }).chat(MODEL);
    fake.script(
      "chat",
      () =>
        chatBody(
          [
            chatCall("v_charge", "charge_card", { amount: 200, currency: "usd" }),
            chatCall("v_refund", "refund_order", {
              order_id: "ord_5",
              amount: 120,
              reason: "other",
            }),
          ],
          null,
          { prompt_tokens: 30, completion_tokens: 4 },
        ),
      () =>
        chatBody([], "Charged; the refund was approved and done.", {
          prompt_tokens: 8,
          completion_tokens: 3,
        }),
    );
    const asked: string[] = [];
    const messages: any[] = [{ role: "user", content: "charge 2, refund 120" }];
    const result = await aiSdkAgent(d.backend, d.run, model, messages, async (ask) => {
      asked.push(ask.toolCall.toolName);
      expect((await d.effects()).map((e) => e.path)).toEqual(["/charges"]);
      return true;
    });
    expect(result.text).toBe("Charged; the refund was approved and done.");
    expect(asked).toEqual(["refund_order"]);
    expect((await d.effects()).map((e) => e.path)).toEqual(["/charges", "/orders/ord_5/refunds"]);
    const last = fake.requests.chat.at(-1)!;
    const toolMessages = last.messages.filter((m: any) => m.role === "tool");
    expect(toolMessages.map((m: any) => [m.tool_call_id, JSON.parse(m.content).status])).toEqual([
      ["v_charge", "succeeded"],
      ["v_refund", "succeeded"],
    ]);
    expect(await d.usage()).toMatchObject({ turns: 1, tool_calls: 2, cost: 34 + 2 });
    expect(fake.refused).toEqual([]);
  });
});

describe("npm run demo (its core, demo/agent.ts)", () => {
  it("ends with one refund per order, one charge and no email: the incidents cost nothing extra", async () => {
    const d = await demo({ max_tool_calls: 5 });
    const lines: string[] = [];
    const result = await runDemo({
      toolgateUrl: toolgateUrl,
      upstreamUrl: upstreamUrl,
      namespace: d.ns,
      key: d.key,
      run: d.runInfo,
      log: (line) => lines.push(line),
    });
    expect(result.effects.map((e) => e.path)).toEqual([
      "/orders/ord_1001/refunds",
      "/orders/ord_2002/refunds",
      "/charges",
    ]);
    // The committed-then-hung refund went out twice with one key, and the shop refunded once.
    expect(new Set(result.effects.map((e) => e.key)).size).toBe(3);
    expect(Object.values(result.statuses)).toEqual([
      "succeeded",
      "succeeded",
      "rejected",
      "succeeded",
      "succeeded",
      "budget_exhausted",
    ]);
    const output = lines.join("\n");
    expect(output).toContain("outcome_unknown  (attempt 1, timeout_unknown)");
    expect(output).toContain("approval_decided");
    expect(output).toContain("budget_exhausted/max_tool_calls");
  });
});

describe("README", () => {
  it("shows each SDK example exactly as the tests run it, at most 10 lines", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    for (const name of [
      "anthropic",
      "openai-responses",
      "openai-chat",
      "openai-agents",
      "ai-sdk",
    ]) {
      const source = readFileSync(join(ROOT, "examples", `${name}.ts`), "utf8");
      const body = /\/\/ README:begin\n([\s\S]*?)\n\s*\/\/ README:end/.exec(source)![1]!;
      const lines = body.split("\n");
      expect(lines.length, name).toBeLessThanOrEqual(10);
      const indent = Math.min(...lines.map((l) => l.length - l.trimStart().length));
      expect(readme, name).toContain(lines.map((l) => l.slice(indent)).join("\n"));
    }
  });
});

// ── provider-shaped fixtures ──────────────────────────────────────────────────────────────────

const toolUse = (id: string, name: string, input: unknown) => ({
  type: "tool_use",
  id,
  name,
  input,
});
function anthropicMessage(content: unknown[]) {
  const usesTools = content.some((b: any) => b.type === "tool_use");
  return {
    id: `msg_${Math.random().toString(36).slice(2)}`,
    type: "message",
    role: "assistant",
    model: MODEL,
    content,
    stop_reason: usesTools ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 20, output_tokens: 5 },
  };
}

const functionCall = (callId: string, name: string, args: unknown) => ({
  type: "function_call",
  id: `fc_${callId}`,
  call_id: callId,
  name,
  arguments: JSON.stringify(args),
  status: "completed",
});
const outputText = (text: string) => ({
  type: "message",
  id: `msg_${Math.random().toString(36).slice(2)}`,
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text, annotations: [] }],
});
function responsesBody(output: unknown[], usage = { input_tokens: 1, output_tokens: 1 }) {
  return {
    id: `resp_${Math.random().toString(36).slice(2)}`,
    object: "response",
    created_at: 1,
    status: "completed",
    model: MODEL,
    output,
    usage: {
      ...usage,
      total_tokens: usage.input_tokens + usage.output_tokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  };
}

const chatCall = (id: string, name: string, args: unknown) => ({
  id,
  type: "function",
  function: { name, arguments: JSON.stringify(args) },
});
function chatBody(
  toolCalls: unknown[],
  text: string | null = null,
  usage = { prompt_tokens: 1, completion_tokens: 1 },
) {
  return {
    id: `chatcmpl_${Math.random().toString(36).slice(2)}`,
    object: "chat.completion",
    created: 1,
    model: MODEL,
    choices: [
      {
        index: 0,
        finish_reason: toolCalls.length ? "tool_calls" : "stop",
        message: {
          role: "assistant",
          content: text,
          refusal: null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
      },
    ],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

/** A write with an optional field, so strict mode exports it nullable and the model sends null. */
async function registerNoteTool(key: string, base: string) {
  const response = await fetch(`${toolgateUrl}/v1/tools/add_note`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      name: "add_note",
      description: "Add an internal note to an order.",
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          order_id: { type: "string" },
          text: { type: "string" },
          tag: { type: "string" },
        },
        required: ["order_id", "text"],
      },
      risk: "write",
      request: { method: "POST", url: `${base}/notes` },
      idempotency: { mode: "header", header: "Idempotency-Key" },
      timeout_ms: 3000,
      cost: 1,
    }),
  });
  if (!response.ok) throw new Error(`add_note: ${response.status} ${await response.text()}`);
}
