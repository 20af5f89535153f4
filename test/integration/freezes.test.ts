// Freezes and operation controls (issue 34), through the public API with the counting upstream:
// a hold freeze holds new calls and retries with nothing sent, its lift sends each once; refuse ends
// unsent calls with nothing sent; another tool's freeze changes nothing; tenants never see each
// other's freezes; pause/resume/retry-now on a retrying write give one effect in all.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { WAKE_BATCH } from "../../src/durable/tenant/freezes.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { runStub } from "../../src/durable/stubs.ts";
import {
  api,
  fireAlarm,
  manifest,
  newTenant,
  operation,
  setup,
  testTenant,
  turn,
  unique,
  until,
  upstream,
  opStub,
  type UpstreamState,
} from "../support/api.ts";

const tenantAlarm = async () =>
  runDurableObjectAlarm(
    placedStub(env as unknown as Env, "TENANTS", (await testTenant()).tenantId) as any,
  );

const freeze = (id: string, body: Record<string, unknown>, key?: string) =>
  api("PUT", `/v1/freezes/${id}`, body, key ? { Authorization: `Bearer ${key}` } : {});

describe("freezes", { timeout: 30_000 }, () => {
  it("hold on a tool: a new call right after the PUT and a retry are held with 0 upstream requests; the lift sends each once", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    // A retrying write first: its first attempt fails with a 503, a retry is scheduled.
    await up.script({ kind: "status", status: 503 });
    const retrying = (
      await turn(runId, [{ id: "c1", name, arguments: { amount: 1, currency: "usd" } }])
    ).body.results[0];
    // A keyed write's 503 may have applied: it stays an unknown outcome while it retries.
    expect(retrying).toMatchObject({ status: "outcome_unknown" });
    expect((await operation(retrying.operation_id)).body.phase).toBe("retry_scheduled");
    expect((await up.state()).requests).toHaveLength(1);

    const id = unique("fz");
    const put = await freeze(id, { scope: { tool: name }, mode: "hold", reason: "refund spike" });
    expect(put.status).toBe(201);
    expect(put.body.runs_told).toBeGreaterThanOrEqual(1);

    const fresh = (
      await turn(runId, [{ id: "c2", name, arguments: { amount: 2, currency: "usd" } }])
    ).body.results[0];
    expect(fresh).toMatchObject({
      status: "pending",
      code: "frozen",
      freeze: { id, reason: "refund spike" },
    });
    expect(await fireAlarm(retrying.operation_id)).toBe(true);
    const held = (await operation(retrying.operation_id)).body;
    expect(held.phase).toBe("held");
    expect(held.result).toMatchObject({ status: "outcome_unknown", freeze: { id } });
    expect((await up.state()).requests).toHaveLength(1);

    expect((await api("GET", "/v1/freezes")).body.freezes.map((f: any) => f.id)).toContain(id);
    const lifted = await api("DELETE", `/v1/freezes/${id}`);
    expect(lifted.status).toBe(200);
    await tenantAlarm();
    await up.waitForEffects(2);
    const state = await up.state();
    expect(state.effects).toHaveLength(2);
    expect(Object.values(state.effectsByKey).every((n) => n === 1)).toBe(true);
    expect((await operation(fresh.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    expect((await operation(retrying.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    const chain = (await api("GET", "/v1/freezes")).body.chain;
    expect(chain.ok).toBe(true);
  });

  it("refuse: an unsent call ends rejected/frozen with nothing sent; a freeze on another tool changes nothing", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const other = await setup(manifest({ url: up.url }));
    const id = unique("fz");
    expect(
      (await freeze(id, { scope: { tool: name }, mode: "refuse", reason: "stop" })).status,
    ).toBe(201);
    const refused = (
      await turn(runId, [{ id: "c1", name, arguments: { amount: 3, currency: "usd" } }])
    ).body.results[0];
    expect(refused).toMatchObject({ status: "rejected", code: "frozen" });
    const fine = (
      await turn(other.runId, [
        { id: "c1", name: other.name, arguments: { amount: 3, currency: "usd" } },
      ])
    ).body.results[0];
    expect(fine).toMatchObject({ status: "succeeded" });
    expect((await up.state()).requests).toHaveLength(1);
    await api("DELETE", `/v1/freezes/${id}`);
  });

  it("bad input and other tenants: unknown field, past expires_at, missing scope, another tenant's freeze", async () => {
    const id = unique("fz");
    const unknownField = await freeze(id, {
      scope: { tool: "x" },
      mode: "hold",
      reason: "r",
      extra: 1,
    });
    expect(unknownField.status).toBe(400);
    const past = await freeze(id, {
      scope: { tool: "x" },
      mode: "hold",
      reason: "r",
      expires_at: "2000-01-01T00:00:00Z",
    });
    expect(past.body.code).toBe("freeze_expired");
    const weak = await newTenant(["runs:write"]);
    expect(
      (await freeze(id, { scope: { tool: "x" }, mode: "hold", reason: "r" }, weak.key)).status,
    ).toBe(403);
    expect((await freeze(id, { scope: { tool: "x" }, mode: "hold", reason: "r" })).status).toBe(
      201,
    );
    const other = await newTenant(["freezes:write", "runs:read"]);
    const seen = await api("GET", "/v1/freezes", undefined, {
      Authorization: `Bearer ${other.key}`,
    });
    expect(seen.body.freezes).toEqual([]);
    const lift = await api("DELETE", `/v1/freezes/${id}`, undefined, {
      Authorization: `Bearer ${other.key}`,
    });
    expect(lift.status).toBe(404);
    expect((await api("GET", "/v1/freezes")).body.freezes.map((f: any) => f.id)).toContain(id);
    await api("DELETE", `/v1/freezes/${id}`);
  });
});

describe("operation controls", { timeout: 30_000 }, () => {
  it("pause / resume / retry-now on a retrying write: nothing sent while paused, one effect in all", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 503 });
    const op = (await turn(runId, [{ id: "c1", name, arguments: { amount: 5, currency: "usd" } }]))
      .body.results[0];
    const id = op.operation_id as string;
    const paused = await api("POST", `/v1/operations/${id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body.phase).toBe("held");
    await fireAlarm(id).catch(() => false);
    expect((await up.state()).requests).toHaveLength(1);
    const resumed = await api("POST", `/v1/operations/${id}/resume`);
    expect(resumed.body.phase).toBe("retry_scheduled");
    const now = await api("POST", `/v1/operations/${id}/retry-now`);
    expect(now.status).toBe(200);
    await up.waitForEffects(1);
    expect((await operation(id, 5)).body.result).toMatchObject({ status: "succeeded" });
    const again = await api("POST", `/v1/operations/${id}/retry-now`);
    expect(again.body.code).toBe("not_waiting");
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests).toHaveLength(2);
    const events = (await api("GET", `/v1/runs/${runId}/trace`)).body.events.map(
      (e: any) => e.type,
    );
    expect(events).toEqual(expect.arrayContaining(["paused", "resumed", "retry_now"]));
  });

  it("a paused operation killed while paused stays paused: its alarms send nothing; resumed, one effect in all", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 503 });
    const op = (await turn(runId, [{ id: "c1", name, arguments: { amount: 7, currency: "usd" } }]))
      .body.results[0];
    const id = op.operation_id as string;
    expect((await api("POST", `/v1/operations/${id}/pause`)).body.phase).toBe("held");
    // The process dies with the pause committed: the restarted object reads it from storage.
    await crash(opStub(id));
    await fireAlarm(id).catch(() => false);
    await fireAlarm(id).catch(() => false);
    expect((await operation(id)).body.phase).toBe("held");
    expect((await up.state()).requests).toHaveLength(1);
    expect((await api("POST", `/v1/operations/${id}/resume`)).body.phase).toBe("retry_scheduled");
    expect((await api("POST", `/v1/operations/${id}/retry-now`)).status).toBe(200);
    await up.waitForEffects(1);
    await crash(opStub(id));
    await fireAlarm(id).catch(() => false);
    expect((await operation(id, 5)).body.result).toMatchObject({ status: "succeeded" });
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(Object.values(state.effectsByKey)).toEqual([1]);
  });
});

// ── every send point under a freeze (issue 34 "Prove it"), counted at the upstream ───────────────

const tenantStub = async () =>
  placedStub(env as unknown as Env, "TENANTS", (await testTenant()).tenantId) as any;
/** Holds the tenant has been told of and not yet woken (its outbox-fed list, read in place). */
const heldAtTenant = async () =>
  runInDurableObject(
    await tenantStub(),
    (_: unknown, state: DurableObjectState) =>
      state.storage.sql
        .exec<{ n: number }>("SELECT COUNT(*) AS n FROM freeze_holds WHERE woken_at IS NULL")
        .one().n,
  );
/** The tenant's alarms until `done` (a lift wakes a batch per alarm); the last upstream state. */
const liftUntil = async (up: ReturnType<typeof upstream>, effects: number) =>
  until(
    async () => {
      await tenantAlarm();
      return up.state();
    },
    (state) => state.effects.length >= effects,
  );
const crash = (stub: unknown) =>
  runInDurableObject(stub as any, (_: unknown, state: DurableObjectState) =>
    state.abort("crash"),
  ).catch(() => {});

const orderSchema = {
  type: "object",
  additionalProperties: false,
  properties: { order_id: { type: "string" }, amount: { type: "integer" } },
  required: ["order_id", "amount"],
};
/** A refund tool that locks its order (`order:{order_id}`: every tool naming it shares the lock). */
const lockedTool = (url: string, overrides: Record<string, unknown> = {}) =>
  manifest({
    url,
    input_schema: orderSchema,
    resource: "order:{order_id}",
    request: { method: "POST", url: `${url}/orders/{order_id}/refunds` },
    timeout_ms: 5_000,
    ...overrides,
  });
const newRun = async (tools: string[]) =>
  (await api("POST", "/v1/runs", { user: { id: "u1", scopes: ["payments:charge"] }, tools })).body
    .run_id as string;
const refund = (name: string, orderId: string, amount: number) => ({
  id: unique("c"),
  name,
  arguments: { order_id: orderId, amount },
});
const once = (state: UpstreamState) => Object.values(state.effectsByKey).every((n) => n === 1);

describe("every send point under a freeze", { timeout: 30_000 }, () => {
  it("an approval decided during a hold: recorded, 0 requests; sent once after the lift", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      risk: "irreversible_write",
      requires_scopes: ["payments:charge"],
    });
    const { runId, name } = await setup(tool).then(async (s) => ({
      ...s,
      runId: await newRun([tool.name]),
    }));
    const asked = (
      await turn(runId, [{ id: "c1", name, arguments: { amount: 7, currency: "usd" } }], 0)
    ).body.results[0];
    expect(asked).toMatchObject({ status: "awaiting_approval" });
    const id = unique("fz");
    await freeze(id, { scope: { tool: name }, mode: "hold", reason: "audit" });

    const decided = await api("POST", `/v1/operations/${asked.operation_id}/approve`, {});
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ phase: "held", approval: { state: "approved" } });
    expect(decided.body.result).toMatchObject({ code: "frozen", freeze: { id } });
    expect((await up.state()).requests).toHaveLength(0);
    expect(await heldAtTenant()).toBeGreaterThanOrEqual(1);

    await api("DELETE", `/v1/freezes/${id}`);
    const state = await liftUntil(up, 1);
    expect((await operation(asked.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    // Redelivered wakes and alarms send nothing more.
    await tenantAlarm();
    await fireAlarm(asked.operation_id).catch(() => false);
    expect((await up.state()).requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
  });

  it("a lock grant under a hold goes straight back: the next waiter runs, the held write re-asks after the lift; each effect once", async () => {
    const up = upstream();
    const tool = lockedTool(up.url);
    await setup(tool);
    const [runA, runB] = [await newRun([tool.name]), await newRun([tool.name])];
    // A holds the lock through a retry (a keyed 503 keeps its lease); B then C queue behind it.
    await up.script({ kind: "status", status: 503 });
    const a = (await turn(runA, [refund(tool.name, "ord_1", 1)])).body.results[0];
    expect((await operation(a.operation_id)).body.phase).toBe("retry_scheduled");
    const b = (await turn(runB, [refund(tool.name, "ord_1", 2)], 0)).body.results[0];
    const c = (await turn(runA, [refund(tool.name, "ord_1", 3)], 0)).body.results[0];
    expect((await operation(b.operation_id)).body.phase).toBe("awaiting_lock");
    expect((await operation(c.operation_id)).body.phase).toBe("awaiting_lock");

    // Only B's run is frozen; the grant it gets when A finishes is given back to C.
    const id = unique("fz");
    await freeze(id, { scope: { run: runB }, mode: "hold", reason: "this run misbehaves" });
    expect(await fireAlarm(a.operation_id)).toBe(true);
    await up.waitForEffects(2);
    expect((await operation(c.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    const heldB = (await operation(b.operation_id)).body;
    expect(heldB).toMatchObject({ phase: "held", result: { code: "frozen", freeze: { id } } });
    const before = await up.state();
    expect(before.requests.map((r) => r.body.amount)).toEqual([1, 1, 3]);

    await api("DELETE", `/v1/freezes/${id}`);
    const state = await liftUntil(up, 3);
    expect((await operation(b.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    expect(state.effects.map((e) => e.body.amount)).toEqual([1, 3, 2]);
    expect(once(state)).toBe(true);
    expect(state.maxInFlight["/orders/ord_1/refunds"]).toBe(1);
  });

  it("refuse keeps an unknown outcome locked: another tool's write on its resource still waits; status lookups go on", async () => {
    const up = upstream();
    // A refund tool that may leave an unknown (no key: a status lookup settles it).
    const risky = lockedTool(up.url, {
      idempotency: { mode: "none" },
      timeout_ms: 300,
      max_attempts: 2,
      request: {
        method: "POST",
        url: `${up.url}/orders/{order_id}/refunds`,
        headers: { "X-Client-Reference": "{idempotency_key}" },
      },
      reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}`, settle_ms: 0 },
    });
    const other = lockedTool(up.url);
    await setup(risky);
    await setup(other);
    const runId = await newRun([risky.name, other.name]);
    const lookupDown = { kind: "status", status: 503, lookups: true };
    await up.script({ kind: "commit_then_hang" }, lookupDown, lookupDown);
    const a = (await turn(runId, [refund(risky.name, "ord_2", 1)])).body.results[0];
    expect(a).toMatchObject({ status: "outcome_unknown" });
    const b = (await turn(runId, [refund(other.name, "ord_2", 2)], 0)).body.results[0];
    expect(b).toMatchObject({ status: "pending", code: "resource_locked" });

    const id = unique("fz");
    await freeze(id, { scope: { tool: risky.name }, mode: "refuse", reason: "stop refunds" });
    // A lookup under the freeze: a read, it runs (and fails again); A stays unknown, locked.
    const lookups = async () => (await up.state()).requests.filter((r) => r.method === "GET");
    const seen = (await lookups()).length;
    expect(await fireAlarm(a.operation_id)).toBe(true);
    expect((await lookups()).length).toBe(seen + 1);
    expect((await operation(a.operation_id)).body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    await fireAlarm(b.operation_id).catch(() => false);
    expect((await operation(b.operation_id)).body.phase).toBe("awaiting_lock");

    // The next lookup finds A's effect: settled, the lock passes to B, which sends once.
    expect(await fireAlarm(a.operation_id)).toBe(true);
    expect((await operation(a.operation_id)).body.result).toMatchObject({ status: "succeeded" });
    await up.waitForEffects(2);
    expect((await operation(b.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    const posts = (await up.state()).requests.filter((r) => r.method === "POST");
    expect(posts.map((r) => r.body.amount)).toEqual([1, 2]);
    await api("DELETE", `/v1/freezes/${id}`);
  });

  it("refuse on a keyed write that may have applied: no resend, it stays unknown and keeps its lock (never recorded as not sent)", async () => {
    const up = upstream();
    const tool = lockedTool(up.url);
    const other = lockedTool(up.url);
    await setup(tool);
    await setup(other);
    const runId = await newRun([tool.name, other.name]);
    await up.script({ kind: "status", status: 503 });
    const a = (await turn(runId, [refund(tool.name, "ord_3", 1)])).body.results[0];
    expect((await operation(a.operation_id)).body.phase).toBe("retry_scheduled");
    const b = (await turn(runId, [refund(other.name, "ord_3", 2)], 0)).body.results[0];
    const id = unique("fz");
    await freeze(id, { scope: { tool: tool.name }, mode: "refuse", reason: "stop" });
    expect(await fireAlarm(a.operation_id)).toBe(true);
    const unknown = (await operation(a.operation_id)).body;
    expect(unknown.phase).toBe("outcome_unknown");
    expect(unknown.result.status).toBe("outcome_unknown");
    // A person's same-key resend obeys the freeze: typed, nothing sent.
    const resend = await api("POST", `/v1/operations/${a.operation_id}/resolve`, {
      outcome: "resend",
      reason: "send it again",
    });
    expect(resend.body.code).toBe("frozen");
    expect(resend.body.freeze_id).toBe(id);
    await fireAlarm(b.operation_id).catch(() => false);
    expect((await operation(b.operation_id)).body.phase).toBe("awaiting_lock");
    expect((await up.state()).requests).toHaveLength(1);
    await api("DELETE", `/v1/freezes/${id}`);
  });

  it("hold on a late resend (an unknown settling by itself): its alarm sends nothing; after the lift, one resend under the same key", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, max_attempts: 2 }));
    await up.script({ kind: "status", status: 503 }, { kind: "status", status: 503 });
    const first = await turn(runId, [
      { id: "c1", name, arguments: { amount: 9, currency: "usd" } },
    ]);
    const opId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(opId)).toBe(true);
    const settling = (await operation(opId)).body;
    expect(settling.phase).toBe("outcome_unknown");
    expect(settling.settling?.next_try_at).toEqual(expect.any(String));
    expect((await up.state()).requests).toHaveLength(2);
    const id = unique("fz");
    await freeze(id, { scope: { tool: name }, mode: "hold", reason: "incident" });
    // The late try's alarm, under the hold: nothing sent, still not claimed as not applied.
    await fireAlarm(opId).catch(() => false);
    const held = (await operation(opId)).body;
    expect(held.result.status).toBe("outcome_unknown");
    expect((await up.state()).requests).toHaveLength(2);
    expect((await api("DELETE", `/v1/freezes/${id}`)).status).toBe(200);
    const state = await liftUntil(up, 1);
    expect(state.requests).toHaveLength(3);
    expect(new Set(state.requests.map((r) => r.headers["idempotency-key"])).size).toBe(1);
    expect(state.effects).toHaveLength(1);
    expect((await operation(opId, 5)).body.result).toMatchObject({ status: "succeeded" });
  });

  it("a lift wakes held operations a batch at a time: 13 held, each sent once, never more than a batch in flight", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const id = unique("fz");
    await freeze(id, { scope: { tool: name }, mode: "hold", reason: "outage" });
    const n = WAKE_BATCH + 3;
    const calls = Array.from({ length: n }, (_, i) => ({
      id: `c${i}`,
      name,
      arguments: { amount: i + 1, currency: "usd" },
    }));
    const held = (await turn(runId, calls, 0)).body.results;
    expect(held.every((r: any) => r.code === "frozen")).toBe(true);
    expect(await until(heldAtTenant, (count) => count >= n)).toBe(n);
    // Every write is slow: a whole batch is in flight at once, the next batch only after it.
    await up.script(...Array.from({ length: n }, () => ({ kind: "slow", delayMs: 200 })));
    await api("DELETE", `/v1/freezes/${id}`);
    // The tenant's own alarms, one at a time as the platform runs them (a test that fired them too
    // could run two at once, which the platform never does): a batch, then the next 1 s later.
    await up.waitForEffects(n);
    const state = await up.state();
    expect(state.effects).toHaveLength(n);
    expect(state.requests).toHaveLength(n);
    expect(once(state)).toBe(true);
    expect(state.maxInFlight["*"]).toBeLessThanOrEqual(WAKE_BATCH);
    expect(await heldAtTenant()).toBe(0);
  });

  it("a crash of the held operation, and of the tenant while it lifts: nothing lost, nothing doubled", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const id = unique("fz");
    await freeze(id, { scope: { tool: name }, mode: "hold", reason: "outage" });
    const calls = [1, 2, 3].map((i) => ({
      id: `c${i}`,
      name,
      arguments: { amount: i, currency: "usd" },
    }));
    const ops = (await turn(runId, calls, 0)).body.results.map((r: any) => r.operation_id);
    expect(await until(heldAtTenant, (count) => count >= 3)).toBe(3);
    // The first operation dies while held: its hold is in storage, not in memory.
    await crash(opStub(ops[0]));
    await api("DELETE", `/v1/freezes/${id}`);
    // The tenant dies in the middle of its lift: the wake is under way when it goes.
    const tenant: any = await tenantStub();
    const inside = (instance: any, state: DurableObjectState) => {
      void instance.alarm().catch(() => {});
      state.abort("crash");
    };
    await (runInDurableObject as any)(tenant, inside).catch(() => {});
    // Whatever the dead instance did or did not send: the tenant's next alarm and each held
    // operation's own recheck finish the work.
    await tenantAlarm().catch(() => false);
    for (const op of ops) await fireAlarm(op).catch(() => false);
    const state = await up.state();
    expect(state.effects).toHaveLength(3);
    for (const op of ops)
      expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
    // Every wake and alarm again: nothing doubled.
    await tenantAlarm().catch(() => false);
    for (const op of ops) await fireAlarm(op).catch(() => false);
    const after = await up.state();
    expect(after.requests).toHaveLength(3);
    expect(once(after)).toBe(true);
  });

  it("expires_at reached: the tenant's alarm lifts it (chained, expired) and sends what it held, once", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const id = unique("fz");
    const expiresAtMs = Date.now() + 60_000;
    const put = await freeze(id, {
      scope: { tool: name },
      mode: "hold",
      reason: "for a minute",
      expires_at: new Date(expiresAtMs).toISOString(),
    });
    expect(put.status).toBe(201);
    const held = (
      await turn(runId, [{ id: "c1", name, arguments: { amount: 9, currency: "usd" } }], 0)
    ).body.results[0];
    expect(held).toMatchObject({ code: "frozen" });
    expect(await until(heldAtTenant, (count) => count >= 1)).toBe(1);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(expiresAtMs + 1_000);
      expect(await tenantAlarm()).toBe(true);
      await up.waitForEffects(1);
      const listed = (await api("GET", "/v1/freezes")).body;
      expect(listed.freezes.map((f: any) => f.id)).not.toContain(id);
      expect(listed.chain.ok).toBe(true);
      const lifted = (await api("GET", "/v1/events?type=freeze.lifted")).body.events.find(
        (e: any) => e.data.freeze_id === id,
      );
      expect(lifted?.data).toMatchObject({ expired: true, by: "expires_at" });
    } finally {
      vi.useRealTimers();
    }
    expect((await operation(held.operation_id, 5)).body.result).toMatchObject({
      status: "succeeded",
    });
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe(
  "a freeze row that does not decode (storage codec, issue 32 item 4)",
  { timeout: 30_000 },
  () => {
    it("fails closed: a misspelt stored scope stops every call (nothing sent), never reads as no freeze", async () => {
      const up = upstream();
      const { runId, name } = await setup(manifest({ url: up.url }));
      const id = unique("fz");
      expect((await freeze(id, { scope: { tool: name }, mode: "hold", reason: "x" })).status).toBe(
        201,
      );
      const tenant = placedStub(
        env as unknown as Env,
        "TENANTS",
        (await testTenant()).tenantId,
      ) as any;
      const corrupt = (scope: string) =>
        runInDurableObject(tenant, (_: unknown, state: DurableObjectState) => {
          const row = state.storage.sql.exec("SELECT data FROM freezes WHERE id = ?", id).one();
          const data = { ...JSON.parse(row.data as string), scope: JSON.parse(scope) };
          state.storage.sql.exec(
            "UPDATE freezes SET data = ? WHERE id = ?",
            JSON.stringify(data),
            id,
          );
        });
      // The stored scope misspelt: read as a cast, it covered no call and let this one through.
      await corrupt(JSON.stringify({ tol: name }));
      await runStub(env as unknown as Env, runId).dropFacts((await testTenant()).tenantId);
      const res = await turn(runId, [
        { id: "c1", name, arguments: { amount: 1, currency: "usd" } },
      ]);
      expect(res.body.results?.[0]?.status).not.toBe("succeeded");
      expect((await up.state()).requests).toHaveLength(0);
      // Repaired, the freeze applies again (and is lifted, leaving the tenant as it was).
      await corrupt(JSON.stringify({ tool: name }));
      expect((await api("DELETE", `/v1/freezes/${id}`)).status).toBe(200);
    });
  },
);

describe("telling the runs", { timeout: 30_000 }, () => {
  it("a freeze tells the tenant's live runs to drop their facts, never an expired one", async () => {
    const own = await newTenant(["tools:write", "runs:write", "freezes:write"]);
    const as = { Authorization: `Bearer ${own.key}` };
    const up = upstream();
    const tool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, as)).status).toBe(201);
    const newRunAs = async () =>
      (await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] }, as)).status;
    expect(await newRunAs()).toBe(201);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      // A day and more later: the first run has expired, a second one is made.
      vi.setSystemTime(Date.now() + 25 * 60 * 60_000);
      expect(await newRunAs()).toBe(201);
      const put = await freeze(
        unique("fz"),
        { scope: { tool: tool.name }, mode: "hold", reason: "r" },
        own.key,
      );
      expect(put.status).toBe(201);
      expect(put.body).toMatchObject({ runs_told: 1, runs_pending: 0 });
    } finally {
      vi.useRealTimers();
    }
  });
});
