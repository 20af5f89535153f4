// Freezes and operation controls (issue 34), through the public API with the counting upstream:
// a hold freeze holds new calls and retries with nothing sent, its lift sends each once; refuse ends
// unsent calls with nothing sent; another tool's freeze changes nothing; tenants never see each
// other's freezes; pause/resume/retry-now on a retrying write give one effect in all.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
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
  upstream,
} from "../support/api.ts";

const tenantAlarm = async () =>
  runDurableObjectAlarm(
    placedStub(env as unknown as Env, "TENANTS", (await testTenant()).tenantId) as any,
  );

const freeze = (id: string, body: Record<string, unknown>, key?: string) =>
  api("PUT", `/v1/freezes/${id}`, body, key ? { Authorization: `Bearer ${key}` } : {});

describe("freezes", () => {
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

describe("operation controls", () => {
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
});
