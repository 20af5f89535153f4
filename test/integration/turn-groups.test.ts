// turn_key through the public API: calls of one model response posted separately are one model
// turn (max_turns counted once, the model's usage charged once); other usage for the same key is
// a 409 turn_conflict problem that changes nothing; the SDKs' own shapes are accepted.
import { describe, expect, it } from "vitest";
import { api, manifest, upstream } from "../support/api.ts";

async function runWith(budgets: Record<string, number>) {
  const up = upstream();
  const tool = manifest({ url: up.url, cost: 1 });
  await api("PUT", `/v1/tools/${tool.name}`, tool);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    budgets,
  });
  const post = (body: unknown, format = "native") =>
    api("POST", `/v1/runs/${run.body.run_id}/turns?format=${format}`, body, { Prefer: "wait=5" });
  const usage = async () => (await api("GET", `/v1/runs/${run.body.run_id}`)).body.usage;
  return { name: tool.name as string, post, usage, up };
}

describe("turn groups (turn_key)", () => {
  it("separately posted calls of one response are one turn with its usage charged once", async () => {
    const r = await runWith({ max_turns: 1 });
    const usage = { input_tokens: 1000, output_tokens: 500 }; // 1 + 1 cost units at the test prices
    const call = (id: string, amount: number) => ({
      id,
      name: r.name,
      arguments: { amount, currency: "usd" },
    });
    const a = await r.post({ calls: [call("c1", 1)], turn_key: "resp_1", model: "m", usage });
    const b = await r.post({ calls: [call("c2", 2)], turn_key: "resp_1", model: "m", usage });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.body.results[0].status, b.body.results[0].status]).toEqual([
      "succeeded",
      "succeeded",
    ]);
    expect(await r.usage()).toEqual({ turns: 1, tool_calls: 2, cost: 2 + 2 });
    // A second model response is a second turn: max_turns (1) refuses it.
    const c = await r.post({ calls: [call("c3", 3)], turn_key: "resp_2" });
    expect(c.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "max_turns" });
    expect((await r.up.state()).effects).toHaveLength(2);
  });

  it("other usage for the same key is 409 turn_conflict and changes nothing", async () => {
    const r = await runWith({});
    const call = (id: string) => ({ id, name: r.name, arguments: { amount: 5, currency: "usd" } });
    await r.post({
      calls: [call("k1")],
      turn_key: "resp_x",
      usage: { input_tokens: 10, output_tokens: 1 },
    });
    const before = await r.usage();
    const conflict = await r.post({
      calls: [call("k2")],
      turn_key: "resp_x",
      usage: { input_tokens: 99, output_tokens: 1 },
    });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ code: "turn_conflict" });
    expect(conflict.headers.get("content-type")).toContain("application/problem+json");
    expect(await r.usage()).toEqual(before);
    expect((await r.up.state()).effects).toHaveLength(1);
  });

  it("one turn_key holds at most one model response's calls (64): a post past that is 409 turn_conflict, nothing sent, nothing counted", async () => {
    const r = await runWith({ max_turns: 1 });
    const valid = (id: string) => ({ id, name: r.name, arguments: { amount: 5, currency: "usd" } });
    // Refused by the gate (nothing sent), but calls of the response all the same.
    const invalid = (id: string) => ({
      id,
      name: r.name,
      arguments: { amount: -1, currency: "usd" },
    });
    const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    const a = await r.post({
      calls: [valid("v1"), ...ids("a", 40).map(invalid)],
      turn_key: "resp_1",
    });
    const b = await r.post({ calls: ids("b", 23).map(invalid), turn_key: "resp_1" });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.results[0].status).toBe("succeeded");
    const before = await r.usage();
    expect(before).toEqual({ turns: 1, tool_calls: 1, cost: 1 });
    // The 65th call under the same key would make max_turns count nothing for another response.
    const past = await r.post({ calls: [valid("v2")], turn_key: "resp_1" });
    expect(past.status).toBe(409);
    expect(past.body).toMatchObject({
      code: "turn_conflict",
      detail: expect.stringContaining("new turn_key"),
    });
    expect(await r.usage()).toEqual(before);
    // Under a new key it is a new model turn, which max_turns refuses for a new write (a repeat of
    // the first one would get its stored outcome: audit finding 2).
    const next = await r.post({
      calls: [{ id: "v3", name: r.name, arguments: { amount: 6, currency: "usd" } }],
      turn_key: "resp_2",
    });
    expect(next.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "max_turns" });
    expect((await r.up.state()).effects).toHaveLength(1);
  });

  it("accepts an @openai/agents ModelResponse and an AI SDK model call as posted by the SDKs", async () => {
    const r = await runWith({});
    const agents = await r.post(
      {
        usage: { requests: 1, inputTokens: 10, outputTokens: 2, totalTokens: 12 },
        output: [
          {
            type: "function_call",
            callId: "fc_1",
            name: r.name,
            arguments: '{"amount":7,"currency":"usd"}',
          },
        ],
        responseId: "resp_a",
      },
      "openai-responses",
    );
    expect(agents.body.results).toEqual([
      expect.objectContaining({ type: "function_call_output", call_id: "fc_1" }),
    ]);
    const ai = await r.post({
      content: [
        {
          type: "tool-call",
          toolCallId: "tc_1",
          toolName: r.name,
          input: { amount: 8, currency: "eur" },
        },
      ],
      usage: { inputTokens: 20, outputTokens: 3 },
      modelId: "m",
    });
    expect(ai.body.results.map((e: { status: string }) => e.status)).toEqual(["succeeded"]);
    const bad = await r.post({ content: [{ type: "tool-call", toolName: r.name, input: {} }] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      code: "invalid_request",
      detail: expect.stringContaining("content[0].toolCallId"),
    });
  });
});
