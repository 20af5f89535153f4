// Standing grants (issue 35 item 1), through the public API with the counting upstream: 30
// concurrent refunds of 10 under a grant of 100 → 10 sent, the rest ask a person, each effect
// once, each use listed and traced; re-posts and re-proposals never spend it twice; a revoke during
// a lock wait sends nothing under it (the call asks a person); an expired grant, or a call outside
// its bounds, asks a person; another tenant cannot see, use or revoke it; bad bodies are refused
// typed, nothing stored.
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ALL_SCOPES,
  api,
  fireAlarm,
  newTenant,
  operation,
  trace,
  unique,
  until,
  upstream,
} from "../support/api.ts";
import {
  as,
  refundGrant,
  refundTool,
  call,
  grant,
  inAnHour,
  newRun,
  one,
  postGrant,
  registered,
  shown,
} from "../support/grants.ts";

const once = (effectsByKey: Record<string, number>) =>
  Object.values(effectsByKey).every((n) => n === 1);

afterEach(() => vi.useRealTimers());

describe("standing grants", { timeout: 30_000 }, () => {
  it("30 concurrent refunds of 10 under a grant of 100: exactly 10 sent without asking, 20 ask a person; each effect once; each use listed and traced", async () => {
    const up = upstream();
    // 30 runs at once on a loaded machine can pass the default 1 s upstream timeout (an unknown).
    const tool = await registered(up.url, { timeout_ms: 20_000 });
    const customer = unique("cus");
    const id = await grant(refundGrant(tool, customer));
    const runs = await Promise.all(Array.from({ length: 30 }, () => newRun(tool, customer)));
    const posted = await Promise.all(runs.map((runId) => one(runId, call(tool, 10))));
    // On a loaded machine a sent call may still be running when the turn answers: read it settled.
    const results = await Promise.all(
      posted.map(async (r) =>
        r.status === "pending"
          ? (
              await until(
                async () => (await operation(r.operation_id, 5)).body,
                (view) => view.result.status !== "pending",
              )
            ).result
          : r,
      ),
    );
    const sent = results.filter((r) => r.status === "succeeded");
    const asking = results.filter((r) => r.status === "awaiting_approval");
    expect(sent).toHaveLength(10);
    expect(asking).toHaveLength(20);
    const state = await up.state();
    expect(state.effects).toHaveLength(10);
    expect(state.effects.reduce((sum, e) => sum + e.body.amount, 0)).toBeLessThanOrEqual(100);
    expect(once(state.effectsByKey)).toBe(true);

    const view = await shown(id);
    expect(view).toMatchObject({
      state: "live",
      created_by: "test",
      used: { calls: 10, sum: 100 },
    });
    expect(view.uses.map((u: any) => u.operation_id).sort()).toEqual(
      sent.map((r) => r.operation_id).sort(),
    );
    // The operation names the grant; its trace says which grant approved it, and no person was asked.
    const granted = (await operation(sent[0].operation_id)).body;
    expect(granted).toMatchObject({ grant: { id, amount: 10, lapsed: false }, approval: null });
    const events = await trace(runs[results.indexOf(sent[0])]!);
    expect(events.find((e) => e.type === "grant_used")).toMatchObject({ grant_id: id, amount: 10 });
    expect(events.some((e) => e.type === "awaiting_approval")).toBe(false);

    // One that asked is approved by a person as usual: sent once more, the grant untouched.
    const approved = await api("POST", `/v1/operations/${asking[0].operation_id}/approve`, {});
    expect(approved.status).toBe(200);
    await up.waitForEffects(11);
    expect((await up.state()).effects).toHaveLength(11);
    expect((await shown(id)).used).toEqual({ calls: 10, sum: 100 });
  });

  it("re-posts and re-proposals never spend a grant twice; count bounds it too", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const customer = unique("cus");
    const id = await grant({
      tools: [tool],
      subject: { "context.customer_id": customer },
      field: "amount",
      total_max: 100,
      count: 2,
      expires_at: inAnHour(),
      reason: "two refunds",
    });
    const runId = await newRun(tool, customer);
    const first = call(tool, 10, "c1");
    expect(await one(runId, first)).toMatchObject({ status: "succeeded" });
    // The same call posted again, and re-proposed with new call ids, concurrently: one operation.
    const again = await Promise.all([
      one(runId, first),
      one(runId, call(tool, 10, "c2")),
      one(runId, call(tool, 10, "c3")),
    ]);
    expect(new Set(again.map((r) => r.operation_id))).toEqual(new Set([again[0].operation_id]));
    expect(again.every((r) => r.status === "succeeded")).toBe(true);
    expect((await shown(id)).used).toEqual({ calls: 1, sum: 10 });
    // A second distinct refund uses the grant's last call; a third asks a person.
    expect(await one(runId, call(tool, 20))).toMatchObject({ status: "succeeded" });
    expect(await one(runId, call(tool, 30))).toMatchObject({ status: "awaiting_approval" });
    const state = await up.state();
    expect(state.effects.map((e) => e.body.amount)).toEqual([10, 20]);
    expect(once(state.effectsByKey)).toBe(true);
    expect((await shown(id)).used).toEqual({ calls: 2, sum: 30 });
  });

  it("a revoke during a lock wait: nothing is sent under the grant, the call asks a person; approved, it is sent once", async () => {
    const up = upstream();
    const tool = await registered(up.url, {
      resource: "order:{order_id}",
      request: { method: "POST", url: `${up.url}/orders/{order_id}/refunds` },
    });
    const customer = unique("cus");
    const id = await grant({
      tools: [tool],
      subject: { "context.customer_id": customer },
      field: "amount",
      total_max: 100,
      expires_at: inAnHour(),
      reason: "refunds",
    });
    const [runA, runB] = [await newRun(tool, customer), await newRun(tool, customer)];
    // A holds the order's lock through a retry (a keyed 503 keeps its lease); B queues behind it.
    await up.script({ kind: "status", status: 503 });
    const a = await one(runA, call(tool, 10, "a", { order_id: "ord_1" }));
    expect((await operation(a.operation_id)).body.phase).toBe("retry_scheduled");
    const b = await one(runB, call(tool, 20, "b", { order_id: "ord_1" }), 0);
    expect((await operation(b.operation_id)).body).toMatchObject({
      phase: "awaiting_lock",
      grant: { id },
    });

    const revoked = await api("DELETE", `/v1/grants/${id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.grant).toMatchObject({ state: "revoked", revoked_by: "test" });
    // A was sent before the revoke: its retry goes on under its key. B gets the lock: asks a person.
    expect(await fireAlarm(a.operation_id)).toBe(true);
    await up.waitForEffects(1);
    const asked = await until(
      async () => (await operation(b.operation_id)).body,
      (view) => view.phase !== "awaiting_lock",
    );
    expect(asked).toMatchObject({
      phase: "awaiting_approval",
      grant: { id, lapsed: true },
      approval: { state: "pending" },
    });
    expect((await up.state()).requests.map((r) => r.body.amount)).toEqual([10, 10]);
    const events = await trace(runB);
    expect(events.find((e) => e.type === "grant_lapsed")).toMatchObject({ grant_id: id });

    const approved = await api("POST", `/v1/operations/${b.operation_id}/approve`, {});
    expect(approved.status).toBe(200);
    await up.waitForEffects(2);
    expect((await operation(b.operation_id, 5)).body.result).toMatchObject({ status: "succeeded" });
    const state = await up.state();
    expect(state.effects.map((e) => e.body.amount)).toEqual([10, 20]);
    expect(once(state.effectsByKey)).toBe(true);
    // A revoked grant covers nothing new.
    expect(await one(runA, call(tool, 5, "c", { order_id: "ord_2" }))).toMatchObject({
      status: "awaiting_approval",
    });
  });

  it("outside its bounds a call asks a person, never refused: over per_call_max, another tool, another subject, expired", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const other = await registered(up.url);
    const customer = unique("cus");
    const expiresAt = Date.now() + 60_000;
    const id = await grant(
      refundGrant(tool, customer, {
        total_max: 1000,
        expires_at: new Date(expiresAt).toISOString(),
      }),
    );
    const runId = await newRun(tool, customer);
    expect(await one(runId, call(tool, 51))).toMatchObject({ status: "awaiting_approval" });
    const otherTool = await newRun(other, customer);
    expect(await one(otherTool, call(other, 5))).toMatchObject({ status: "awaiting_approval" });
    const otherCustomer = await newRun(tool, unique("cus"));
    expect(await one(otherCustomer, call(tool, 5))).toMatchObject({ status: "awaiting_approval" });
    expect(await one(runId, call(tool, 5))).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);

    // Past its expiry: the next call asks a person.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(expiresAt + 1_000);
    expect(await one(runId, call(tool, 6), 0)).toMatchObject({ status: "awaiting_approval" });
    expect((await shown(id)).state).toBe("expired");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("another tenant can neither see, use nor revoke a grant", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const customer = unique("cus");
    const id = await grant({
      tools: [tool],
      subject: "any",
      count: 10,
      expires_at: inAnHour(),
      reason: "any refund",
    });
    const other = await newTenant(ALL_SCOPES);
    expect((await api("GET", `/v1/grants/${id}`, undefined, as(other.key))).status).toBe(404);
    expect((await api("GET", "/v1/grants", undefined, as(other.key))).body.grants).toEqual([]);
    const revoke = await api("DELETE", `/v1/grants/${id}`, undefined, as(other.key));
    expect(revoke.status).toBe(404);
    expect(revoke.body.code).toBe("not_found");
    // Its own tool of the same name, for the same customer: asks a person.
    const theirs = refundTool(up.url, { name: tool });
    expect((await api("PUT", `/v1/tools/${tool}`, theirs, as(other.key))).status).toBe(201);
    const run = await newRun(tool, customer, other.key);
    const asked = await api(
      "POST",
      `/v1/runs/${run}/turns?format=native`,
      { calls: [call(tool, 5)] },
      { ...as(other.key), Prefer: "wait=5" },
    );
    expect(asked.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    expect((await up.state()).effects).toHaveLength(0);
    expect(await shown(id)).toMatchObject({ state: "live", used: { calls: 0 } });
  });

  it("bad bodies are refused typed, nothing stored", async () => {
    const fresh = await newTenant(ALL_SCOPES);
    const good = refundGrant("refund", "cus_42");
    const bad: Array<Record<string, unknown>> = [
      { ...good, amount_max: 5 },
      { ...good, total_max: undefined, count: undefined },
      { ...good, field: undefined },
      { ...good, subject: { "context.customer_id": "a", "context.user": "b" } },
      { ...good, subject: { customer_id: "a" } },
      { ...good, tools: [] },
      { ...good, total_max: -1 },
      { ...good, count: 1.5 },
      { ...good, expires_at: new Date(Date.now() - 1_000).toISOString() },
      { ...good, expires_at: new Date(Date.now() + 40 * 86_400_000).toISOString() },
      { ...good, expires_at: "tomorrow" },
    ];
    for (const body of bad) {
      const refused = await postGrant(body, fresh.key);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.code).toBe("invalid_request");
    }
    const noScope = await newTenant(["runs:write"]);
    expect((await postGrant(good, noScope.key)).status).toBe(403);
    expect((await api("GET", "/v1/grants", undefined, as(fresh.key))).body.grants).toEqual([]);
    expect((await api("GET", "/v1/grants/gr_nope", undefined, as(fresh.key))).status).toBe(404);
    expect((await postGrant(good, fresh.key)).status).toBe(201);
  });
});
