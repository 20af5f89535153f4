// ResourceLockObject driven through its stub (the lock has no HTTP surface of its own): FIFO
// grants with increasing fencing tokens, tenant scoping, eviction and crashes (storage alone
// carries the queue and the tokens), and lease expiry by alarm, which asks the holder operation.
// The lease end is moved into the past in storage (a scripted clock), never waited for.
import { env } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { lockStub } from "../../src/durable/stubs.ts";
import type { Env } from "../../src/durable/env.ts";
import { manifest, setup, turn, unique, upstream } from "../support/api.ts";

const LEASE_MS = 60_000;
const tenantId = "ten_01TESTTENANT0000000000000A";
const otherTenant = "ten_01TESTTENANT0000000000000B";

/** Fresh stubs on every use: a stub to an aborted object stays broken. */
function lock(resource = unique("order:ord")) {
  const typed = env as unknown as Env;
  return {
    resource,
    get stub() {
      return lockStub(typed, tenantId, resource);
    },
    get raw() {
      return typed.LOCKS.get(typed.LOCKS.idFromName(`${tenantId}:${resource}`));
    },
    acquire(operationId: string, leaseMs = LEASE_MS) {
      return this.stub.acquire({ tenantId, resource, operationId, leaseMs });
    },
    release(operationId: string) {
      return this.stub.release({ tenantId, operationId });
    },
    async status() {
      const view = await this.stub.status(tenantId);
      if (!view.ok) throw new Error(`status: ${view.error.code}`);
      return view.value;
    },
    /** Moves the holder's lease end into the past, as if the lease ran out. */
    expireLease() {
      return runInDurableObject(this.raw, (_instance: unknown, state: DurableObjectState) => {
        const row = state.storage.sql.exec<{ state: string }>("SELECT state FROM lock").one();
        const parsed = JSON.parse(row.state);
        parsed.holder.leaseExpiresAtMs = 1;
        state.storage.sql.exec("UPDATE lock SET state = ?", JSON.stringify(parsed));
      });
    },
    /** Kills the instance (memory gone, storage kept), as a crash would. */
    crash() {
      return runInDurableObject(this.raw, (_instance: unknown, state: DurableObjectState) =>
        state.abort("simulated crash"),
      ).catch(() => {});
    },
  };
}

describe("ResourceLockObject", () => {
  it("grants FIFO with strictly increasing fencing tokens; an acquire repeated by the holder keeps its token", async () => {
    const l = lock();
    expect(await l.acquire("op_a")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 1 },
    });
    expect(await l.acquire("op_b")).toEqual({
      ok: true,
      value: { state: "queued", position: 1, blockedBy: "op_a" },
    });
    expect(await l.acquire("op_c")).toEqual({
      ok: true,
      value: { state: "queued", position: 2, blockedBy: "op_a" },
    });
    expect(await l.acquire("op_a")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 1 },
    });
    expect(await l.acquire("op_c")).toEqual({
      ok: true,
      value: { state: "queued", position: 2, blockedBy: "op_a" },
    });

    expect(await l.release("op_a")).toEqual({ ok: true, value: { was: "held" } });
    expect(await l.acquire("op_b")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 2 },
    });
    expect(await l.release("op_c")).toEqual({ ok: true, value: { was: "queued" } });
    expect(await l.release("op_z")).toEqual({ ok: true, value: { was: "none" } });
    expect(await l.release("op_b")).toEqual({ ok: true, value: { was: "held" } });
    expect(await l.status()).toMatchObject({ holder: null, queue: [], last_token: 2 });
    // Free again: the next grant continues from the last token, never reusing one.
    expect(await l.acquire("op_a")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 3 },
    });
  });

  it("concurrent acquires: exactly one holder, the rest queued at distinct places, granted in that order", async () => {
    const l = lock();
    const ops = Array.from({ length: 20 }, (_, i) => `op_${String(i).padStart(2, "0")}`);
    const replies = await Promise.all(ops.map((op) => l.acquire(op)));
    const held = replies.filter((r) => r.ok && r.value.state === "held");
    expect(held).toEqual([{ ok: true, value: { state: "held", fencingToken: 1 } }]);
    const positions = replies.flatMap((r) =>
      r.ok && r.value.state === "queued" ? [r.value.position] : [],
    );
    expect(positions.sort((a, b) => a - b)).toEqual(Array.from({ length: 19 }, (_, i) => i + 1));
    const line = (await l.status()).queue.map((w) => w.operation_id);
    let holder = (await l.status()).holder!.operation_id;
    for (const [index, next] of line.entries()) {
      expect(await l.release(holder)).toEqual({ ok: true, value: { was: "held" } });
      expect(await l.acquire(next)).toEqual({
        ok: true,
        value: { state: "held", fencingToken: index + 2 },
      });
      holder = next;
    }
  });

  it("is tenant-scoped: another tenant's id sees not_found and changes nothing", async () => {
    const l = lock();
    await l.acquire("op_a");
    await l.acquire("op_b");
    expect(await l.stub.status(otherTenant)).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
    expect(await l.stub.release({ tenantId: otherTenant, operationId: "op_a" })).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
    expect(
      await l.stub.renew({ tenantId: otherTenant, operationId: "op_a", leaseMs: LEASE_MS }),
    ).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(
      await l.stub.acquire({
        tenantId: otherTenant,
        resource: l.resource,
        operationId: "op_x",
        leaseMs: LEASE_MS,
      }),
    ).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(await l.status()).toMatchObject({
      holder: { operation_id: "op_a", fencing_token: 1 },
      queue: [{ operation_id: "op_b" }],
    });
    // A lock that was never used has nothing to show (reads create no storage).
    expect(await lock().stub.status(tenantId)).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
  });

  it("renew: only the holder, with typed refusals", async () => {
    const l = lock();
    await l.acquire("op_a");
    await l.acquire("op_b");
    const renewed = await l.stub.renew({ tenantId, operationId: "op_a", leaseMs: 120_000 });
    expect(renewed).toMatchObject({ ok: true, value: { fencingToken: 1 } });
    expect(await l.stub.renew({ tenantId, operationId: "op_b", leaseMs: 1_000 })).toMatchObject({
      ok: false,
      error: { code: "not_holder", holder: "op_a" },
    });
    expect(await l.acquire("op_c", 0)).toMatchObject({
      ok: false,
      error: { code: "invalid_request" },
    });
  });

  it("eviction and crashes keep the holder, the queue and the tokens", async () => {
    const l = lock();
    await l.acquire("op_a");
    await l.release("op_a");
    await l.acquire("op_b");
    await l.acquire("op_c");
    await l.acquire("op_d");
    await evictDurableObject(l.raw);
    expect(await l.status()).toMatchObject({
      holder: { operation_id: "op_b", fencing_token: 2 },
      queue: [{ operation_id: "op_c" }, { operation_id: "op_d" }],
      last_token: 2,
    });
    await l.crash();
    expect(await l.release("op_b")).toEqual({ ok: true, value: { was: "held" } });
    await evictDurableObject(l.raw);
    expect(await l.acquire("op_c")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 3 },
    });
    expect(await l.acquire("op_d")).toEqual({
      ok: true,
      value: { state: "queued", position: 1, blockedBy: "op_c" },
    });
  });

  it("lease expiry: a holder with no operation (gone) is released and the next is granted", async () => {
    const l = lock();
    await l.acquire("op_vanished");
    await l.acquire("op_next");
    await l.expireLease();
    await l.crash();
    expect(await runDurableObjectAlarm(l.raw)).toBe(true);
    expect(await l.status()).toMatchObject({
      holder: { operation_id: "op_next", fencing_token: 2 },
      queue: [],
      last_token: 2,
    });
    expect(await l.acquire("op_next")).toEqual({
      ok: true,
      value: { state: "held", fencingToken: 2 },
    });
  });

  it("lease expiry: an alarm before the lease ends changes nothing", async () => {
    const l = lock();
    await l.acquire("op_vanished");
    await l.acquire("op_next");
    expect(await runDurableObjectAlarm(l.raw)).toBe(true);
    expect(await l.status()).toMatchObject({
      holder: { operation_id: "op_vanished", fencing_token: 1 },
      queue: [{ operation_id: "op_next" }],
    });
  });

  it("lease expiry: a live operation (retry scheduled) is active and keeps the lock; a settled one hands it on", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 429 });
    const waiting = await turn(runId, [
      { id: "c1", name, arguments: { amount: 100, currency: "usd" } },
    ]);
    expect(waiting.body.results[0]).toMatchObject({ status: "pending" });
    const activeOp = waiting.body.results[0].operation_id as string;
    const done = await turn(runId, [
      { id: "c2", name, arguments: { amount: 200, currency: "usd" } },
    ]);
    expect(done.body.results[0]).toMatchObject({ status: "succeeded" });
    const settledOp = done.body.results[0].operation_id as string;

    const l = lock();
    await l.acquire(activeOp);
    await l.acquire(settledOp);
    for (let round = 0; round < 3; round++) {
      await l.expireLease();
      expect(await runDurableObjectAlarm(l.raw)).toBe(true);
      const view = await l.status();
      expect(view.holder).toMatchObject({ operation_id: activeOp, fencing_token: 1 });
      expect(Date.parse(view.holder!.lease_expires_at)).toBeGreaterThan(Date.now());
      expect(view.queue.map((w) => w.operation_id)).toEqual([settledOp]);
    }

    // The settled operation as holder: expiry asks it, it answers "settled", the lock is freed.
    const m = lock();
    await m.acquire(settledOp);
    await m.acquire(activeOp);
    await m.expireLease();
    expect(await runDurableObjectAlarm(m.raw)).toBe(true);
    expect(await m.status()).toMatchObject({
      holder: { operation_id: activeOp, fencing_token: 2 },
      queue: [],
    });
  });
});
