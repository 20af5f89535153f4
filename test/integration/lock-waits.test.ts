// A write queued behind a resource whose holder waits for a person (an unknown outcome nobody has
// resolved yet) must not poll for ever: each recheck asks its run, so a run past its deadline takes
// its write out of the queue, recorded with that refusal and nothing sent.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { lockStub } from "../../src/durable/stubs.ts";
import type { Env } from "../../src/durable/env.ts";
import { api, fireAlarm, manifest, operation, testTenant, turn, upstream } from "../support/api.ts";

const runObject = (runId: string) => (env as any).RUNS.get((env as any).RUNS.idFromName(runId));

/**
 * Moves the run's start back by `ms`, as if that much time had passed (its deadline counts from
 * it); then restarts the run object, which keeps the run row it wrote in memory.
 */
const age = async (runId: string, ms: number) => {
  await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) => {
    const row = state.storage.sql.exec<{ data: string }>("SELECT data FROM run").one();
    const run = JSON.parse(row.data) as { createdAtMs: number };
    run.createdAtMs -= ms;
    state.storage.sql.exec("UPDATE run SET data = ?", JSON.stringify(run));
  });
  await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) =>
    state.abort("reload"),
  ).catch(() => {});
};

describe("waiting for a resource lock", () => {
  it("a waiter whose run passed its deadline leaves the queue at its next recheck, recorded budget_exhausted/deadline, nothing sent", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      idempotency: { mode: "none" },
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { order_id: { type: "string" }, amount: { type: "integer" } },
        required: ["order_id", "amount"],
      },
      resource: "order:{order_id}",
      request: { method: "POST", url: `${up.url}/orders/{order_id}/refunds` },
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const newRun = async (budgets: Record<string, number> = {}) =>
      (await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name], budgets })).body
        .run_id as string;
    const refund = (amount: number) => ({
      id: `c${amount}`,
      name: tool.name,
      arguments: { order_id: "ord_1", amount },
    });

    // The holder: its response never arrives and nothing can look it up, so it waits for a person.
    await up.script({ kind: "commit_then_hang" });
    const holder = (await turn(await newRun(), [refund(1)])).body.results[0];
    expect(holder).toMatchObject({ status: "outcome_unknown" });

    const waiterRun = await newRun({ max_duration_ms: 3_600_000 });
    const queued = (await turn(waiterRun, [refund(2)], 0)).body.results[0];
    expect(queued).toMatchObject({ status: "pending", code: "resource_locked" });
    const waiter = queued.operation_id as string;

    await age(waiterRun, 2 * 3_600_000);
    expect(await fireAlarm(waiter)).toBe(true);
    expect((await operation(waiter)).body.result).toMatchObject({
      status: "budget_exhausted",
      code: "deadline",
    });
    const { tenantId } = await testTenant();
    const lock = await lockStub(env as unknown as Env, tenantId, "order:ord_1").status(tenantId);
    expect(lock.ok && lock.value.holder?.operation_id).toBe(holder.operation_id);
    expect(lock.ok && lock.value.queue).toEqual([]);
    expect((await up.state()).requests).toHaveLength(1);
  });
});

type FeedEvent = { type: string; operation_id: string | null; tool: string | null; data: any };
const lockEvents = async (operationId: string): Promise<FeedEvent[]> => {
  const res = await api("GET", "/v1/events?type=lock.waiting_long&limit=500");
  expect(res.status).toBe(200);
  return (res.body.events as FeedEvent[]).filter((e) => e.operation_id === operationId);
};
/** Polls the feed (bounded: the queue consumer runs in the pool) until `n` events of the op stand. */
const lockEventsUntil = async (operationId: string, n: number) => {
  let events: FeedEvent[] = [];
  for (let i = 0; i < 200; i++) {
    events = await lockEvents(operationId);
    if (events.length >= n) return events;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return events;
};
const opObject = (id: string) =>
  (env as any).OPERATIONS.get((env as any).OPERATIONS.idFromName(id));
/**
 * Moves the waiter's lock request back by `ms`, as if it had waited that much longer; then restarts
 * the object (its log's newest row is kept in memory as it wrote it: a row changed behind its back
 * is seen after a restart).
 */
const ageWait = async (operationId: string, ms: number) => {
  await ageRow(operationId, ms);
  await runInDurableObject(opObject(operationId), (_i: unknown, state: DurableObjectState) =>
    state.abort("reload"),
  ).catch(() => {});
};
const ageRow = (operationId: string, ms: number) =>
  runInDurableObject(opObject(operationId), (_i: unknown, state: DurableObjectState) => {
    const row = state.storage.sql
      .exec<{ seq: number; state: string }>(
        "SELECT seq, state FROM op_log ORDER BY seq DESC LIMIT 1",
      )
      .one();
    const s = JSON.parse(row.state) as { phase: string; requestedAtMs: number };
    expect(s.phase).toBe("awaiting_lock");
    s.requestedAtMs -= ms;
    state.storage.sql.exec("UPDATE op_log SET state = ? WHERE seq = ?", JSON.stringify(s), row.seq);
  });

describe("lock.waiting_long", () => {
  it("a write queued past the threshold reports exactly one lock.waiting_long (resource, blocked_by, waited_ms, tool); later rechecks add none", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      idempotency: { mode: "none" },
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { order_id: { type: "string" }, amount: { type: "integer" } },
        required: ["order_id", "amount"],
      },
      resource: "order:{order_id}",
      request: { method: "POST", url: `${up.url}/orders/{order_id}/refunds` },
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const newRun = async () =>
      (await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] })).body
        .run_id as string;
    const refund = (amount: number) => ({
      id: `c${amount}`,
      name: tool.name,
      arguments: { order_id: "ord_wl", amount },
    });
    await up.script({ kind: "commit_then_hang" });
    const holder = (await turn(await newRun(), [refund(1)])).body.results[0];
    expect(holder).toMatchObject({ status: "outcome_unknown" });
    const queued = (await turn(await newRun(), [refund(2)], 0)).body.results[0];
    expect(queued).toMatchObject({ status: "pending", code: "resource_locked" });
    const waiter = queued.operation_id as string;

    // A recheck before the threshold reports nothing.
    expect(await fireAlarm(waiter)).toBe(true);
    // Past it: the recheck reports it once.
    await ageWait(waiter, 120_000);
    expect(await fireAlarm(waiter)).toBe(true);
    const events = await lockEventsUntil(waiter, 1);
    expect(events).toHaveLength(1);
    expect(events[0]!.tool).toBe(tool.name);
    expect(events[0]!.data).toEqual({
      resource: "order:ord_wl",
      blocked_by: holder.operation_id,
      waited_ms: expect.any(Number),
      created_at_ms: expect.any(Number),
    });
    expect(events[0]!.data.waited_ms).toBeGreaterThanOrEqual(120_000);

    // Later rechecks, further past it: still waiting, nothing more reported (no event row written).
    await ageWait(waiter, 600_000);
    expect(await fireAlarm(waiter)).toBe(true);
    expect(await fireAlarm(waiter)).toBe(true);
    const unsent = await runInDurableObject(
      opObject(waiter),
      (_i: unknown, state: DurableObjectState) =>
        state.storage.sql
          .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE name = 'op_outbox'")
          .toArray().length === 0
          ? 0
          : state.storage.sql
              .exec<{ n: number }>("SELECT COUNT(*) AS n FROM op_outbox WHERE kind LIKE 'event:%'")
              .one().n,
    );
    expect(unsent).toBe(0);
    expect(await lockEvents(waiter)).toHaveLength(1);
    expect((await operation(waiter)).body.status).not.toBe("recorded");
    expect((await up.state()).requests).toHaveLength(1);
  });
});
