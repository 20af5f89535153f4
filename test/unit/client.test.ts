// toolgate/client without a server: which responses hold tool calls (per format), and turn()'s
// handling of 202s, approvals, network errors and an unreachable toolgate, over a scripted fetch.
import { describe, expect, it } from "vitest";
import {
  callIds,
  Toolgate,
  ToolgateRun,
  ToolgateUnreachable,
  UNREACHABLE_TEXT,
} from "../../src/client/index.ts";

describe("callIds", () => {
  it.each([
    ["anthropic", { content: [{ type: "text" }, { type: "tool_use", id: "t1" }] }, ["t1"]],
    ["anthropic", { content: [{ type: "text", text: "done" }] }, []],
    ["openai-responses", [{ type: "function_call", callId: "c1" }, { type: "reasoning" }], ["c1"]],
    ["openai-chat", { choices: [{ message: { role: "assistant", content: "hi" } }] }, []],
    ["openai-chat", { role: "assistant", tool_calls: [{ id: "x", type: "function" }] }, ["x"]],
    [
      "native",
      {
        content: [
          { type: "tool-call", toolCallId: "a" },
          { type: "tool-call", toolCallId: "h", providerExecuted: true },
        ],
      },
      ["a"],
    ],
  ] as const)("%s %j → %j", (format, body, ids) => {
    expect(callIds(format, body)).toEqual(ids);
  });
});

type Step = { status: number; body: unknown } | "network_error";
function scripted(steps: Step[]) {
  const seen: Array<{ method: string; url: string; body: string | null; prefer: string | null }> =
    [];
  const fetch = (async (url: URL, init: RequestInit) => {
    const headers = init.headers as Record<string, string>;
    seen.push({
      method: String(init.method),
      url: String(url),
      body: (init.body as string) ?? null,
      prefer: headers.Prefer ?? null,
    });
    const step = steps.shift();
    if (!step) throw new Error("unexpected request");
    if (step === "network_error") throw new TypeError("fetch failed");
    return new Response(JSON.stringify(step.body), { status: step.status });
  }) as unknown as typeof globalThis.fetch;
  const run = new ToolgateRun({
    baseUrl: "http://tg.test",
    runId: "run_1",
    runToken: "rt",
    fetch,
    attempts: 3,
  });
  return { run, seen };
}
const env = (status: string, id = "op_1") =>
  status === "succeeded"
    ? { status, operation_id: id, result: { ok: true } }
    : { status, operation_id: id, code: status, message: "m", allowed_next_actions: ["wait"] };
const anthropicResults = (...envelopes: unknown[]) => ({
  role: "user",
  content: envelopes.map((e, i) => ({
    type: "tool_result",
    tool_use_id: `t${i + 1}`,
    content: JSON.stringify(e),
    is_error: false,
  })),
});
const response = {
  content: [
    { type: "tool_use", id: "t1", name: "x", input: {} },
    { type: "tool_use", id: "t2", name: "y", input: {} },
  ],
};

describe("ToolgateRun.turn", () => {
  it("skips a response without tool calls (nothing posted)", async () => {
    const { run, seen } = scripted([]);
    expect(await run.turn("anthropic", { content: [{ type: "text", text: "hi" }] })).toEqual({
      status: "no_tool_calls",
    });
    expect(seen).toEqual([]);
  });

  it("long-polls a 202 until settled, and hands back the results only then", async () => {
    const { run, seen } = scripted([
      {
        status: 202,
        body: {
          turn_id: "turn_1",
          status: "pending",
          results: anthropicResults(env("succeeded"), env("pending", "op_2")),
        },
      },
      {
        status: 200,
        body: {
          turn_id: "turn_1",
          status: "settled",
          results: anthropicResults(env("succeeded"), env("succeeded", "op_2")),
        },
      },
    ]);
    const outcome = await run.turn("anthropic", response);
    expect(outcome.status).toBe("settled");
    expect(
      outcome.status === "settled" && outcome.results.content.map((b) => b.tool_use_id),
    ).toEqual(["t1", "t2"]);
    expect(seen.map((s) => s.method)).toEqual(["POST", "GET"]);
    expect(seen[1]!.url).toContain("/v1/runs/run_1/turns/turn_1?format=anthropic&wait=");
  });

  it("returns waiting at once when only a person's decision is missing: no results to append", async () => {
    const { run } = scripted([
      {
        status: 202,
        body: {
          turn_id: "turn_1",
          status: "pending",
          results: anthropicResults(env("succeeded"), env("awaiting_approval", "op_2")),
        },
      },
    ]);
    const outcome = await run.turn("anthropic", response);
    expect(outcome).toMatchObject({ status: "waiting", turn_id: "turn_1", pending: [] });
    expect(outcome.status === "waiting" && outcome.awaiting_approval.map((c) => c.call_id)).toEqual(
      ["t2"],
    );
    expect(outcome).not.toHaveProperty("results");
  });

  it("re-POSTs the same body after a network error or a gateway 503", async () => {
    const { run, seen } = scripted([
      "network_error",
      { status: 503, body: {} },
      {
        status: 200,
        body: {
          turn_id: "turn_1",
          status: "settled",
          results: anthropicResults(env("succeeded"), env("succeeded")),
        },
      },
    ]);
    expect((await run.turn("anthropic", response)).status).toBe("settled");
    expect(seen.map((s) => s.method)).toEqual(["POST", "POST", "POST"]);
    expect(new Set(seen.map((s) => s.body)).size).toBe(1);
  });

  it("gives up after its attempts with the honest text, never 'try again'", async () => {
    const { run } = scripted(["network_error", "network_error", "network_error"]);
    const error = await run.turn("anthropic", response).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolgateUnreachable);
    expect((error as ToolgateUnreachable).modelText).toBe(UNREACHABLE_TEXT);
    expect(UNREACHABLE_TEXT).toContain("not known whether this call was carried out");
  });

  it("a refused turn is a ToolgateProblem with the stable code", async () => {
    const { run } = scripted([
      { status: 409, body: { code: "turn_conflict", detail: "same ids, other calls" } },
    ]);
    await expect(run.turn("anthropic", response)).rejects.toMatchObject({
      status: 409,
      code: "turn_conflict",
    });
  });
});

describe("Toolgate.createRun", () => {
  const created = {
    run_id: "run_1",
    run_token: "rt",
    expires_at: "2027-01-01T00:00:00.000Z",
    tools: [],
  };
  function backend(steps: Step[]) {
    const bodies: Array<Record<string, unknown>> = [];
    const fetch = (async (_url: URL, init: RequestInit) => {
      bodies.push(JSON.parse(init.body as string));
      const step = steps.shift();
      if (!step) throw new Error("unexpected request");
      // The server received it either way: a lost response is the case that used to make two runs.
      if (step === "network_error") throw new TypeError("fetch failed");
      return new Response(JSON.stringify(step.body), { status: step.status });
    }) as unknown as typeof globalThis.fetch;
    return {
      toolgate: new Toolgate({ baseUrl: "http://tg.test", apiKey: "tgk", fetch, attempts: 3 }),
      bodies,
    };
  }
  const request = { user: { id: "u1", scopes: [] }, tools: ["charge_card"] };

  it("a resend after a lost response or a 502 names the same creation (request_id), so the server returns the same run", async () => {
    const { toolgate, bodies } = backend([
      "network_error",
      { status: 502, body: {} },
      { status: 200, body: created },
    ]);
    expect((await toolgate.createRun(request)).run_id).toBe("run_1");
    expect(bodies).toHaveLength(3);
    const id = bodies[0]!.request_id;
    expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
    expect(bodies.every((body) => JSON.stringify(body) === JSON.stringify(bodies[0]))).toBe(true);
    expect(bodies[0]).toMatchObject(request);

    // Another createRun is another run: a new request_id.
    const second = backend([{ status: 201, body: created }]);
    await second.toolgate.createRun(request);
    expect(second.bodies[0]!.request_id).not.toBe(id);
  });

  it("keeps a request_id the caller chose (e.g. persisted across a backend restart)", async () => {
    const { toolgate, bodies } = backend(["network_error", { status: 201, body: created }]);
    await toolgate.createRun({ ...request, request_id: "order-42-refund" });
    expect(bodies.map((body) => body.request_id)).toEqual(["order-42-refund", "order-42-refund"]);
  });
});
