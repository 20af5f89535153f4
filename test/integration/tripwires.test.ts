// Tripwires (issue 34 item 2), through the public API with the counting upstream: 3 refunds per
// minute per customer — 10 concurrent refunds send exactly 3, hold the rest, trip once (one event,
// one freeze); another customer is unaffected; the lift sends each held one once and re-arms the
// tripwire; sum(amount) with refuse; re-posts and re-proposals count once; failure_rate after
// enough failures; a counter killed between its trip and the freeze still makes the freeze once;
// tenants never see each other's tripwires; bad bodies are refused typed, nothing stored.
import { env } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import * as stubs from "../../src/durable/stubs.ts";
import { api, manifest, newTenant, testTenant, turn, unique, upstream } from "../support/api.ts";

const realEnv = env as unknown as Env;
const tenantAlarm = async () =>
  runDurableObjectAlarm(placedStub(realEnv, "TENANTS", (await testTenant()).tenantId) as any);
const counter = async (tripwire: string, subject: string): Promise<DurableObjectStub> =>
  stubs.limitStub(
    realEnv,
    (await testTenant()).tenantId,
    `tripwire:${tripwire}`,
    subject,
  ) as unknown as DurableObjectStub;

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

/** A count tripwire of `threshold` per tenant on a new refund tool, and a run to call it from. */
async function countTripwire(threshold: number, mode: "hold" | "refuse") {
  const up = upstream();
  const tool = await registered(up.url);
  const id = unique("tw");
  const put = await putTripwire(id, {
    measure: "count",
    tool,
    window: "1m",
    threshold,
    then: { mode, reason: "spike" },
  });
  expect(put.status).toBe(201);
  return { up, tool, id, runId: await newRun(tool, unique("cus")) };
}

describe("tripwires", { timeout: 30_000 }, () => {
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

  it("sum(amount) above 100 per customer, refuse: 40 + 50 sent; 20 goes above → rejected/frozen with nothing sent, and so is every later refund", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const id = unique("tw");
    expect(
      (
        await putTripwire(id, {
          measure: "sum(amount)",
          tool,
          subject: "context.customer_id",
          window: "1h",
          threshold: 100,
          then: { mode: "refuse", reason: "refund volume" },
        })
      ).status,
    ).toBe(201);
    const runId = await newRun(tool, unique("cus"));
    expect(await refund(runId, tool, 40)).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 50)).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 20)).toMatchObject({ status: "rejected", code: "frozen" });
    expect(await refund(runId, tool, 1)).toMatchObject({ status: "rejected", code: "frozen" });
    expect((await up.state()).requests).toHaveLength(2);
    expect(await tripFreezes(id)).toHaveLength(1);
    expect(await tripEvents(id)).toHaveLength(1);
    await api("DELETE", `/v1/tripwires/${id}`);
  });

  it("re-posting the same turn and re-proposing the same refund count once", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const id = unique("tw");
    await putTripwire(id, {
      measure: "count",
      tool,
      subject: "context.customer_id",
      window: "1m",
      threshold: 2,
      then: { mode: "hold", reason: "spike" },
    });
    const runId = await newRun(tool, unique("cus"));
    const first = await refund(runId, tool, 7, "c1");
    expect(first).toMatchObject({ status: "succeeded" });
    // The same turn again (same call id), and the same refund proposed under a new call id.
    expect(await refund(runId, tool, 7, "c1")).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 7, "c1_again")).toMatchObject({
      status: "succeeded",
      operation_id: first.operation_id,
    });
    expect(await refund(runId, tool, 8)).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 9)).toMatchObject({ status: "pending", code: "frozen" });
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("failure_rate: trips only once min_calls outcomes are recorded and more than the threshold failed; the next call is held", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const id = unique("tw");
    await putTripwire(id, {
      measure: "failure_rate",
      tool,
      window: "1h",
      threshold: 0.5,
      min_calls: 3,
      then: { mode: "hold", reason: "upstream failing" },
    });
    const runId = await newRun(tool, unique("cus"));
    await up.script(...Array.from({ length: 3 }, () => ({ kind: "status", status: 404 })));
    // Two failures of two calls: below min_calls, nothing trips.
    expect(await refund(runId, tool, 1)).toMatchObject({ status: "failed" });
    expect(await refund(runId, tool, 2)).toMatchObject({ status: "failed" });
    expect(await tripFreezes(id)).toHaveLength(0);
    expect(await refund(runId, tool, 3)).toMatchObject({ status: "failed" });
    expect(await tripFreezes(id)).toHaveLength(1);
    expect(await refund(runId, tool, 4)).toMatchObject({ status: "pending", code: "frozen" });
    expect((await up.state()).requests).toHaveLength(3);
    expect(await tripEvents(id)).toHaveLength(1);
  });

  it("a counter killed between its trip and the freeze: the alarm makes the freeze once; the crossing call, posted again, is held on it", async () => {
    const { up, tool, id, runId } = await countTripwire(1, "hold");
    expect(await refund(runId, tool, 1)).toMatchObject({ status: "succeeded" });
    const object = await counter(id, "tenant");
    // This instance dies after committing the trip, before the tenant made the freeze.
    await runInDurableObject(object, (instance: unknown) => {
      (instance as { trip: { makeFreeze: () => Promise<boolean> } }).trip.makeFreeze = async () =>
        false;
    });
    const crossing = await turn(runId, [{ id: "cx", name: tool, arguments: { amount: 2 } }], 5);
    expect(JSON.stringify(crossing.body)).not.toContain('"succeeded"');
    expect(await tripFreezes(id)).toHaveLength(0);
    await evictDurableObject(object);
    expect(await runDurableObjectAlarm(object)).toBe(true);
    await runDurableObjectAlarm(object);
    expect(await tripFreezes(id)).toHaveLength(1);
    const again = await turn(runId, [{ id: "cx", name: tool, arguments: { amount: 2 } }], 5);
    expect(again.body.results[0]).toMatchObject({ status: "pending", code: "frozen" });
    expect(await tripFreezes(id)).toHaveLength(1);
    expect(await tripEvents(id)).toHaveLength(1);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a lift whose tell to the counter is lost: the next covered call is not refused, and the tripwire counts afresh", async () => {
    const { up, tool, id, runId } = await countTripwire(1, "refuse");
    expect(await refund(runId, tool, 1)).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 2)).toMatchObject({ status: "rejected", code: "frozen" });
    const [made] = await tripFreezes(id);
    // The tenant's tell (`untrip`) never reaches the counter.
    const object = await counter(id, "tenant");
    await runInDurableObject(object, (instance: unknown) => {
      (instance as { untrip: () => Promise<never> }).untrip = async () => {
        throw new Error("the tell was lost");
      };
    });
    const quiet = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      expect((await api("DELETE", `/v1/freezes/${made.id}`)).status).toBe(200);
      expect(quiet.mock.calls.map((call) => String(call[0]))).toContain(
        "tripwire: its counter was not told of the lift",
      );
    } finally {
      quiet.mockRestore();
    }
    // Counting afresh from the lift: one refund goes, the next trips again (a new freeze).
    expect(await refund(runId, tool, 3)).toMatchObject({ status: "succeeded" });
    expect(await refund(runId, tool, 4)).toMatchObject({ status: "rejected", code: "frozen" });
    const again = await tripFreezes(id);
    expect(again).toHaveLength(1);
    expect(again[0].id).not.toBe(made.id);
    expect(await tripEvents(id)).toHaveLength(2);
    expect((await up.state()).effects).toHaveLength(2);
    await runInDurableObject(object, (instance: unknown) => {
      delete (instance as { untrip?: unknown }).untrip;
    });
    await api("DELETE", `/v1/freezes/${again[0].id}`);
    await api("DELETE", `/v1/tripwires/${id}`);
  });

  it("a covered call writes its reservation, not the counter's trip state again; a changed definition is written once", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const id = unique("tw");
    const body = {
      measure: "count",
      tool,
      window: "1m",
      threshold: 100,
      then: { mode: "hold", reason: "spike" },
    };
    expect((await putTripwire(id, body)).status).toBe(201);
    const runId = await newRun(tool, unique("cus"));
    expect(await refund(runId, tool, 1)).toMatchObject({ status: "succeeded" });
    const object = await counter(id, "tenant");
    const inside = <T>(read: (store: { rowsWritten: number }, sql: SqlStorage) => T) =>
      runInDurableObject(object, (instance: unknown, state: DurableObjectState) =>
        read((instance as { store: { rowsWritten: number } }).store, state.storage.sql),
      );
    const written = () => inside((store) => store.rowsWritten);
    const before = await written();
    expect(await refund(runId, tool, 2)).toMatchObject({ status: "succeeded" });
    // The reservation alone (its row and its key's index entry): the trip state was upserted on
    // every reserve before.
    expect((await written()) - before).toBe(2);

    expect((await putTripwire(id, { ...body, threshold: 50 })).status).toBe(200);
    expect(await refund(runId, tool, 3)).toMatchObject({ status: "succeeded" });
    const spec = await inside((_, sql) =>
      JSON.parse(sql.exec("SELECT spec FROM trip_state").one().spec as string),
    );
    expect(spec).toMatchObject({ tripwireId: id, threshold: 50 });
    expect((await up.state()).effects).toHaveLength(3);
    await api("DELETE", `/v1/tripwires/${id}`);
  });

  it("tenants and bad bodies: another tenant neither sees nor deletes a tripwire; unknown fields, a bad measure, window or rate are refused typed, nothing stored", async () => {
    const id = unique("tw");
    const good = {
      measure: "count",
      window: "1m",
      threshold: 3,
      then: { mode: "hold", reason: "r" },
    };
    const bad = [
      { ...good, extra: 1 },
      { ...good, then: { mode: "hold", reason: "r", scope: { tenant: true } } },
      { ...good, measure: "avg(amount)" },
      { ...good, window: "1y" },
      { ...good, measure: "failure_rate", threshold: 3 },
      { ...good, min_calls: 5 },
      { ...good, subject: "customer_id" },
    ];
    for (const body of bad) {
      const put = await putTripwire(id, body);
      expect(put.status).toBe(400);
      expect(put.body.code).toBe("invalid_request");
    }
    const listed = async (key?: string) =>
      (
        (
          await api(
            "GET",
            "/v1/tripwires",
            undefined,
            key ? { Authorization: `Bearer ${key}` } : {},
          )
        ).body.tripwires as any[]
      ).map((t) => t.id);
    expect(await listed()).not.toContain(id);
    const weak = await newTenant(["runs:write"]);
    expect((await putTripwire(id, good, weak.key)).status).toBe(403);
    expect((await putTripwire(id, good)).status).toBe(201);
    const other = await newTenant(["freezes:write", "runs:read"]);
    expect(await listed(other.key)).toEqual([]);
    const del = await api("DELETE", `/v1/tripwires/${id}`, undefined, {
      Authorization: `Bearer ${other.key}`,
    });
    expect(del.status).toBe(404);
    expect(await listed()).toContain(id);
    expect((await api("DELETE", `/v1/tripwires/${id}`)).status).toBe(200);
    expect(await listed()).not.toContain(id);
  });
});
