// Policy and budgets enforced outside the prompt: scopes (at validation and again before each
// retry), declarative limits, and run budgets that hold under concurrency.
import { describe, expect, it } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  turn,
  unique,
  upstream,
  automaticWork,
} from "../support/api.ts";

async function runWith(tool: Record<string, unknown>, run: Record<string, unknown>) {
  expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBe(201);
  const created = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    ...run,
  });
  expect(created.status).toBe(201);
  return { runId: created.body.run_id as string, name: tool.name as string };
}
const charge = (amount: number) => ({ amount, currency: "usd" });

describe("scopes and limits", () => {
  it("a missing scope is rejected/forbidden before any request", async () => {
    const up = upstream();
    const { runId, name } = await runWith(
      manifest({ url: up.url, requires_scopes: ["payments:charge"] }),
      { user: { id: "u1", scopes: ["orders:read"] } },
    );
    const res = await turn(runId, [{ id: "c1", name, arguments: charge(5) }]);
    expect(res.body.results[0]).toMatchObject({
      status: "rejected",
      code: "forbidden",
      allowed_next_actions: ["tell_user"],
    });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a scope revoked mid-run stops the next execution with rejected/forbidden", async () => {
    const up = upstream();
    const { runId, name } = await runWith(
      manifest({ url: up.url, requires_scopes: ["payments:charge"] }),
      { user: { id: "u1", scopes: ["payments:charge"] } },
    );
    await up.script({ kind: "status", status: 429 }); // not processed: nothing may have applied
    const first = await turn(runId, [{ id: "c1", name, arguments: charge(5) }]);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    const patched = await api("PATCH", `/v1/runs/${runId}`, { user: { scopes: [] } });
    expect(patched.status).toBe(200);
    expect(patched.body.user.scopes).toEqual([]);
    expect(await fireAlarm(first.body.results[0].operation_id)).toBe(true);
    expect((await operation(first.body.results[0].operation_id)).body.result).toMatchObject({
      status: "rejected",
      code: "forbidden",
    });
    const state = await up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(0);
    // And new calls are refused at the gate.
    expect(
      (await turn(runId, [{ id: "c2", name, arguments: charge(6) }])).body.results[0].code,
    ).toBe("forbidden");
  });

  it("PATCH tools withdraws a tool: later calls are tool_not_allowed", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    const other = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${other.name}`, other)).status).toBe(201);
    const { runId, name } = await runWith(tool, {});
    expect((await api("PATCH", `/v1/runs/${runId}`, { tools: [other.name] })).body.tools).toEqual([
      other.name,
    ]);
    expect(
      (await turn(runId, [{ id: "c1", name, arguments: charge(1) }])).body.results[0].code,
    ).toBe("tool_not_allowed");
    expect(
      (await turn(runId, [{ id: "c2", name: other.name, arguments: charge(1) }])).body.results[0]
        .status,
    ).toBe("succeeded");
    expect((await api("PATCH", `/v1/runs/${runId}`, { nothing: true })).status).toBe(400);
  });

  it("a limit breach is policy_denied with a do-not-retry message; limits fail closed", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, limits: { amount: { max: "context.refund_limit" } } });
    const { runId, name } = await runWith(tool, { context: { refund_limit: 100 } });
    const over = await turn(runId, [{ id: "c1", name, arguments: charge(150) }]);
    expect(over.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(over.body.results[0].message).toMatch(/Do not retry/);
    expect(
      (await turn(runId, [{ id: "c2", name, arguments: charge(100) }])).body.results[0].status,
    ).toBe("succeeded");
    const unbound = await api("POST", "/v1/runs", { user: { id: "u2" }, tools: [name] });
    expect(
      (await turn(unbound.body.run_id, [{ id: "c3", name, arguments: charge(1) }])).body.results[0]
        .code,
    ).toBe("policy_denied");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a limit on an optional field the model leaves out (or sends null) is policy_denied; nothing is sent", async () => {
    const up = upstream();
    // The upstream refunds everything when no amount is given: the limit must not be skippable.
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { order_id: { type: "string" }, amount: { type: "integer" } },
        required: ["order_id"],
      },
      limits: { amount: { max: "context.refund_limit" } },
    });
    const { runId, name } = await runWith(tool, { context: { refund_limit: 100 } });
    const res = await turn(runId, [
      { id: "c1", name, arguments: { order_id: "o1" } },
      { id: "c2", name, arguments: { order_id: "o2", amount: null } },
    ]);
    for (const result of res.body.results) {
      expect(result).toMatchObject({ status: "rejected", code: "policy_denied" });
      expect(result.message).toMatch(/amount has a limit and was not given/);
    }
    expect((await up.state()).requests).toHaveLength(0);
    const within = await turn(runId, [
      { id: "c3", name, arguments: { order_id: "o3", amount: 40 } },
    ]);
    expect(within.body.results[0].status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("budgets", () => {
  it("max_tool_calls = 5 with 12 concurrent distinct calls admits exactly 5", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), {
      budgets: { max_tool_calls: 5 },
    });
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        turn(runId, [{ id: `c${i}`, name, arguments: charge(i + 1) }]),
      ),
    );
    const envelopes = responses.map((r) => r.body.results[0]);
    expect(envelopes.filter((e) => e.status === "succeeded")).toHaveLength(5);
    expect(
      envelopes.filter((e) => e.status === "budget_exhausted" && e.code === "max_tool_calls"),
    ).toHaveLength(7);
    expect((await up.state()).effects).toHaveLength(5);
    expect((await api("GET", `/v1/runs/${runId}`)).body.usage.tool_calls).toBe(5);
  });

  it("max_turns stops the third turn; a re-posted turn is not a new turn", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), { budgets: { max_turns: 2 } });
    await turn(runId, [{ id: "c1", name, arguments: charge(1) }]);
    await turn(runId, [{ id: "c1", name, arguments: charge(1) }]);
    await turn(runId, [{ id: "c2", name, arguments: charge(2) }]);
    const third = await turn(runId, [{ id: "c3", name, arguments: charge(3) }]);
    expect(third.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "max_turns" });
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("max_duration_ms: calls after the deadline are budget_exhausted/deadline", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, timeout_ms: 5_000 }), {
      budgets: { max_duration_ms: 1_000 },
    });
    await up.script({ kind: "slow", delayMs: 1_100 });
    expect(
      (await turn(runId, [{ id: "c1", name, arguments: charge(1) }])).body.results[0].status,
    ).toBe("succeeded");
    const late = await turn(runId, [{ id: "c2", name, arguments: charge(2) }]);
    expect(late.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "deadline" });
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("max_cost reserves tool cost before execution; a replay does not pay", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, cost: 1 }), {
      budgets: { max_cost: 2 },
    });
    const concurrent = await Promise.all(
      [1, 2, 3].map((n) => turn(runId, [{ id: `c${n}`, name, arguments: charge(n) }])),
    );
    const statuses = concurrent.map((r) => r.body.results[0].status).sort();
    expect(statuses).toEqual(["budget_exhausted", "succeeded", "succeeded"]);
    expect(
      concurrent.find((r) => r.body.results[0].status === "budget_exhausted")!.body.results[0].code,
    ).toBe("max_cost");
    expect((await api("GET", `/v1/runs/${runId}`)).body.usage.cost).toBe(2);

    const up2 = upstream();
    const cheap = await runWith(manifest({ url: up2.url, cost: 1 }), { budgets: { max_cost: 2 } });
    await turn(cheap.runId, [{ id: "a1", name: cheap.name, arguments: charge(1) }]);
    const replay = await turn(cheap.runId, [{ id: "a2", name: cheap.name, arguments: charge(1) }]);
    expect(replay.body.results[0].status).toBe("succeeded");
    // Known recorded: nothing reserved, so nothing refunded — the turn row (the usage after it rides
    // in it, issue 32) and the turn's turn.settled event (issue 18) only.
    expect(replay.headers.get("Toolgate-Rows-Written")).toBe("2");
    expect((await api("GET", `/v1/runs/${cheap.runId}`)).body.usage.cost).toBe(1);
    expect(
      (await turn(cheap.runId, [{ id: "a3", name: cheap.name, arguments: charge(2) }])).body
        .results[0].status,
    ).toBe("succeeded");
    expect(
      (await turn(cheap.runId, [{ id: "a4", name: cheap.name, arguments: charge(3) }])).body
        .results[0].code,
    ).toBe("max_cost");
    expect((await up2.state()).effects).toHaveLength(2);
  });
});

describe("cancellation", () => {
  it("a slow write cancelled mid-flight: the turn says cancelled, the late result is recorded on the operation", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, timeout_ms: 5_000 }), {});
    await up.script({ kind: "slow", delayMs: 1_500 }); // long enough that the cancel lands mid-flight even on a loaded machine
    const first = await turn(runId, [{ id: "c1", name, arguments: charge(9) }], 0);
    expect(first.status).toBe(202);
    const operationId = first.body.results[0].operation_id as string;
    await up.waitForRequests(1);
    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`);
    expect(cancelled.body.status).toBe("cancelled");

    const closed = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}?wait=2`);
    expect(closed.status).toBe(200);
    expect(closed.body.results[0]).toMatchObject({
      status: "cancelled",
      code: "cancelled",
      operation_id: operationId,
    });
    const settled = await operation(operationId, 5);
    expect(settled.body).toMatchObject({
      phase: "recorded",
      late: true,
      result: { status: "succeeded" },
    });
    // Still closed after the late result arrived.
    expect(
      (await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`)).body.results[0].status,
    ).toBe("cancelled");
    expect((await up.state()).effects).toHaveLength(1);
    // After cancellation nothing new runs.
    const after = await turn(runId, [{ id: "c2", name, arguments: charge(10) }]);
    expect(after.body.results[0]).toMatchObject({ status: "cancelled", code: "cancelled" });
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("cancelling an operation waiting to retry records cancelled and sends nothing more", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), {});
    await up.script({ kind: "status", status: 429 }); // not processed: nothing may have applied
    const first = await turn(runId, [{ id: "c1", name, arguments: charge(3) }]);
    const operationId = first.body.results[0].operation_id as string;
    const res = await api("POST", `/v1/operations/${operationId}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body.result).toMatchObject({ status: "cancelled", code: "cancelled" });
    expect(await automaticWork(operationId)).toBe(false);
    expect(
      (await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`)).body.results[0].status,
    ).toBe("cancelled");
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("cancelling an in-flight read aborts the request", async () => {
    const up = upstream();
    const { runId, name } = await runWith(
      manifest({
        url: up.url,
        risk: "read",
        request: { method: "GET", url: `${up.url}/orders/{currency}` },
        timeout_ms: 10_000,
      }),
      {},
    );
    await up.script({ kind: "hang" });
    const first = await turn(runId, [{ id: unique("c"), name, arguments: charge(3) }], 0);
    const operationId = first.body.results[0].operation_id as string;
    await up.waitForRequests(1);
    await api("POST", `/v1/operations/${operationId}/cancel`);
    const settled = await operation(operationId, 2);
    expect(settled.body.result).toMatchObject({ status: "cancelled" });
    expect(await automaticWork(operationId)).toBe(false);
  });
});
