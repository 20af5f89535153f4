// Quota shaping (issue 34 item 4) through the public API and the counting upstream: a 5/s origin
// quota holds 100 calls to ≤ 5 arrivals in any second (arrivals stamped on the test's scripted
// clock, which is toolgate's clock too: nothing is timed), a cap of 2 keeps ≤ 2 in flight, an
// upstream's long Retry-After parks the origin with calls pending (quota_exhausted), a short one is
// retried once after it, quotas are per tenant and per origin, bad bodies are refused typed, and a
// restart of the quota object doubles nothing. Every test has its own tenant: a quota and a pause
// belong to (tenant, origin), and the upstream is one origin. Waits are driven by firing alarms.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { placedStub } from "../../src/durable/placement.ts";
import type { Env } from "../../src/durable/env.ts";
import {
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  newTenant,
  opStub,
  until,
  upstream,
} from "../support/api.ts";

afterEach(() => void vi.useRealTimers());
vi.setConfig({ testTimeout: 25_000 });

/** A tenant of its own, with the helpers of test/support/api.ts bound to its key. */
async function ownTenant() {
  const { tenantId, key } = await newTenant(ALL_SCOPES);
  const auth = { Authorization: `Bearer ${key}` };
  const as = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    api(method, path, body, { ...headers, ...auth });
  let seq = 0;
  return {
    tenantId,
    api: as,
    /** Registers `tool` (once) and opens a new run offering it. */
    async run(tool: Record<string, unknown>, budgets: Record<string, number> = {}) {
      const put = await as("PUT", `/v1/tools/${tool.name as string}`, tool);
      expect([200, 201]).toContain(put.status);
      const run = await as("POST", "/v1/runs", {
        user: { id: "u1", scopes: [] },
        tools: [tool.name],
        budgets,
      });
      expect(run.status).toBe(201);
      return run.body.run_id as string;
    },
    /** `n` distinct charges in one native turn; the operation ids and envelopes in call order. */
    async turn(runId: string, name: string, n: number, waitSeconds = 0) {
      const calls = Array.from({ length: n }, () => {
        seq++;
        return { id: `c${seq}`, name, arguments: { amount: seq, currency: "usd" } };
      });
      const res = await as(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls },
        {
          Prefer: `wait=${waitSeconds}`,
        },
      );
      const results = res.body.results as Array<Record<string, any>>;
      return { ids: results.map((r) => r.operation_id as string), results };
    },
  };
}

type Stored = { phase: string; dueAtMs?: number | null; reason?: string; long?: boolean };
const stateOf = (operationId: string): Promise<Stored> =>
  runInDurableObject(opStub(operationId), async (_i: unknown, state: DurableObjectState) => {
    const row = state.storage.sql
      .exec<{ state: string }>("SELECT state FROM op_log ORDER BY seq DESC LIMIT 1")
      .toArray()[0];
    return JSON.parse(row!.state) as Stored;
  });
/** Once its quota answered: sent (or done), or waiting with a known slot. */
const answered = (operationId: string) =>
  until(
    () => stateOf(operationId),
    (s) => s.phase !== "awaiting_quota" || s.dueAtMs != null,
  );
/** Every operation reaches `recorded` (read until it does, bounded). */
async function allRecorded(ids: string[]) {
  for (const op of ids)
    expect(
      (
        await until(
          () => stateOf(op),
          (s) => s.phase === "recorded",
        )
      ).phase,
    ).toBe("recorded");
}
const quotaObject = (tenantId: string, origin: string) =>
  placedStub(env as unknown as Env, "BUDGETS", `${tenantId}:${origin}`) as any;

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

describe("quota definitions: PUT / GET / DELETE /v1/quotas", { timeout: 30_000 }, () => {
  it("stores, lists and deletes; refuses unknown fields, bad numbers and contradictions typed, storing nothing", async () => {
    const t = await ownTenant();
    const origin = "https://api.example.com";
    const q1 = { scope: { origin }, rate: { limit: 5, window_ms: 1000 } };
    expect((await t.api("PUT", "/v1/quotas/q1", q1)).status).toBe(201);
    expect((await t.api("PUT", "/v1/quotas/q1", q1)).status).toBe(200);
    const bad: unknown[] = [
      { ...q1, priority: 1 },
      { scope: { origin, tool: "x" }, concurrency: 1 },
      { scope: { origin }, rate: { limit: 0, window_ms: 1000 } },
      { scope: { origin }, rate: { limit: 5, window_ms: 1000, unit: "s" } },
      { scope: { origin } },
      { scope: { origin: `${origin}/path` }, concurrency: 1 },
      { scope: { origin: "ftp://api.example.com" }, concurrency: 1 },
      { scope: { origin }, concurrency: 2, burst: 3 },
      { scope: { origin }, rate: { limit: 5, window_ms: 1000 }, burst: 6 },
    ];
    for (const body of bad) {
      const res = await t.api("PUT", "/v1/quotas/q2", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code, JSON.stringify(body)).toBe("invalid_request");
    }
    expect((await t.api("PUT", "/v1/quotas/bad%20id", q1)).status).toBe(400);
    const conflict = await t.api("PUT", "/v1/quotas/q3", {
      scope: { origin },
      rate: { limit: 9, window_ms: 1000 },
    });
    expect(conflict.status).toBe(422);
    expect(conflict.body).toMatchObject({ code: "quota_conflict", quota: "q1" });
    // The same numbers under another id contradict nothing.
    expect((await t.api("PUT", "/v1/quotas/q4", q1)).status).toBe(201);
    const listed = await t.api("GET", "/v1/quotas");
    expect(listed.body.quotas.map((q: any) => q.id)).toEqual(["q1", "q4"]);
    expect(listed.body.quotas[0].definition).toEqual(q1);

    // Another tenant neither sees nor changes it; a key without tools:write cannot either.
    const other = await ownTenant();
    expect((await other.api("GET", "/v1/quotas")).body.quotas).toEqual([]);
    expect((await other.api("DELETE", "/v1/quotas/q1")).status).toBe(404);
    expect(
      (await other.api("PUT", "/v1/quotas/q1", { scope: { origin }, concurrency: 1 })).status,
    ).toBe(201);
    const reader = await newTenant(["runs:read"]);
    const asReader = { Authorization: `Bearer ${reader.key}` };
    expect((await api("GET", "/v1/quotas", undefined, asReader)).status).toBe(403);
    expect((await t.api("GET", "/v1/quotas")).body.quotas.map((q: any) => q.id)).toEqual([
      "q1",
      "q4",
    ]);

    expect((await t.api("DELETE", "/v1/quotas/q1")).status).toBe(204);
    expect((await t.api("DELETE", "/v1/quotas/q1")).status).toBe(404);
    expect((await t.api("GET", "/v1/quotas")).body.quotas.map((q: any) => q.id)).toEqual(["q4"]);
  });
});

describe("enforcement at the point of send", { timeout: 30_000 }, () => {
  it("100 calls against a 5/s origin quota: never more than 5 arrivals in any second, none failed, none sent twice", async () => {
    const t = await ownTenant();
    const up = upstream();
    const origin = new URL(up.url).origin;
    const quota = { scope: { origin }, rate: { limit: 5, window_ms: 1000 } };
    expect((await t.api("PUT", "/v1/quotas/five", quota)).status).toBe(201);
    // A scripted clock a day ahead: the operations' own alarms (armed on it) never fire by themselves
    // during the test, only when the test fires them.
    vi.useFakeTimers({ toFake: ["Date"] });
    let nowMs = Date.now() + 86_400_000;
    vi.setSystemTime(nowMs);
    await up.clock(nowMs);
    const tool = manifest({ url: up.url });
    const runId = await t.run(tool);

    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(...(await t.turn(runId, tool.name, 10)).ids);
    expect(new Set(ids).size).toBe(100);
    const states = new Map<string, Stored>();
    for (const op of ids) states.set(op, await answered(op));
    const waiting = ids.filter((op) => states.get(op)!.phase === "awaiting_quota");
    expect(waiting).toHaveLength(95);
    // The model reads that it waits, when, and that nothing was sent.
    // The last slot is 19 s away (95 waiting, 5 a second).
    const lastId = waiting.reduce((a, b) =>
      states.get(a)!.dueAtMs! >= states.get(b)!.dueAtMs! ? a : b,
    );
    expect(states.get(lastId)!.dueAtMs! - nowMs).toBe(19_000);
    const last = await t.api("GET", `/v1/operations/${lastId}`);
    expect(last.body.result).toMatchObject({ status: "pending", code: "rate_limited" });
    expect(last.body.result.message).toMatch(/nothing has been sent yet\. Next slot in ~19 s/);

    // Move the clock from slot to slot; fire the alarms of the calls whose slot has come, and let
    // their requests arrive before the clock moves on (so each is stamped with the time it went).
    let sent = 5;
    await up.waitForRequests(sent);
    const slots = [...new Set(waiting.map((op) => states.get(op)!.dueAtMs!))].sort((a, b) => a - b);
    for (const slotMs of slots) {
      nowMs = slotMs;
      vi.setSystemTime(nowMs);
      await up.clock(nowMs);
      const due = waiting.filter((op) => states.get(op)!.dueAtMs! <= nowMs);
      await Promise.all(due.map((op) => fireAlarm(op)));
      for (const op of due) waiting.splice(waiting.indexOf(op), 1);
      sent += due.length;
      await up.waitForRequests(sent);
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

  it("an alarm before the slot sends nothing (early or duplicate alarms are harmless)", async () => {
    const t = await ownTenant();
    const up = upstream();
    const quota = {
      scope: { origin: new URL(up.url).origin },
      rate: { limit: 1, window_ms: 60_000 },
    };
    await t.api("PUT", "/v1/quotas/one", quota);
    const tool = manifest({ url: up.url });
    const { ids } = await t.turn(await t.run(tool), tool.name, 2);
    const states = await Promise.all(ids.map(answered));
    const second = ids[states.findIndex((s) => s.phase === "awaiting_quota")]!;
    for (let i = 0; i < 3; i++) await fireAlarm(second);
    expect((await stateOf(second)).phase).toBe("awaiting_quota");
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("a slot after the run's deadline: budget_exhausted / deadline at once, nothing sent", async () => {
    const t = await ownTenant();
    const up = upstream();
    const quota = {
      scope: { origin: new URL(up.url).origin },
      rate: { limit: 1, window_ms: 60_000 },
    };
    await t.api("PUT", "/v1/quotas/slow", quota);
    const tool = manifest({ url: up.url });
    const runId = await t.run(tool, { max_duration_ms: 30_000 });
    const { results } = await t.turn(runId, tool.name, 2, 5);
    const late = results.find((r) => r.status !== "succeeded")!;
    expect(late).toMatchObject({ status: "budget_exhausted", code: "deadline" });
    expect(late.message).toMatch(/was not sent and did not take effect/);
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("a concurrency cap of 2: never more than 2 in flight at the upstream; the waiters are woken in turn", async () => {
    const t = await ownTenant();
    const up = upstream();
    const quota = { scope: { origin: new URL(up.url).origin }, concurrency: 2 };
    expect((await t.api("PUT", "/v1/quotas/cap", quota)).status).toBe(201);
    const tool = manifest({ url: up.url });
    await up.script(...Array.from({ length: 8 }, () => ({ kind: "slow", delayMs: 100 })));
    const { ids, results } = await t.turn(await t.run(tool), tool.name, 8);
    expect(results.filter((r) => r.code === "rate_limited")).not.toHaveLength(0);
    // A freed place wakes the next waiter (quotaReady): no alarm is fired here.
    await up.waitForEffects(8);
    const state = await up.state();
    expect(state.requests).toHaveLength(8);
    expect(state.maxInFlight["*"]).toBeLessThanOrEqual(2);
    await allRecorded(ids);
  });

  it("a quota on another origin, or another tenant's on this one, changes nothing", async () => {
    const t = await ownTenant();
    const up = upstream();
    await t.api("PUT", "/v1/quotas/elsewhere", {
      scope: { origin: "https://elsewhere.example" },
      rate: { limit: 1, window_ms: 60_000 },
    });
    const other = await ownTenant();
    await other.api("PUT", "/v1/quotas/mine", {
      scope: { origin: new URL(up.url).origin },
      rate: { limit: 1, window_ms: 60_000 },
    });
    const tool = manifest({ url: up.url });
    const { results } = await t.turn(await t.run(tool), tool.name, 5, 5);
    expect(results.map((r) => r.status)).toEqual(Array(5).fill("succeeded"));
    expect((await up.state()).effects).toHaveLength(5);
  });

  it("a (user, tool) quota: each user's calls of that tool wait for it", async () => {
    const t = await ownTenant();
    const up = upstream();
    const tool = manifest({ url: up.url });
    await t.api("PUT", "/v1/quotas/per-user", {
      scope: { tool: tool.name },
      rate: { limit: 1, window_ms: 60_000 },
    });
    const { ids, results } = await t.turn(await t.run(tool), tool.name, 3, 1);
    await Promise.all(ids.map(answered));
    expect(results.filter((r) => r.status === "succeeded")).toHaveLength(1);
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe("a quota in the tool manifest", { timeout: 30_000 }, () => {
  it("quota: per user of that tool, enforced like a PUT one; the two may not contradict", async () => {
    const t = await ownTenant();
    const up = upstream();
    const tool = manifest({ url: up.url, quota: { rate: { limit: 1, window_ms: 60_000 } } });
    const { ids, results } = await t.turn(await t.run(tool), tool.name, 2, 1);
    await Promise.all(ids.map(answered));
    expect(results.map((r) => r.status).sort()).toEqual(["pending", "succeeded"]);
    expect(results.find((r) => r.status === "pending")).toMatchObject({ code: "rate_limited" });
    expect((await up.state()).requests).toHaveLength(1);

    const other = { scope: { tool: tool.name }, rate: { limit: 2, window_ms: 60_000 } };
    const refused = await t.api("PUT", "/v1/quotas/per-tool", other);
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: "quota_conflict", quota: `manifest:${tool.name}` });
    const same = { scope: { tool: tool.name }, rate: { limit: 1, window_ms: 60_000 } };
    expect((await t.api("PUT", "/v1/quotas/per-tool", same)).status).toBe(201);
    const changed = { ...tool, quota: { concurrency: 3 } };
    const put = await t.api("PUT", `/v1/tools/${tool.name}`, changed);
    expect(put.status).toBe(422);
    expect(put.body).toMatchObject({ code: "quota_conflict", quota: "per-tool" });
    const bad = await t.api("PUT", `/v1/tools/${tool.name}`, {
      ...tool,
      quota: { rate: { limit: 1, window_ms: 60_000 }, per: "user" },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe("invalid_manifest");
  });
});

describe("upstream signals pause the origin for everyone", { timeout: 30_000 }, () => {
  it("429 Retry-After: 3600 parks the origin: later calls stay pending (quota_exhausted), none reaches the upstream", async () => {
    const t = await ownTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 429, retryAfter: "3600" });
    const tool = manifest({ url: up.url });
    const hit = await t.turn(await t.run(tool), tool.name, 1, 5);
    const hitId = hit.ids[0]!;
    await up.waitForRequests(1);
    // The pause reaches the tenant's facts: a run opened now carries it to its calls.
    const later = await until(
      async () => (await t.turn(await t.run(tool), tool.name, 3, 1)).results,
      (results) => results.every((r) => r.code === "quota_exhausted"),
    );
    for (const r of later) {
      expect(r.status).toBe("pending");
      expect(r.message).toMatch(/quota is used up until/);
      await fireAlarm(r.operation_id);
      expect((await stateOf(r.operation_id)).phase).toBe("awaiting_quota");
    }
    // The 429'd call's own retry waits for the pause too: pending, told it is a long pause.
    await fireAlarm(hitId);
    expect((await stateOf(hitId)).phase).toBe("retry_scheduled");
    const view = await t.api("GET", `/v1/operations/${hitId}`);
    expect(view.body.result).toMatchObject({ status: "pending", code: "quota_exhausted" });
    // A person's retry-now does not break the upstream's pause: typed, nothing sent, still waiting.
    const now = await t.api("POST", `/v1/operations/${hitId}/retry-now`);
    expect(now.status).toBe(409);
    expect(now.body).toMatchObject({ code: "origin_paused" });
    expect(now.body.retry_after_ms).toBeGreaterThan(3_000_000);
    expect((await stateOf(hitId)).phase).toBe("retry_scheduled");
    expect((await up.state()).requests).toHaveLength(1);

    // An hour later the pause is over: each call is sent once, the 429'd one under its own key.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3_601_000);
    for (const op of [hitId, ...later.map((r) => r.operation_id as string)]) await fireAlarm(op);
    await up.waitForEffects(4);
    const state = await up.state();
    expect(state.requests).toHaveLength(5);
    expect(state.effects).toHaveLength(4);
    expect(
      state.requests[4]!.key === state.requests[0]!.key ||
        state.requests.slice(1).some((r) => r.key === state.requests[0]!.key),
    ).toBe(true);
  });

  it("a transient 429 (Retry-After: 1) is retried once after it, one effect", async () => {
    const t = await ownTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 429, retryAfter: "1" });
    const tool = manifest({ url: up.url });
    const { ids, results } = await t.turn(await t.run(tool), tool.name, 1, 5);
    expect(results[0]).toMatchObject({ status: "pending" });
    await up.waitForRequests(1);
    // Before the second is over the retry is deferred by the pause, nothing sent.
    await fireAlarm(ids[0]!);
    expect((await stateOf(ids[0]!)).phase).toBe("retry_scheduled");
    const view = await t.api("GET", `/v1/operations/${ids[0]}`);
    expect(view.body.result).toMatchObject({ status: "pending", code: "rate_limited" });
    expect((await up.state()).requests).toHaveLength(1);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2_000);
    await fireAlarm(ids[0]!);
    await up.waitForEffects(1);
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(state.effects).toHaveLength(1);
    expect(state.requests[1]!.key).toBe(state.requests[0]!.key);
  });

  it('RateLimit: "day";r=0;t=7200 pauses the origin like a Retry-After (parsed as a structured field)', async () => {
    const t = await ownTenant();
    const up = upstream();
    await up.script({
      kind: "status",
      status: 429,
      headers: { RateLimit: '"day";r=0;t=7200', "RateLimit-Policy": '"day";q=1000;w=86400' },
    });
    const tool = manifest({ url: up.url });
    await t.turn(await t.run(tool), tool.name, 1, 5);
    await up.waitForRequests(1);
    const later = await until(
      async () => (await t.turn(await t.run(tool), tool.name, 1, 1)).results[0]!,
      (r) => r.code === "quota_exhausted",
    );
    expect(later.status).toBe("pending");
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe("a restart of the quota object", { timeout: 30_000 }, () => {
  it("a grant asked twice is granted once (keyed by operation id + attempt)", async () => {
    const t = await ownTenant();
    const stub = () => quotaObject(t.tenantId, "https://twice.example");
    const claim = { id: "q", object: "x", rate: { limit: 1, windowMs: 60_000, burst: 1 } };
    const ask = (grant: string, nowMs: number) =>
      stub().acquireQuota({
        grant,
        operationId: "op_x",
        claim,
        nowMs,
        deadlineAtMs: null,
        holdMs: 1000,
      });
    const first = await ask("op_a:1", 1_000_000);
    await runInDurableObject(stub(), (_: unknown, state: DurableObjectState) =>
      state.abort("crash"),
    ).catch(() => {});
    expect(await ask("op_a:1", 1_000_500)).toEqual(first);
    expect(await ask("op_b:1", 1_000_600)).toEqual({ kind: "granted", atMs: 1_060_000 });
  });

  it("a kill of the quota object mid-run leaves nothing doubled and nothing stuck", async () => {
    const t = await ownTenant();
    const up = upstream();
    const origin = new URL(up.url).origin;
    await t.api("PUT", "/v1/quotas/two", {
      scope: { origin },
      rate: { limit: 2, window_ms: 1000 },
      concurrency: 2,
    });
    const tool = manifest({ url: up.url });
    vi.useFakeTimers({ toFake: ["Date"] });
    let nowMs = Date.now() + 86_400_000;
    vi.setSystemTime(nowMs);
    const { ids } = await t.turn(await t.run(tool), tool.name, 6);
    await up.waitForRequests(2);
    const stub = () => quotaObject(t.tenantId, origin);
    await runInDurableObject(stub(), (_: unknown, state: DurableObjectState) =>
      state.abort("crash"),
    ).catch(() => {});
    for (let step = 0; step < 40; step++) {
      if ((await up.state()).effects.length === 6) break;
      nowMs += 500;
      vi.setSystemTime(nowMs);
      await runDurableObjectAlarm(stub()).catch(() => false);
      for (const op of ids) if ((await stateOf(op)).phase === "awaiting_quota") await fireAlarm(op);
    }
    await up.waitForEffects(6);
    const state = await up.state();
    expect(state.requests).toHaveLength(6);
    expect(state.effects).toHaveLength(6);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(6);
    await allRecorded(ids);
  });
});

// Quotas and freezes together (issues 34 items 1 and 4): the slot a call waited for is a send
// point, so a freeze put while it waited stops it there; a lift sends it once, through its quota.
describe("a quota wait under a freeze", { timeout: 30_000 }, () => {
  /** Two calls against 1 per minute: the first is sent, the second waits for its slot. */
  async function waitingForSlot() {
    const t = await ownTenant();
    const up = upstream();
    await t.api("PUT", "/v1/quotas/one", {
      scope: { origin: new URL(up.url).origin },
      rate: { limit: 1, window_ms: 60_000 },
    });
    const tool = manifest({ url: up.url });
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 86_400_000);
    const { ids } = await t.turn(await t.run(tool), tool.name, 2);
    const states = await Promise.all(ids.map(answered));
    const waiting = ids[states.findIndex((s) => s.phase === "awaiting_quota")]!;
    expect((await up.state()).requests).toHaveLength(1);
    return { t, up, tool, waiting };
  }
  /** The clock past the waiting call's slot, and its alarm. */
  async function reachSlot(op: string) {
    const waiting = await until(
      () => stateOf(op),
      (s) => s.phase === "awaiting_quota" && typeof s.dueAtMs === "number",
    );
    expect(waiting).toMatchObject({ phase: "awaiting_quota", reason: "rate" });
    vi.setSystemTime(waiting.dueAtMs! + 1);
    await fireAlarm(op);
  }

  it("hold on its tool: its slot sends nothing; the lift sends it once, through its quota", async () => {
    const { t, up, tool, waiting } = await waitingForSlot();
    const put = await t.api("PUT", "/v1/freezes/qz", {
      scope: { tool: tool.name },
      mode: "hold",
      reason: "incident",
    });
    expect(put.status).toBe(201);
    await reachSlot(waiting);
    const held = await until(
      () => stateOf(waiting),
      (s) => s.phase !== "awaiting_quota",
    );
    expect(held.phase).toBe("held");
    expect((await t.api("GET", `/v1/operations/${waiting}`)).body.result).toMatchObject({
      status: "pending",
      code: "frozen",
    });
    // Its alarm again while frozen: still nothing sent.
    await fireAlarm(waiting);
    expect((await stateOf(waiting)).phase).toBe("held");
    expect((await up.state()).requests).toHaveLength(1);

    expect((await t.api("DELETE", "/v1/freezes/qz")).status).toBe(200);
    // The held call's own recheck (the tenant's wake does the same): released, it asks its quota
    // anew — the slot it gave back is not reused — and is sent at its new slot, once.
    await fireAlarm(waiting);
    // A slot is used once: the one it was held at passed unsent, so it waits for the next one.
    const anew = await until(
      () => stateOf(waiting),
      (s) => s.phase === "awaiting_quota" && typeof s.dueAtMs === "number",
    );
    expect(anew.phase).toBe("awaiting_quota");
    expect(anew.dueAtMs).toBeGreaterThan(Date.now());
    expect((await up.state()).requests).toHaveLength(1);
    await reachSlot(waiting);
    await up.waitForEffects(2);
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(Object.values(state.effectsByKey).every((n) => n === 1)).toBe(true);
    await allRecorded([waiting]);
    expect((await t.api("GET", `/v1/operations/${waiting}`)).body.result).toMatchObject({
      status: "succeeded",
    });
  });

  it("refuse on its tool: its slot ends it rejected/frozen, nothing sent", async () => {
    const { t, up, tool, waiting } = await waitingForSlot();
    await t.api("PUT", "/v1/freezes/qr", {
      scope: { tool: tool.name },
      mode: "refuse",
      reason: "incident",
    });
    await reachSlot(waiting);
    await allRecorded([waiting]);
    expect((await t.api("GET", `/v1/operations/${waiting}`)).body.result).toMatchObject({
      status: "rejected",
      code: "frozen",
    });
    expect((await up.state()).requests).toHaveLength(1);
  });
});
