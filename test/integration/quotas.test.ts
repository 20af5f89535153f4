// Quota shaping (issue 34 item 4) through the public API and the counting upstream: a 5/s origin
// quota holds 100 calls to ≤ 5 arrivals in any second (arrivals stamped on the test's scripted
// clock, which is toolgate's clock too: no timing), a cap of 2 keeps ≤ 2 in flight, an upstream's
// long Retry-After parks the origin with calls pending (quota_exhausted), a short one is retried once
// after it, quotas are per tenant and per origin, bad bodies are refused typed, and a restart of
// the quota object doubles nothing. Waits are driven by firing alarms, never slept.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { placedStub } from "../../src/durable/placement.ts";
import type { Env } from "../../src/durable/env.ts";
import {
  api,
  fireAlarm,
  manifest,
  testTenant,
  newTenant,
  opStub,
  setup,
  turn,
  until,
  upstream,
} from "../support/api.ts";

afterEach(() => void vi.useRealTimers());
vi.setConfig({ testTimeout: 25_000 });

type Stored = { phase: string; dueAtMs?: number | null; reason?: string; long?: boolean };
const stateOf = (operationId: string): Promise<Stored> =>
  runInDurableObject(opStub(operationId), async (_i: unknown, state: DurableObjectState) => {
    const row = state.storage.sql
      .exec<{ state: string }>("SELECT state FROM op_log ORDER BY seq DESC LIMIT 1")
      .toArray()[0];
    return JSON.parse(row!.state) as Stored;
  });

const originOf = (url: string) => new URL(url).origin;
let seq = 0;
const calls = (name: string, n: number) =>
  Array.from({ length: n }, () => ({
    id: `c${++seq}`,
    name,
    arguments: { amount: ++seq, currency: "usd" },
  }));

/** Every operation id of a turn's results. */
const idsOf = (res: { body: any }) =>
  (res.body.results as Array<{ operation_id: string }>).map((r) => r.operation_id);

/** The most arrivals in any window [t, t + windowMs). */
function mostInWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe("quota definitions: PUT / GET / DELETE /v1/quotas", () => {
  it("stores, lists and deletes; refuses unknown fields, bad numbers and contradictions typed, storing nothing", async () => {
    const origin = `http://quota-${seq++}.example`;
    const put = await api("PUT", "/v1/quotas/q1", {
      scope: { origin },
      rate: { limit: 5, window_ms: 1000 },
    });
    expect(put.status).toBe(201);
    const bad = [
      { scope: { origin }, rate: { limit: 5, window_ms: 1000 }, priority: 1 },
      { scope: { origin }, rate: { limit: 0, window_ms: 1000 } },
      { scope: { origin } },
      { scope: { origin: `${origin}/path` }, concurrency: 1 },
      { scope: { origin }, concurrency: 2, burst: 3 },
    ];
    for (const body of bad) {
      const res = await api("PUT", "/v1/quotas/q2", body);
      expect([400, 422], JSON.stringify(body)).toContain(res.status);
      expect(res.body.code).toMatch(/^(invalid_request|unsupported_field)$/);
    }
    const conflict = await api("PUT", "/v1/quotas/q3", {
      scope: { origin },
      rate: { limit: 9, window_ms: 1000 },
    });
    expect(conflict.status).toBe(422);
    expect(conflict.body).toMatchObject({ code: "quota_conflict", quota: "q1" });
    const listed = await api("GET", "/v1/quotas");
    const mine = listed.body.quotas.filter((q: any) => q.definition.scope.origin === origin);
    expect(mine.map((q: any) => q.id)).toEqual(["q1"]);

    // Another tenant neither sees nor changes it.
    const other = await newTenant(["tools:write"]);
    const auth = { Authorization: `Bearer ${other.key}` };
    expect((await api("GET", "/v1/quotas", undefined, auth)).body.quotas).toEqual([]);
    expect((await api("DELETE", "/v1/quotas/q1", undefined, auth)).status).toBe(404);
    expect((await api("GET", "/v1/quotas")).body.quotas.some((q: any) => q.id === "q1")).toBe(true);

    expect((await api("DELETE", "/v1/quotas/q1")).status).toBe(204);
    expect((await api("DELETE", "/v1/quotas/q1")).status).toBe(404);
  });
});

describe("enforcement at the point of send", () => {
  it("100 calls against a 5/s origin quota: never more than 5 arrivals in any second, none failed, none sent twice", async () => {
    const up = upstream();
    const origin = originOf(up.url);
    const id = `rate-${seq++}`;
    expect(
      (
        await api("PUT", `/v1/quotas/${id}`, {
          scope: { origin },
          rate: { limit: 5, window_ms: 1000 },
        })
      ).status,
    ).toBe(201);
    const { runId, name } = await setup(manifest({ url: up.url }));
    vi.useFakeTimers({ toFake: ["Date"] });
    let nowMs = Date.now();
    await up.clock(nowMs);

    const ids: string[] = [];
    for (let t = 0; t < 10; t++) ids.push(...idsOf(await turn(runId, calls(name, 10), 0)));
    expect(new Set(ids).size).toBe(100);
    // Every call has its slot (or was sent in the first one); each says when its slot is.
    const states = new Map<string, Stored>();
    for (const op of ids)
      states.set(
        op,
        await until(
          () => stateOf(op),
          (s) => s.phase !== "awaiting_quota" || s.dueAtMs != null,
        ),
      );
    const waiting = ids.filter((op) => states.get(op)!.phase === "awaiting_quota");
    expect(waiting.length).toBeGreaterThanOrEqual(90);
    const sample = await api("GET", `/v1/operations/${waiting.at(-1)}`);
    expect(sample.body.envelope ?? sample.body).toBeDefined();

    // Step the clock 250 ms at a time; fire the alarms of the calls whose slot has come.
    for (let step = 0; step < 100 && waiting.length > 0; step++) {
      nowMs += 250;
      vi.setSystemTime(nowMs);
      await up.clock(nowMs);
      for (const op of [...waiting]) {
        if ((states.get(op)!.dueAtMs ?? Infinity) > nowMs) continue;
        await fireAlarm(op);
        waiting.splice(waiting.indexOf(op), 1);
      }
    }
    expect(waiting).toEqual([]);
    await up.waitForEffects(100);
    const state = await up.state();
    expect(state.requests).toHaveLength(100);
    expect(state.effects).toHaveLength(100);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(100);
    expect(
      mostInWindow(
        state.requests.map((r) => r.atMs),
        1000,
      ),
    ).toBeLessThanOrEqual(5);
    for (const op of ids) expect((await stateOf(op)).phase).toBe("recorded");
  });

  it("a concurrency cap of 2: never more than 2 in flight at the upstream; the waiters are woken in turn", async () => {
    const up = upstream();
    const id = `cap-${seq++}`;
    await api("PUT", `/v1/quotas/${id}`, { scope: { origin: originOf(up.url) }, concurrency: 2 });
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script(...Array.from({ length: 8 }, () => ({ kind: "slow", delayMs: 50 })));
    const ids = idsOf(await turn(runId, calls(name, 8), 0));
    // Released places wake the next waiters; an alarm asks again in case a notice was lost.
    await until(
      async () => {
        for (const op of ids)
          if ((await stateOf(op)).phase === "awaiting_quota") await fireAlarm(op);
        return (await up.state()).effects.length;
      },
      (n) => n === 8,
    );
    const state = await up.state();
    expect(state.effects).toHaveLength(8);
    expect(state.requests).toHaveLength(8);
    expect(state.maxInFlight["*"]).toBeLessThanOrEqual(2);
  });

  it("a quota on another origin changes nothing: every call goes at once", async () => {
    const up = upstream();
    await api("PUT", `/v1/quotas/other-${seq++}`, {
      scope: { origin: `http://elsewhere-${seq}.example` },
      rate: { limit: 1, window_ms: 60_000 },
    });
    const { runId, name } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, calls(name, 5));
    expect(res.body.results.map((r: any) => r.status)).toEqual(Array(5).fill("succeeded"));
    expect((await up.state()).effects).toHaveLength(5);
  });
});

describe("upstream signals pause the origin for everyone", () => {
  it("429 Retry-After: 3600 parks the origin: later calls stay pending (quota_exhausted), none reaches the upstream", async () => {
    const up = upstream();
    await up.script({ kind: "status", status: 429, retryAfter: "3600" });
    const tool = manifest({ url: up.url });
    const { name } = await setup(tool);
    const first = await setup(tool);
    const hit = await turn(first.runId, calls(name, 1));
    const hitId = idsOf(hit)[0]!;
    expect(hit.body.results[0].status).toBe("pending");
    await up.waitForRequests(1);
    // The pause is recorded where later calls see it (the tenant's facts: a new run reads them).
    const later = await until(
      async () => {
        const { runId } = await setup(tool);
        return (await turn(runId, calls(name, 3), 1)).body.results as any[];
      },
      (results) => results.every((r) => r.code === "quota_exhausted"),
    );
    for (const r of later) {
      expect(r.status).toBe("pending");
      expect(r.message).toMatch(/quota is used up/);
      await fireAlarm(r.operation_id);
      expect((await stateOf(r.operation_id)).phase).toBe("awaiting_quota");
    }
    // The 429'd call's own retry waits for the pause too, pending, without failing.
    await fireAlarm(hitId);
    const parked = await stateOf(hitId);
    expect(parked.phase).toBe("retry_scheduled");
    const view = await api("GET", `/v1/operations/${hitId}`);
    expect(JSON.stringify(view.body)).toMatch(/quota_exhausted/);
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("a transient 429 (Retry-After: 1) is retried once after it, one effect", async () => {
    const up = upstream();
    await up.script({ kind: "status", status: 429, retryAfter: "1" });
    const { runId, name } = await setup(manifest({ url: up.url }));
    const op = idsOf(await turn(runId, calls(name, 1)))[0]!;
    await up.waitForRequests(1);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2_000);
    await fireAlarm(op);
    await up.waitForEffects(1);
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(state.effects).toHaveLength(1);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
  });

  it("RateLimit: r=0 with t=120 pauses the origin like a Retry-After (structured field)", async () => {
    const up = upstream();
    await up.script({
      kind: "status",
      status: 429,
      headers: { RateLimit: '"day";r=0;t=7200', "RateLimit-Policy": '"day";q=1000;w=86400' },
    });
    const tool = manifest({ url: up.url });
    const { runId, name } = await setup(tool);
    await turn(runId, calls(name, 1));
    await up.waitForRequests(1);
    const later = await until(
      async () => (await turn((await setup(tool)).runId, calls(name, 1), 1)).body.results[0],
      (r: any) => r.code === "quota_exhausted",
    );
    expect(later.status).toBe("pending");
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe("a restart of the quota object", () => {
  it("loses no grant and grants none twice: calls still go out once each", async () => {
    const up = upstream();
    const origin = originOf(up.url);
    await api("PUT", `/v1/quotas/kill-${seq++}`, {
      scope: { origin },
      rate: { limit: 2, window_ms: 1000 },
    });
    const { runId, name } = await setup(manifest({ url: up.url }));
    vi.useFakeTimers({ toFake: ["Date"] });
    let nowMs = Date.now();
    const ids = idsOf(await turn(runId, calls(name, 6), 0));
    for (const op of ids)
      await until(
        () => stateOf(op),
        (s) => s.phase !== "awaiting_quota" || s.dueAtMs != null,
      );
    // The object restarts (its memory is gone; its SQLite state stays).
    const { tenantId } = await testTenant();
    const stub = placedStub(env as unknown as Env, "BUDGETS", `${tenantId}:${origin}`) as any;
    await runInDurableObject(stub, (_i: unknown, state: DurableObjectState) =>
      state.abort("restart"),
    );
    for (let step = 0; step < 20; step++) {
      nowMs += 500;
      vi.setSystemTime(nowMs);
      for (const op of ids) if ((await stateOf(op)).phase === "awaiting_quota") await fireAlarm(op);
      await runDurableObjectAlarm(stub).catch(() => false);
    }
    await up.waitForEffects(6);
    const state = await up.state();
    expect(state.requests).toHaveLength(6);
    expect(state.effects).toHaveLength(6);
    for (const op of ids) expect((await stateOf(op)).phase).toBe("recorded");
  });
});
