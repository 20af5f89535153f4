// Operations shared across runs (`operation_scope: "tenant"`): a run reads (toolgate_check_status)
// and cancels only operations it created. Another run's call that conflicts with one (same order,
// other arguments) learns nothing more than the conflict and cannot cancel it; a run whose call
// joined one with the identical input closes only its own call. Through the public API (and MCP).
import { describe, expect, it } from "vitest";
import { freezeCall } from "../../src/domain/identity.ts";
import {
  api,
  manifest,
  operation,
  opStub,
  testTenant,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { callTool, LEGACY, mcpPost } from "../support/mcp.ts";

const CHECK = "toolgate_check_status";

/** refund_order keyed by order_id across the tenant, customer_id bound from the run's context. */
function refundTool(url: string, extra: Record<string, unknown> = {}) {
  return manifest({
    url,
    name: unique("refund_order"),
    description: "Refund an order.",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        order_id: { type: "string" },
        amount: { type: "integer", exclusiveMinimum: 0 },
        customer_id: { type: "string" },
      },
      required: ["order_id", "amount", "customer_id"],
    },
    bind: { customer_id: "context.customer_id" },
    request: { method: "POST", url: `${url}/refunds` },
    operation_scope: "tenant",
    operation_key: ["order_id"],
    ...extra,
  });
}

async function runFor(tool: string, customerId: string) {
  const run = await api("POST", "/v1/runs", {
    user: { id: `u_${customerId}`, scopes: [] },
    tools: [tool],
    context: { customer_id: customerId },
  });
  expect(run.status).toBe(201);
  return { runId: run.body.run_id as string, token: run.body.run_token as string };
}

const check = (runId: string, operationId: string) =>
  turn(runId, [{ id: unique("chk"), name: CHECK, arguments: { operation_id: operationId } }], 0);

describe("a conflicting call from another run (tenant-scoped operation key)", () => {
  it("neither reads the other run's result (check_status) nor cancels its pending operation (run cancel); the approve then executes it once", async () => {
    const up = upstream();
    const tool = refundTool(up.url, { approval: "always" });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const alice = await runFor(tool.name, "cus_ALICE_secret_pii");
    const bob = await runFor(tool.name, "cus_BOB");

    // Alice's refund of order_1 waits for a person; Bob's model proposes the same order (another amount).
    const a1 = await turn(
      alice.runId,
      [{ id: "a1", name: tool.name, arguments: { order_id: "order_1", amount: 10 } }],
      0,
    );
    expect(a1.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    const opX = a1.body.results[0].operation_id as string;
    const b1 = await turn(
      bob.runId,
      [{ id: "b1", name: tool.name, arguments: { order_id: "order_1", amount: 99 } }],
      0,
    );
    expect(b1.body.results[0]).toMatchObject({
      status: "rejected",
      code: "idempotency_conflict",
      operation_id: opX,
    });
    expect((await api("POST", `/v1/operations/${opX}/approve`, {})).status).toBe(200);
    expect((await operation(opX, 5)).body.result).toMatchObject({ status: "succeeded" });

    // Bob's check_status on Alice's operation: not found, and nothing of Alice's result.
    const peeking = await check(bob.runId, opX);
    expect(peeking.body.results[0]).toMatchObject({ status: "rejected", code: "not_found" });
    expect(JSON.stringify(peeking.body)).not.toContain("cus_ALICE_secret_pii");
    // Alice's own check_status still reads it.
    expect((await check(alice.runId, opX)).body.results[0].result).toMatchObject({
      status: "succeeded",
      operation_id: opX,
      result: { customer_id: "cus_ALICE_secret_pii", order_id: "order_1", amount: 10 },
    });

    // Alice's order_2 waits for a person; Bob conflicts with it; then Bob's run is cancelled.
    const a2 = await turn(
      alice.runId,
      [{ id: "a2", name: tool.name, arguments: { order_id: "order_2", amount: 20 } }],
      0,
    );
    const opY = a2.body.results[0].operation_id as string;
    expect(a2.body.results[0].status).toBe("awaiting_approval");
    const b2 = await turn(
      bob.runId,
      [{ id: "b2", name: tool.name, arguments: { order_id: "order_2", amount: 1 } }],
      0,
    );
    expect(b2.body.results[0]).toMatchObject({ code: "idempotency_conflict", operation_id: opY });
    const cancelled = await api("POST", `/v1/runs/${bob.runId}/cancel`);
    expect(cancelled.body.status).toBe("cancelled");

    const y = await operation(opY);
    expect(y.body).toMatchObject({ run_id: alice.runId, phase: "awaiting_approval" });
    expect(
      (await api("GET", `/v1/runs/${alice.runId}/turns/${a2.body.turn_id}`)).body.results[0],
    ).toMatchObject({ status: "awaiting_approval", operation_id: opY });
    // Bob's conflicting call keeps its answer (it was never pending).
    expect(
      (await api("GET", `/v1/runs/${bob.runId}/turns/${b2.body.turn_id}`)).body.results[0],
    ).toMatchObject({ status: "rejected", code: "idempotency_conflict" });
    expect((await api("POST", `/v1/operations/${opY}/approve`, {})).status).toBe(200);
    expect((await operation(opY, 5)).body.result).toMatchObject({
      status: "succeeded",
      result: { order_id: "order_2", amount: 20, customer_id: "cus_ALICE_secret_pii" },
    });
    const state = await up.state();
    expect(state.effects.map((e) => [e.body.order_id, e.body.amount])).toEqual([
      ["order_1", 10],
      ["order_2", 20],
    ]);
  });

  it("a cancel that reached an operation before it existed binds to its run: another run's submit runs normally", async () => {
    const up = upstream();
    const tool = refundTool(up.url, { approval: "always" });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const alice = await runFor(tool.name, "cus_alice");
    const bob = await runFor(tool.name, "cus_bob");
    const { tenantId } = await testTenant();
    // Bob's run closed a call of order_4 before its dispatch reached the operation (the RunObject's
    // close, called here by RPC: the API cannot time that race). Order keys are tenant-wide, so it is
    // the operation Alice's refund of order_4 will use.
    const frozen = await freezeCall({
      tenantId,
      runId: bob.runId,
      tool: tool.name,
      risk: "write",
      scope: "tenant",
      operationKey: ["order_id"],
      input: { order_id: "order_4", amount: 40, customer_id: "cus_bob" },
      callId: "b4",
    });
    const early = await opStub(frozen.operationId).cancel(tenantId, "bob's run", bob.runId);
    expect(early.ok).toBe(false);
    const a4 = await turn(
      alice.runId,
      [{ id: "a4", name: tool.name, arguments: { order_id: "order_4", amount: 44 } }],
      0,
    );
    expect(a4.body.results[0]).toMatchObject({
      status: "awaiting_approval",
      operation_id: frozen.operationId,
    });
    expect((await api("POST", `/v1/operations/${frozen.operationId}/approve`, {})).status).toBe(
      200,
    );
    expect((await operation(frozen.operationId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.order_id)).toEqual(["order_4"]);
  });
});

describe("an MCP call that joined another run's operation (identical input)", () => {
  it("notifications/cancelled closes only that call: the other run's write finishes, not late, reported to its own turn", async () => {
    const up = upstream();
    // Keyed by the whole input: two runs for the same customer proposing the same charge share it.
    const tool = manifest({
      url: up.url,
      name: unique("charge"),
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          amount: { type: "integer", exclusiveMinimum: 0 },
          currency: { enum: ["usd"] },
          customer_id: { type: "string" },
        },
        required: ["amount", "currency", "customer_id"],
      },
      bind: { customer_id: "context.customer_id" },
      operation_scope: "tenant",
      timeout_ms: 10_000,
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const first = await runFor(tool.name, "cus_1");
    const second = await runFor(tool.name, "cus_1");
    await up.script({ kind: "slow", delayMs: 3000 });
    const args = { amount: 7, currency: "usd" };
    const started = await turn(first.runId, [{ id: "c1", name: tool.name, arguments: args }], 0);
    const op = started.body.results[0].operation_id as string;
    await up.waitForRequests(1);

    // The second run's MCP call joins the executing operation and waits for it.
    const inFlight = callTool(second.token, tool.name, args, "legacy", "req-join");
    // Its turn is committed once its usage counts it (then the cancel finds the call in flight).
    for (let i = 0; i < 500; i++)
      if ((await api("GET", `/v1/runs/${second.runId}`)).body.usage.turns === 1) break;
    const cancel = await mcpPost(
      second.token,
      { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "req-join" } },
      { "MCP-Protocol-Version": LEGACY },
    );
    expect(cancel.status).toBe(202);
    const result = (await inFlight).body.result;
    expect(result.structuredContent).toMatchObject({ status: "cancelled", operation_id: op });

    const done = await operation(op, 10);
    expect(done.body).toMatchObject({
      run_id: first.runId,
      phase: "recorded",
      late: false,
      result: { status: "succeeded" },
    });
    const events = (await trace(first.runId)).filter((e) => e.operation_id === op);
    expect(events.map((e) => e.type)).toContain("recorded");
    expect(events.map((e) => e.type)).not.toContain("cancel_requested");
    expect(
      (await api("GET", `/v1/runs/${first.runId}/turns/${started.body.turn_id}?wait=5`)).body
        .results[0],
    ).toMatchObject({ status: "succeeded", operation_id: op });
    expect((await up.state()).effects).toHaveLength(1);
  });
});
