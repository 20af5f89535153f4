// Resource locks through the public API, measured at the upstream: writes on one resource never
// overlap and run in FIFO order under increasing fencing tokens; a write whose outcome is unknown
// keeps the resource locked until it is settled; a crashed holder keeps its lease through its
// recovery; different resources run in parallel.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { lockStub } from "../../src/durable/stubs.ts";
import type { Env } from "../../src/durable/env.ts";
import type { LockState } from "../../src/domain/lock.ts";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  opStub,
  testTenant,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

const schema = {
  type: "object",
  additionalProperties: false,
  properties: { order_id: { type: "string" }, amount: { type: "integer" } },
  required: ["order_id", "amount"],
};

async function lockedRun(url: string, overrides: Record<string, unknown> = {}) {
  const tool = manifest({
    url,
    input_schema: schema,
    resource: "order:{order_id}",
    request: { method: "POST", url: `${url}/orders/{order_id}/refunds` },
    timeout_ms: 5_000,
    ...overrides,
  });
  const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
  expect(put.status, JSON.stringify(put.body)).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] });
  return { name: tool.name as string, runId: run.body.run_id as string };
}
const call = (name: string, orderId: string, amount: number, id = unique("c")) => ({
  id,
  name,
  arguments: { order_id: orderId, amount },
});

describe("resource locks", () => {
  it("three writes on one resource against a slow upstream never overlap; FIFO; the fencing token increases", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url);
    await up.script(
      { kind: "slow", delayMs: 300 },
      { kind: "slow", delayMs: 300 },
      { kind: "slow", delayMs: 300 },
    );
    const res = await turn(
      runId,
      [call(name, "ord_1", 1), call(name, "ord_1", 2), call(name, "ord_1", 3)],
      20,
    );
    expect(res.body.results.map((r: any) => r.status)).toEqual([
      "succeeded",
      "succeeded",
      "succeeded",
    ]);
    const state = await up.state();
    expect(state.maxInFlight["/orders/ord_1/refunds"]).toBe(1);
    const tokens = state.requests.map((r) => Number(r.fencingToken));
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(3);
    // FIFO: the order of the grants is the order the lock queued them in.
    const events = await trace(runId);
    const queuedOrder = events.filter((e) => e.type === "awaiting_lock").map((e) => e.operation_id);
    const grantedOrder = events.filter((e) => e.type === "lock_granted").map((e) => e.operation_id);
    expect(grantedOrder).toHaveLength(3);
    expect(new Set(queuedOrder)).toEqual(new Set(grantedOrder));
    const grantTokens = events.filter((e) => e.type === "lock_granted").map((e) => e.fencing_token);
    expect(grantTokens).toEqual(tokens);
  });

  it("different resources run in parallel", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url);
    await up.script({ kind: "slow", delayMs: 400 }, { kind: "slow", delayMs: 400 });
    const res = await turn(runId, [call(name, "ord_a", 1), call(name, "ord_b", 1)], 20);
    expect(res.body.results.map((r: any) => r.status)).toEqual(["succeeded", "succeeded"]);
    expect((await up.state()).maxInFlight["*"]).toBe(2);
  });

  it("a write whose outcome is unknown keeps the resource locked, visibly, until a person resolves it; then the next runs", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url, {
      idempotency: { mode: "none" },
      timeout_ms: 500,
    });
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [call(name, "ord_9", 1)], 5);
    const blocker = first.body.results[0];
    expect(blocker).toMatchObject({ status: "outcome_unknown", code: "timeout_unknown" });
    const second = await turn(runId, [call(name, "ord_9", 2)], 1);
    expect(second.body.results[0]).toMatchObject({ status: "pending", code: "resource_locked" });
    expect(second.body.results[0].message).toContain(blocker.operation_id);
    expect((await up.state()).requests).toHaveLength(1);
    // The lease's expiry asks the holder, which is still unsettled: nothing changes.
    const resolved = await api("POST", `/v1/operations/${blocker.operation_id}/resolve`, {
      outcome: "succeeded",
      reason: "the shop shows the refund",
    });
    expect(resolved.body.phase).toBe("recorded");
    const after = await api("GET", `/v1/runs/${runId}/turns/${second.body.turn_id}?wait=10`);
    expect(after.body.results[0].status).toBe("succeeded");
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(state.maxInFlight["/orders/ord_9/refunds"]).toBe(1);
  });

  it("a holder aborted mid-attempt keeps the lease through its recovery", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url, { timeout_ms: 5_000 });
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [call(name, "ord_7", 1)], 0);
    const holder = first.body.results[0].operation_id as string;
    await up.waitForRequests(1);
    await runInDurableObject(opStub(holder), (_i: unknown, state: DurableObjectState) =>
      state.abort("simulated crash"),
    ).catch(() => {});
    const second = await turn(runId, [call(name, "ord_7", 2)], 1);
    expect(second.body.results[0]).toMatchObject({ status: "pending", code: "resource_locked" });
    expect(await fireAlarm(holder)).toBe(true); // watchdog: crash_unknown, resend scheduled — still holding
    expect((await operation(holder)).body.result.code).toBe("crash_unknown");
    expect(
      (await api("GET", `/v1/runs/${runId}/turns/${second.body.turn_id}`)).body.results[0].code,
    ).toBe("resource_locked");
    expect(await fireAlarm(holder)).toBe(true); // resend with the same key: the upstream replays
    expect((await operation(holder)).body.result.status).toBe("succeeded");
    const after = await api("GET", `/v1/runs/${runId}/turns/${second.body.turn_id}?wait=10`);
    expect(after.body.results[0].status).toBe("succeeded");
    const state = await up.state();
    expect(state.effects).toHaveLength(2);
    expect(state.requests.map((r) => r.fencingToken)).toEqual(["1", "1", "2"]);
  });

  it("cancelling a queued write withdraws it; the resource goes to the next one", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url);
    // Slow enough that the second turn and the cancel land while the first holds the lease, even
    // on a loaded machine (500 ms was not: the first finished and the second got the lock).
    await up.script({ kind: "slow", delayMs: 2500 });
    const first = turn(runId, [call(name, "ord_5", 1, "c1")], 10);
    await up.waitForRequests(1);
    const second = await turn(runId, [call(name, "ord_5", 2, "c2")], 0);
    const queued = second.body.results[0].operation_id;
    expect((await api("POST", `/v1/operations/${queued}/cancel`)).body.result.status).toBe(
      "cancelled",
    );
    expect((await first).body.results[0].status).toBe("succeeded");
    const third = await turn(runId, [call(name, "ord_5", 3, "c3")], 10);
    expect(third.body.results[0].status).toBe("succeeded");
    expect((await up.state()).requests.map((r) => r.body.amount)).toEqual([1, 3]);
  });

  it("a lost grant notice is repaired: by the holder's recheck alarm, or by the lease expiry", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url);
    const { tenantId } = await testTenant();
    const typed = env as unknown as Env;
    for (const [index, repair] of (["recheck_alarm", "lease_expiry"] as const).entries()) {
      const orderId = unique("ord");
      const resource = `order:${orderId}`;
      const raw = typed.LOCKS.get(typed.LOCKS.idFromName(`${tenantId}:${resource}`));
      // Someone else holds the resource: the write queues behind it.
      const blocker = { tenantId, resource, operationId: "op_blocker", leaseMs: 60_000 };
      expect((await lockStub(typed, tenantId, resource).acquire(blocker)).ok).toBe(true);
      const queued = await turn(runId, [call(name, orderId, 1)], 0);
      expect(queued.body.results[0]).toMatchObject({ status: "pending", code: "resource_locked" });
      const opId = queued.body.results[0].operation_id as string;
      // The blocker's release and the grant to this write are committed, and the notice never
      // arrives (the lock died right after its commit): the lock's row as handOver leaves it.
      await runInDurableObject(raw, (_instance: unknown, state: DurableObjectState) => {
        const row = state.storage.sql.exec<{ state: string }>("SELECT state FROM lock").one();
        const lock = JSON.parse(row.state) as LockState;
        expect(lock.queue.map((w) => w.operationId)).toEqual([opId]);
        const granted: LockState = {
          holder: {
            operationId: opId,
            fencingToken: 2,
            leaseMs: 60_000,
            leaseExpiresAtMs: repair === "lease_expiry" ? 1 : Date.now() + 60_000,
            grantedAtMs: Date.now(),
          },
          queue: [],
          lastToken: 2,
        };
        state.storage.sql.exec("UPDATE lock SET state = ?", JSON.stringify(granted));
      });
      const pending = await api("GET", `/v1/runs/${runId}/turns/${queued.body.turn_id}`);
      expect(pending.body.results[0]).toMatchObject({ status: "pending", code: "resource_locked" });
      expect((await up.state()).requests).toHaveLength(index);
      if (repair === "recheck_alarm") {
        // The operation's awaiting_lock alarm asks the lock again; the holder gets its token back.
        expect(await fireAlarm(opId)).toBe(true);
      } else {
        // The lease ran out: the lock asks the holder, which is active, and repeats the notice.
        expect(await runDurableObjectAlarm(raw)).toBe(true);
      }
      const after = await api("GET", `/v1/runs/${runId}/turns/${queued.body.turn_id}?wait=10`);
      expect(after.body.results[0].status).toBe("succeeded");
      const state = await up.state();
      expect(state.requests).toHaveLength(index + 1);
      expect(state.requests[index]!.fencingToken).toBe("2");
      const view = await lockStub(typed, tenantId, resource).status(tenantId);
      expect(view).toMatchObject({ ok: true, value: { holder: null, queue: [], last_token: 2 } });
    }
  });

  it("pruning a locked write releases its lease first: a no-op once released, a handoff when the release was lost", async () => {
    const up = upstream();
    const { name, runId } = await lockedRun(up.url);
    const { tenantId } = await testTenant();
    const typed = env as unknown as Env;
    const lockOf = (orderId: string) => lockStub(typed, tenantId, `order:${orderId}`);
    const released = await turn(runId, [call(name, "ord_r", 1)]);
    const lost = await turn(runId, [call(name, "ord_l", 1)]);
    const [releasedOp, lostOp] = [released, lost].map((t) => {
      expect(t.body.results[0].status).toBe("succeeded");
      return t.body.results[0].operation_id as string;
    }) as [string, string];
    await lockOf("ord_l").acquire({
      tenantId,
      resource: "order:ord_l",
      operationId: lostOp,
      leaseMs: 60_000,
    }); // the holder again, as if its release never arrived…
    await lockOf("ord_l").acquire({
      tenantId,
      resource: "order:ord_l",
      operationId: "op_next",
      leaseMs: 60_000,
    }); // …with a write waiting behind it
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000); // past TOOLGATE_RETENTION_MS
      expect(await fireAlarm(releasedOp)).toBe(true);
      expect(await fireAlarm(lostOp)).toBe(true);
    } finally {
      vi.useRealTimers();
    }
    for (const op of [releasedOp, lostOp])
      expect((await operation(op)).body).toMatchObject({ code: "operation_pruned" });
    expect(await lockOf("ord_r").status(tenantId)).toMatchObject({
      ok: true,
      value: { holder: null, last_token: 1 },
    });
    expect(await lockOf("ord_l").status(tenantId)).toMatchObject({
      ok: true,
      value: { holder: { operation_id: "op_next", fencing_token: 3 }, queue: [] },
    });
  });

  it("a resource on a read tool is refused; the template's values are URL-encoded into the key", async () => {
    const up = upstream();
    const read = manifest({
      url: up.url,
      risk: "read",
      input_schema: schema,
      resource: "order:{order_id}",
    });
    expect((await api("PUT", `/v1/tools/${read.name}`, read)).body.code).toBe("invalid_manifest");
    const { name, runId } = await lockedRun(up.url);
    await up.script({ kind: "slow", delayMs: 300 }, { kind: "slow", delayMs: 300 });
    // "a:b" and "a%3Ab" must be two resources, not one.
    const res = await turn(runId, [call(name, "a:b", 1), call(name, "a%3Ab", 1)], 20);
    expect(res.body.results.map((r: any) => r.status)).toEqual(["succeeded", "succeeded"]);
    expect((await up.state()).maxInFlight["*"]).toBe(2);
  });
});
