// Waiting is not failing: a turn POSTed without `Prefer: wait` (the default wait) answers as soon
// as its unsettled calls only wait for a person, instead of holding the default wait for a decision
// that rarely comes within seconds; calls that run are still waited for; a wait the client asked
// for (`Prefer: wait=N`, `?wait=N`) still long-polls through the approval (the TS client's
// waitForApproval relies on it).
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ToolgateRun } from "../../src/client/index.ts";
import { DEFAULT_TURN_WAIT_MS } from "../../src/http/request.ts";
import { api, manifest, unique, upstream } from "../support/api.ts";

/** A run offering an approval-gated charge and a plain write on another upstream namespace. */
async function approvalAndWriteRun() {
  const gatedUp = upstream();
  const plainUp = upstream();
  const gated = manifest({ url: gatedUp.url, risk: "irreversible_write" });
  // A write that may take a few seconds: its timeout outlives the scripted slow answer.
  const plain = manifest({ url: plainUp.url, timeout_ms: 20_000 });
  for (const tool of [gated, plain])
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [gated.name, plain.name],
  });
  expect(run.status).toBe(201);
  return {
    gatedUp,
    plainUp,
    gated: gated.name as string,
    plain: plain.name as string,
    runId: run.body.run_id as string,
    runToken: run.body.run_token as string,
  };
}
const call = (name: string, amount: number, id = unique("call")) => ({
  id,
  name,
  arguments: { amount, currency: "usd" },
});
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
}

describe("a turn whose calls only wait for a person answers at once", () => {
  it("no Prefer header: 202 awaiting_approval well before the default wait, the inbox item already written, nothing sent", async () => {
    const { gatedUp, gated, runId } = await approvalAndWriteRun();
    const { value: res, ms } = await timed(() =>
      api("POST", `/v1/runs/${runId}/turns?format=native`, { calls: [call(gated, 100)] }),
    );
    expect(res.status).toBe(202);
    expect(res.body.results[0]).toMatchObject({
      status: "awaiting_approval",
      code: "approval_required",
    });
    // Held for the whole default wait before the change (10 s): an order of magnitude apart.
    expect(ms).toBeLessThan(DEFAULT_TURN_WAIT_MS / 2);
    const inbox = await api("GET", "/v1/approvals?state=pending");
    expect(
      inbox.body.items.some((i: any) => i.operation_id === res.body.results[0].operation_id),
    ).toBe(true);
    expect((await gatedUp.state()).requests).toHaveLength(0);
  }, 30_000);

  it("the same for a provider format (Anthropic, no Prefer): the tool_result says it waits, not an error", async () => {
    const { gated, runId } = await approvalAndWriteRun();
    const message = {
      role: "assistant",
      content: [
        { type: "tool_use", id: "toolu_a", name: gated, input: { amount: 7, currency: "usd" } },
      ],
    };
    const { value: res, ms } = await timed(() =>
      api("POST", `/v1/runs/${runId}/turns?format=anthropic`, message),
    );
    expect(res.status).toBe(202);
    expect(res.body.results.content[0]).toMatchObject({ tool_use_id: "toolu_a", is_error: false });
    expect(JSON.parse(res.body.results.content[0].content).status).toBe("awaiting_approval");
    expect(ms).toBeLessThan(DEFAULT_TURN_WAIT_MS / 2);
  }, 30_000);

  it("an explicit Prefer: wait=2 still holds for the person (about 2 s), then 202 awaiting_approval", async () => {
    const { gatedUp, gated, runId } = await approvalAndWriteRun();
    const { value: res, ms } = await timed(() =>
      api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [call(gated, 100)] },
        {
          Prefer: "wait=2",
        },
      ),
    );
    expect(res.status).toBe(202);
    expect(res.body.results[0].status).toBe("awaiting_approval");
    expect(ms).toBeGreaterThanOrEqual(1_500);
    expect((await gatedUp.state()).requests).toHaveLength(0);
  }, 30_000);

  it("Prefer: wait=0 answers now, even with a call still running", async () => {
    const { plainUp, plain, runId } = await approvalAndWriteRun();
    await plainUp.script({ kind: "slow", delayMs: 6_000 });
    const { value: res, ms } = await timed(() =>
      api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [call(plain, 5)] },
        {
          Prefer: "wait=0",
        },
      ),
    );
    expect(res.status).toBe(202);
    expect(res.body.results[0].status).toBe("pending");
    expect(ms).toBeLessThan(4_000); // the upstream holds the call 6 s
    await plainUp.waitForEffects(1);
  }, 30_000);

  it("one approval call and one slow call, no Prefer: waits for the slow call only, then answers with its result and the approval still awaiting", async () => {
    const { gatedUp, plainUp, gated, plain, runId } = await approvalAndWriteRun();
    await plainUp.script({ kind: "slow", delayMs: 2_500 });
    const { value: res, ms } = await timed(() =>
      api("POST", `/v1/runs/${runId}/turns?format=native`, {
        calls: [call(gated, 100, "approve_me"), call(plain, 5, "slow_one")],
      }),
    );
    expect(res.status).toBe(202);
    // Native results come in the calls' order.
    const [approval, slow] = res.body.results;
    expect(slow).toMatchObject({ status: "succeeded", result: { id: expect.any(String) } });
    expect(approval).toMatchObject({ status: "awaiting_approval" });
    // It waited for the slow call (2.5 s at the upstream), not for the default wait (10 s).
    expect(ms).toBeGreaterThanOrEqual(2_000);
    expect(ms).toBeLessThan(DEFAULT_TURN_WAIT_MS - 1_500);
    expect((await plainUp.state()).effects).toHaveLength(1);
    expect((await gatedUp.state()).requests).toHaveLength(0);
  }, 30_000);

  it("the TS client's waitForApproval long-polls through the approval: one GET (?wait=30) returns the executed call", async () => {
    const { gatedUp, gated, runId, runToken } = await approvalAndWriteRun();
    const gets: string[] = [];
    let approving: Promise<unknown> | null = null;
    const fetch = (async (url: URL | string, init: RequestInit) => {
      const request = new Request(String(url), init);
      const answer = (exports as unknown as { default: Fetcher }).default.fetch(request);
      if (request.method === "GET" && new URL(request.url).pathname.includes("/turns/")) {
        gets.push(request.url);
        // The person decides while the client's long-poll is held by the server.
        if (!approving) {
          const pending = await api("GET", "/v1/approvals?state=pending");
          const item = pending.body.items.find((i: any) => i.run_id === runId);
          approving = api("POST", `/v1/operations/${item.operation_id}/approve`, {});
        }
      }
      return answer;
    }) as unknown as typeof globalThis.fetch;
    const client = new ToolgateRun({ baseUrl: "http://toolgate.test", runId, runToken, fetch });
    const outcome = await client.turn(
      "native",
      { calls: [call(gated, 100, "gated_call")] },
      { maxWaitMs: 20_000, waitForApproval: true },
    );
    expect((await approving!) as any).toMatchObject({ status: 200 });
    expect(outcome.status).toBe("settled");
    expect(gets).toHaveLength(1);
    expect(gets[0]).toContain("wait=");
    expect((await gatedUp.state()).effects).toHaveLength(1);
  }, 40_000);
});
