// The retry budget through the public API (issue 11, "retries are selfish"): a 100%-503 upstream
// and 30 keyed writes of one tenant. Retries to that host are bounded by the budget (a floor of 10
// plus 10% of the first attempts per 10 s window), the refused ones wait traced `retry_deferred`
// with the envelope unchanged, and once the upstream recovers every one completes with exactly one
// effect. The budget is memory only: evicting its object resets the window (the test's stand-in for
// the window passing, which it never sleeps for); one that throws or hangs never blocks a retry.
import { env } from "cloudflare:workers";
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { budgetKey, DEFAULT_RETRY_BUDGET } from "../../src/domain/retry-budget.ts";
import { ALL_SCOPES, api, fireAlarm, manifest, newTenant, upstream } from "../support/api.ts";

const N = 30;
const upstreamBase = (env as unknown as { UPSTREAM_URL: string }).UPSTREAM_URL;
const budgets = (env as unknown as { BUDGETS: DurableObjectNamespace }).BUDGETS;
const budgetOf = (tenantId: string) =>
  budgets.get(budgets.idFromName(budgetKey(tenantId, upstreamBase)));

/** A fresh tenant (so a fresh budget), one run offering a keyed write to `up`. */
async function scenario(up: ReturnType<typeof upstream>, overrides: Record<string, unknown> = {}) {
  const tenant = await newTenant(ALL_SCOPES);
  const auth = { Authorization: `Bearer ${tenant.key}` };
  const tool = manifest({ url: up.url, max_attempts: 8, ...overrides });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    { user: { id: "u1", scopes: [] }, tools: [tool.name], context: {} },
    auth,
  );
  const as = <T>(method: string, path: string, body?: unknown, headers = {}) =>
    api(method, path, body, { ...auth, ...headers }) as Promise<{ status: number; body: T }>;
  const propose = async (count: number) => {
    const calls = Array.from({ length: count }, (_, i) => ({
      id: `c${i}`,
      name: tool.name,
      arguments: { amount: i + 1, currency: "usd" },
    }));
    const turn = await as<any>(
      "POST",
      `/v1/runs/${run.body.run_id}/turns?format=native`,
      { calls },
      {
        Prefer: "wait=0",
      },
    );
    return turn.body.results.map((r: { operation_id: string }) => r.operation_id) as string[];
  };
  /** Until the operation stops changing by itself within the wait (a long-poll, not a sleep). */
  const settle = (id: string) => as<any>("GET", `/v1/operations/${id}?wait=5`);
  const events = async (id: string) =>
    ((await as<any>("GET", `/v1/runs/${run.body.run_id}/trace`)).body.events as any[]).filter(
      (e) => e.operation_id === id,
    );
  return { tenant, propose, settle, events };
}

describe("retry budget per tenant and upstream host", () => {
  it("a 100%-503 outage: retries bounded by the budget, the rest deferred and traced; after recovery one effect each", async () => {
    const up = upstream();
    const { tenant, propose, settle, events } = await scenario(up);
    await up.script(...Array.from({ length: 20 * N }, () => ({ kind: "status", status: 503 })));
    const startedMs = Date.now();
    const ids = await propose(N);
    await up.waitForRequests(N);
    const before = new Map<string, unknown>();
    for (const id of ids) {
      const view = await settle(id);
      expect(view.body.phase).toBe("retry_scheduled");
      before.set(id, view.body.result);
    }

    // Two rounds of every operation's retry alarm, while the upstream still fails.
    for (let round = 0; round < 2; round++)
      for (const id of ids) {
        expect(await fireAlarm(id)).toBe(true);
        expect((await settle(id)).body.phase).toBe("retry_scheduled");
      }
    const elapsedMs = Date.now() - startedMs;
    const retries = (await up.state()).requests.length - N;
    // Without a budget both rounds send every retry: 2 × N. With it, each 10 s window the run
    // spanned allows at most the floor plus 10% of the first attempts.
    const perWindow = DEFAULT_RETRY_BUDGET.minRetriesPerWindow + Math.floor(0.1 * N);
    const windows = Math.floor(elapsedMs / 10_000) + 2;
    expect(retries).toBeLessThanOrEqual(perWindow * windows);
    expect(retries).toBeLessThan(N);

    const deferred: string[] = [];
    for (const id of ids) {
      const trace = await events(id);
      const started = trace.filter((e) => e.type === "attempt_started").length;
      const deferrals = trace.filter((e) => e.type === "retry_deferred");
      // Each fired alarm either sent a retry or was deferred by the budget: never both, never neither.
      expect(started - 1 + deferrals.length).toBe(2);
      if (deferrals.length > 0) deferred.push(id);
      for (const e of deferrals)
        expect(e).toMatchObject({
          state: "retry_scheduled",
          reason: "retry_budget",
          detail: expect.stringMatching(/retries in the last 10 s/),
          due_at_ms: expect.any(Number),
        });
      // The model's envelope is the same as before any deferral.
      if (started === 1) expect((await settle(id)).body.result).toEqual(before.get(id));
    }
    expect(deferred.length).toBeGreaterThan(N / 2);
    // The figure, from this run's upstream ledger.
    console.log(
      JSON.stringify({
        figure: "retry budget, 100%-503 upstream, two alarm rounds",
        first_attempts: N,
        retries_sent: retries,
        retries_without_budget: 2 * N,
        operations_deferred: deferred.length,
      }),
    );

    // The upstream recovers. Evicting the budget object loses its window (as its passing would):
    // each round lets the floor through; the rest are deferred again, and none is lost or doubled.
    await up.clear();
    const done = new Set<string>();
    for (let round = 0; round < 10 && done.size < N; round++) {
      await evictDurableObject(budgetOf(tenant.tenantId)).catch(() => {});
      for (const id of ids.filter((id) => !done.has(id))) {
        await fireAlarm(id);
        const view = await settle(id);
        if (view.body.phase === "recorded") {
          expect(view.body.result.status).toBe("succeeded");
          done.add(id);
        } else expect(view.body.phase).toBe("retry_scheduled");
      }
    }
    expect(done.size).toBe(N);
    const state = await up.state();
    expect(state.effects).toHaveLength(N);
    expect(Object.values(state.effectsByKey)).toEqual(Array.from({ length: N }, () => 1));
    for (const id of deferred) {
      const trace = await events(id);
      const attempts = trace.filter((e) => e.type === "attempt_started");
      expect(attempts.map((e) => e.attempt)).toEqual(attempts.map((_, i) => i + 1));
      expect(new Set(attempts.map((e) => e.idempotency_key)).size).toBe(1);
      expect(trace.at(-1)).toMatchObject({ type: "recorded", status: "succeeded" });
    }
  }, 120_000);

  it("a late resend (issue 24) is counted by the budget: deferred, never dropped, when it is spent; sent once there is room", async () => {
    const up = upstream();
    const { tenant, propose, settle, events } = await scenario(up, { max_attempts: 1 });
    await up.script({ kind: "status", status: 503 });
    const [id] = await propose(1);
    const settling = (await settle(id!)).body;
    expect(settling).toMatchObject({
      phase: "outcome_unknown",
      settling: { until: expect.any(String) },
    });
    // Another caller spent this tenant's budget for the host.
    type Spender = { spend(nowMs: number): Promise<{ ok: boolean }> };
    const stub = budgetOf(tenant.tenantId) as unknown as DurableObjectStub;
    await runInDurableObject(stub, async (instance: unknown) => {
      for (let i = 0; i < 100; i++) if (!(await (instance as Spender).spend(Date.now())).ok) return;
    });
    expect(await fireAlarm(id!)).toBe(true);
    expect((await up.state()).requests).toHaveLength(1); // nothing sent
    const deferred = (await settle(id!)).body;
    expect(deferred).toMatchObject({
      phase: "outcome_unknown",
      settling: { until: settling.settling.until },
    });
    expect(deferred.result).toEqual(settling.result); // the model's answer unchanged
    expect((await events(id!)).filter((e) => e.type === "retry_deferred")).toEqual([
      expect.objectContaining({ state: "outcome_unknown", reason: "retry_budget" }),
    ]);
    // The window passes (eviction forgets it): the late resend goes out, same key, one effect.
    await evictDurableObject(budgetOf(tenant.tenantId)).catch(() => {});
    expect(await fireAlarm(id!)).toBe(true);
    expect((await settle(id!)).body.result.status).toBe("succeeded");
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect(state.effects).toHaveLength(1);
  });

  it.each([
    ["throws", () => Promise.reject(new Error("budget object down"))],
    ["never answers", () => new Promise(() => {})],
  ] as const)("a budget object that %s does not block the retry", async (_, spend) => {
    const up = upstream();
    const { tenant, propose, settle, events } = await scenario(up);
    await up.script({ kind: "status", status: 503 });
    const [id] = await propose(1);
    expect((await settle(id!)).body.phase).toBe("retry_scheduled");
    // RPC refuses own properties (as workerd does): the fault goes on the class, restored after.
    const proto = await runInDurableObject(budgetOf(tenant.tenantId), (instance: object) =>
      Object.getPrototypeOf(instance),
    );
    const original = proto.spend;
    proto.spend = spend;
    try {
      expect(await fireAlarm(id!)).toBe(true);
    } finally {
      proto.spend = original;
    }
    expect((await settle(id!)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
    expect((await events(id!)).some((e) => e.type === "retry_deferred")).toBe(false);
  });
});
