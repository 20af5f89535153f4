// The event plane when something stays broken (issue 38 items 1-4, issue 31 item 8): the retry
// schedule ends, whatever the endpoint saw meanwhile; an attempt the tenant cannot record is made
// again, never acked away; a failed event stays redeliverable for the retention period; a delivery
// made by hand cancels the scheduled retry; a hanging endpoint cannot make another tenant's request
// time out. The consumer is driven by hand (test/support/event-queue.ts) against real receivers.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import type {
  DeliveryMessage,
  EventMessage,
  ToolgateEvent,
} from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { deliverToEndpoints } from "../../src/events/deliver.ts";
import { ALL_SCOPES, api, newTenant, upstream } from "../support/api.ts";
import { consolePage } from "../support/console-page.ts";
import { consume, realEnv, recordingEnv, runSchedule, testEvent } from "../support/event-queue.ts";

afterEach(() => vi.restoreAllMocks());

async function webhookTenant() {
  const t = await newTenant(ALL_SCOPES);
  const auth = { Authorization: `Bearer ${t.key}` };
  return {
    ...t,
    call: (method: string, path: string, body?: unknown) => api(method, path, body, auth),
  };
}
type Tenant = Awaited<ReturnType<typeof webhookTenant>>;

async function endpoint(t: Tenant, url: string, events: string[] = ["*"]) {
  const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
  const put = await t.call("PUT", `/v1/webhooks/${id}`, { url, events, format: "standard" });
  expect(put.status).toBe(201);
  return { id, secret: put.body.secret as string };
}

const event = (tenantId: string) => testEvent(tenantId);
const fresh = (e: ToolgateEvent): EventMessage => ({ kind: "event", event: e });

/** webhook-ids the receiver got at `path`, in order. */
const idsAt = async (up: ReturnType<typeof upstream>, path: string) =>
  (await up.state()).requests
    .filter((request) => request.path === path)
    .map((request) => (request.headers as Record<string, string>)["webhook-id"]!);

const tenantObject = (tenantId: string) =>
  placedStub(realEnv, "TENANTS", tenantId) as unknown as DurableObjectStub;

/** The real bindings, but the tenant object's recordDeliveries rejects (a deploy reset it mid-batch). */
function recordsRejected(): Env {
  const tenants = realEnv.TENANTS;
  return {
    ...realEnv,
    TENANTS: {
      idFromName: (name: string) => tenants.idFromName(name),
      get: (id: DurableObjectId) => {
        const stub = tenants.get(id);
        return new Proxy(stub, {
          get: (target, prop) =>
            prop === "recordDeliveries"
              ? () =>
                  Promise.reject(new Error("Durable Object reset because its code was updated."))
              : Reflect.get(target, prop),
        });
      },
    },
  } as unknown as Env;
}

describe("the retry schedule ends (E1, E3, E6)", () => {
  it(
    "an endpoint down for 200 events: each is tried 8 times (none restarts at attempt 1) and given up; each stays redeliverable; the endpoint is failing and one endpoint.failing reaches the tenant's other endpoint, never the failing one",
    { timeout: 180_000 },
    async () => {
      const t = await webhookTenant();
      const down = upstream();
      await down.script(...Array.from({ length: 1600 }, () => ({ kind: "status", status: 503 })));
      const watch = upstream();
      const dead = await endpoint(t, `${down.url}/webhooks/dead`);
      const watcher = await endpoint(t, `${watch.url}/webhooks/watch`, ["endpoint.failing"]);
      const events = Array.from({ length: 200 }, () => event(t.tenantId));

      const { rounds, did } = await runSchedule(events.map(fresh));
      expect(did.every((d) => d.action === "ack")).toBe(true);
      // Round n queues attempt n + 2 of every event; after the eighth attempt nothing is queued.
      expect(rounds.map((queued) => queued.length)).toEqual([200, 200, 200, 200, 200, 200, 200, 0]);
      rounds.slice(0, 7).forEach((queued, n) => {
        const attempts = new Set(queued.map((q) => (q.body as DeliveryMessage).attempt));
        expect([...attempts]).toEqual([n + 2]);
      });
      // Every event reached the receiver exactly 8 times: the 100-row log of old rotated, and events
      // whose rows were gone started again at attempt 1.
      const perEvent = new Map<string, number>();
      for (const id of await idsAt(down, "/webhooks/dead"))
        perEvent.set(id, (perEvent.get(id) ?? 0) + 1);
      expect(perEvent.size).toBe(200);
      expect(new Set(perEvent.values())).toEqual(new Set([8]));
      // The log holds every attempt (1,600 rows, not the last 100), each event's 1 to 8 once.
      const logged = await runInDurableObject(
        tenantObject(t.tenantId),
        (_: unknown, state: DurableObjectState) =>
          state.storage.sql
            .exec<{ attempt: number; n: number; gave_up: number }>(
              "SELECT attempt, COUNT(*) AS n, SUM(gave_up) AS gave_up FROM webhook_deliveries WHERE endpoint_id = ? GROUP BY attempt ORDER BY attempt",
              dead.id,
            )
            .toArray(),
      );
      expect(logged).toEqual(
        [1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => ({
          attempt,
          n: 200,
          gave_up: attempt === 8 ? 200 : 0,
        })),
      );
      const log = (await t.call("GET", `/v1/webhooks/${dead.id}/deliveries?limit=100`)).body
        .deliveries;
      expect(
        log.every((d: Record<string, unknown>) => d.given_up && d.next_attempt_at === null),
      ).toBe(true);

      // The endpoint is marked failing, and the console says so.
      const listed = (await t.call("GET", "/v1/webhooks")).body.webhooks.find(
        (w: { id: string }) => w.id === dead.id,
      );
      expect(listed).toMatchObject({ state: "failing", consecutive_failures: 1600 });
      expect(listed.failing_since).toEqual(expect.any(String));
      const page = await consolePage("/console/webhooks", t.key);
      expect(page).toContain("failing since");
      expect(page).toContain("given up: redeliver by hand");

      // One endpoint.failing, stored for the feed, delivered to the watcher (signed), never to the
      // failing endpoint itself (it subscribes to "*").
      const feed = await t.call("GET", "/v1/events?type=endpoint.failing&limit=10");
      expect(feed.body.events).toEqual([
        expect.objectContaining({
          type: "endpoint.failing",
          data: expect.objectContaining({
            webhook_id: dead.id,
            reason: "schedule_ended",
            attempts: 8,
            last_status: 503,
          }),
        }),
      ]);
      const failingId = feed.body.events[0].id as string;
      await watch.waitForRequests(1);
      const [notice] = (await watch.state()).requests;
      expect(
        new Webhook(watcher.secret).verify(notice!.raw!, notice!.headers as Record<string, string>),
      ).toMatchObject({ type: "endpoint.failing", data: { webhook_id: dead.id } });
      expect(await idsAt(down, "/webhooks/dead")).not.toContain(failingId);

      // Every failed event is still redeliverable (the receiver answers again): delivered, attempt 9.
      for (const e of events) {
        const again = await t.call("POST", `/v1/webhooks/${dead.id}/redeliver`, {
          event_id: e.id,
        });
        expect(again.body).toMatchObject({ event_id: e.id, delivered: true, attempt: 9 });
      }
      const healed = (await t.call("GET", "/v1/webhooks")).body.webhooks.find(
        (w: { id: string }) => w.id === dead.id,
      );
      expect(healed).toMatchObject({ state: "healthy", failing_since: null });
    },
  );

  it("a stored event the endpoint subscribes to is redeliverable though it was never sent there; one it does not is not", async () => {
    const t = await webhookTenant();
    const up = upstream();
    const e = event(t.tenantId);
    // Stored at the tenant before the endpoint existed (nothing was sent anywhere).
    expect(await consume(recordingEnv().env, [fresh(e)])).toEqual([{ message: 0, action: "ack" }]);
    const later = await endpoint(t, `${up.url}/webhooks/later`, ["approval.requested"]);
    const other = await endpoint(t, `${up.url}/webhooks/other`, ["turn.settled"]);
    const again = await t.call("POST", `/v1/webhooks/${later.id}/redeliver`, { event_id: e.id });
    expect(again.body).toMatchObject({ delivered: true, attempt: 1 });
    const refused = await t.call("POST", `/v1/webhooks/${other.id}/redeliver`, { event_id: e.id });
    expect(refused.status).toBe(404);
    expect(await idsAt(up, "/webhooks/later")).toEqual([e.id]);
    expect(await idsAt(up, "/webhooks/other")).toEqual([]);
  });

  it("an event another version wrote (data this version's schema does not know) is stored, listed and delivered as written, never dropped; the index skips it", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await endpoint(t, `${up.url}/webhooks/any`);
    // A rolling deploy: the previous version's operation.recorded lacks a field this one requires
    // and carries one it does not know.
    const typed = testEvent(t.tenantId, { type: "operation.recorded" });
    const { created_at_ms: _dropped, ...data } = typed.data as Record<string, unknown>;
    const written = { ...typed, data: { ...data, written_by: "v-previous" } };
    const did = await consume(recordingEnv().env, [
      { kind: "event", event: written } as unknown as EventMessage,
    ]);
    expect(did).toEqual([{ message: 0, action: "ack" }]);
    const received = (await up.state()).requests.filter((r) => r.path === "/webhooks/any");
    expect(received.map((r) => (r.headers as Record<string, string>)["webhook-id"])).toEqual([
      typed.id,
    ]);
    expect(received[0]!.body).toMatchObject({
      type: "operation.recorded",
      data: { written_by: "v-previous" },
    });
    const feed = await t.call("GET", `/v1/events?type=operation.recorded`);
    expect(feed.status).toBe(200);
    expect(feed.body.events.map((e: { id: string }) => e.id)).toContain(typed.id);
    // Not an event at all (no envelope): acked and said, as before.
    const junk = await consume(recordingEnv().env, [
      { kind: "event", event: { type: "operation.recorded" } } as unknown as EventMessage,
    ]);
    expect(junk).toEqual([{ message: 0, action: "ack" }]);
  });

  it("the delivery log is kept by age, not by count: the tenant's alarm drops attempts older than the retention period", async () => {
    const t = await webhookTenant();
    const up = upstream();
    const hook = await endpoint(t, `${up.url}/webhooks/aged`);
    const [old, recent] = [event(t.tenantId), event(t.tenantId)];
    for (const e of [old, recent]) await deliverToEndpoints(realEnv, t.tenantId, e);
    // The first attempt is made to look three days old (the pool's retention is two).
    await runInDurableObject(tenantObject(t.tenantId), (_: unknown, state: DurableObjectState) =>
      state.storage.sql.exec(
        "UPDATE webhook_deliveries SET at_ms = at_ms - ? WHERE event_id = ?",
        3 * 24 * 3_600_000,
        old.id,
      ),
    );
    expect(await runDurableObjectAlarm(tenantObject(t.tenantId))).toBe(true);
    const log = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(log.map((d: { event_id: string }) => d.event_id)).toEqual([recent.id]);
  });
});

describe("at-least-once without exception (E2, E7)", () => {
  it("a retry whose attempt the tenant cannot record is retried by the queue (with a delay), never acked away; recorded once the tenant answers", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 500 }, { kind: "status", status: 500 });
    const hook = await endpoint(t, `${up.url}/webhooks/unrecorded`);
    const e = event(t.tenantId);
    const retry: DeliveryMessage = {
      kind: "delivery",
      endpoint_id: hook.id,
      event: e,
      attempt: 3,
      first_attempt_at_ms: Date.now(),
    };
    const broken = recordingEnv(recordsRejected());
    expect(await consume(broken.env, [retry], { attempts: 4 })).toEqual([
      { message: 0, action: "retry", delaySeconds: 40 },
    ]);
    expect(broken.queued).toEqual([]);
    expect(await idsAt(up, "/webhooks/unrecorded")).toEqual([e.id]); // the attempt was made

    // The queue hands it back; the tenant records it now: attempt 3, its successor queued.
    const fixed = recordingEnv();
    expect(await consume(fixed.env, [retry], { attempts: 5 })).toEqual([
      { message: 0, action: "ack" },
    ]);
    expect(fixed.queued.map((q) => q.body)).toEqual([
      expect.objectContaining({ kind: "delivery", endpoint_id: hook.id, attempt: 4 }),
    ]);
    const log = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(log.map((d: { attempt: number }) => d.attempt)).toEqual([3]);
  });

  it("an event whose first attempt the tenant cannot record gets that attempt queued again before the message is acked", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 500 });
    const hook = await endpoint(t, `${up.url}/webhooks/unrecorded`);
    const e = event(t.tenantId);
    const broken = recordingEnv(recordsRejected());
    expect(await consume(broken.env, [fresh(e)])).toEqual([{ message: 0, action: "ack" }]);
    expect(broken.queued).toEqual([
      {
        body: {
          kind: "delivery",
          endpoint_id: hook.id,
          event: e,
          attempt: 1,
          first_attempt_at_ms: expect.any(Number),
        },
        delaySeconds: 5,
      },
    ]);
    // That message, once the tenant answers: attempt 1 is made again and logged, its retry queued.
    const fixed = recordingEnv();
    await consume(fixed.env, [broken.queued[0]!.body]);
    const log = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(
      log.map((d: { attempt: number; delivered: boolean }) => [d.attempt, d.delivered]),
    ).toEqual([[1, true]]);
    expect(fixed.queued).toEqual([]);
  });

  it("two copies of one retry in a batch (the queue delivers at least once): one request, one successor, both acked", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 500 });
    const hook = await endpoint(t, `${up.url}/webhooks/twice`);
    const e = event(t.tenantId);
    const retry: DeliveryMessage = {
      kind: "delivery",
      endpoint_id: hook.id,
      event: e,
      attempt: 2,
      first_attempt_at_ms: Date.now(),
    };
    const recorded = recordingEnv();
    expect(await consume(recorded.env, [retry, retry])).toEqual([
      { message: 0, action: "ack" },
      { message: 1, action: "ack" },
    ]);
    expect(await idsAt(up, "/webhooks/twice")).toEqual([e.id]);
    expect(recorded.queued.map((q) => (q.body as DeliveryMessage).attempt)).toEqual([3]);
  });

  it("a batch whose tenant cannot be reached comes back later, with a growing delay, not at once", async () => {
    const t = await webhookTenant();
    const down = new Proxy(
      {},
      { get: () => () => Promise.reject(new Error("Durable Object is overloaded")) },
    );
    const unreachable = recordingEnv({
      ...realEnv,
      TENANTS: { idFromName: (name: string) => name, get: () => down },
    } as unknown as Env);
    const e = event(t.tenantId);
    for (const [attempts, delaySeconds] of [
      [1, 5],
      [4, 40],
      [9, 300],
    ])
      expect(await consume(unreachable.env, [fresh(e)], { attempts })).toEqual([
        { message: 0, action: "retry", delaySeconds },
      ]);
  });
});

describe("a delivered webhook stops its retries (31.8)", () => {
  it("a failed delivery shows its next attempt; a redeliver that succeeds cancels it: the retry, when it comes, sends nothing", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 500 });
    const hook = await endpoint(t, `${up.url}/webhooks/re`);
    const e = event(t.tenantId);
    const first = recordingEnv();
    await consume(first.env, [fresh(e)]);
    expect(first.queued).toHaveLength(1);

    const pending = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(pending).toEqual([
      expect.objectContaining({ attempt: 1, delivered: false, given_up: false, by_hand: false }),
    ]);
    expect(Date.parse(pending[0].next_attempt_at)).toBeGreaterThan(Date.parse(pending[0].at));
    expect(await consolePage("/console/webhooks", t.key)).toContain("next attempt");

    const again = await t.call("POST", `/v1/webhooks/${hook.id}/redeliver`, { event_id: e.id });
    expect(again.body).toMatchObject({ delivered: true, attempt: 2 });
    const settled = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(
      settled.map((d: Record<string, unknown>) => [d.attempt, d.by_hand, d.next_attempt_at]),
    ).toEqual([
      [2, true, null],
      [1, false, null],
    ]);

    // The scheduled retry arrives: acked, nothing sent, nothing queued.
    const later = recordingEnv();
    expect(await consume(later.env, [first.queued[0]!.body])).toEqual([
      { message: 0, action: "ack" },
    ]);
    expect(later.queued).toEqual([]);
    expect(await idsAt(up, "/webhooks/re")).toEqual([e.id, e.id]);
  });

  it("a redeliver that fails leaves the scheduled retry standing", async () => {
    const t = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 500 }, { kind: "status", status: 502 });
    const hook = await endpoint(t, `${up.url}/webhooks/still`);
    const e = event(t.tenantId);
    const first = recordingEnv();
    await consume(first.env, [fresh(e)]);
    const planned = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries[0]
      .next_attempt_at;
    expect(planned).toEqual(expect.any(String));
    const again = await t.call("POST", `/v1/webhooks/${hook.id}/redeliver`, { event_id: e.id });
    expect(again.body).toMatchObject({ delivered: false, status: 502, attempt: 2 });
    const [latest] = (await t.call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(latest).toMatchObject({ by_hand: true, next_attempt_at: planned, given_up: false });
    const later = recordingEnv();
    await consume(later.env, [first.queued[0]!.body]);
    expect(await idsAt(up, "/webhooks/still")).toEqual([e.id, e.id, e.id]);
  });
});

/**
 * The platform's rule the pool does not enforce: at most 6 requests of one invocation wait for
 * response headers at once; a 7th waits for one of them (and its signal can abort it meanwhile).
 */
function sixConnections() {
  const real = globalThis.fetch;
  let open = 0;
  const waiting: Array<() => void> = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const signal = init?.signal ?? undefined;
    if (open >= 6)
      await new Promise<void>((resolve, reject) => {
        const turn = () => resolve();
        waiting.push(turn);
        signal?.addEventListener("abort", () => {
          waiting.splice(waiting.indexOf(turn), 1);
          reject(signal.reason);
        });
      });
    open += 1;
    try {
      return await real(input, init);
    } finally {
      open -= 1;
      waiting.shift()?.();
    }
  });
}

describe("one tenant cannot slow another (E4)", () => {
  it("12 events for one tenant's endpoint that never answers, then one for another tenant's healthy endpoint, in one batch of a 6-connection invocation: the healthy one is delivered, not timed out", async () => {
    const a = await webhookTenant();
    const b = await webhookTenant();
    const hanging = upstream();
    const fine = upstream();
    await hanging.script(...Array.from({ length: 12 }, () => ({ kind: "hang" })));
    const stuck = await endpoint(a, `${hanging.url}/webhooks/stuck`);
    const healthy = await endpoint(b, `${fine.url}/webhooks/healthy`);
    const forA = Array.from({ length: 12 }, () => fresh(event(a.tenantId)));
    const forB = event(b.tenantId);

    sixConnections();
    const did = await consume(recordingEnv().env, [...forA, fresh(forB)], { timeoutMs: 300 });
    vi.restoreAllMocks();
    expect(did.every((d) => d.action === "ack")).toBe(true);

    expect(await idsAt(fine, "/webhooks/healthy")).toEqual([forB.id]);
    const logB = (await b.call("GET", `/v1/webhooks/${healthy.id}/deliveries`)).body.deliveries;
    expect(logB).toEqual([
      expect.objectContaining({ event_id: forB.id, delivered: true, status: 200, error: null }),
    ]);
    // The hanging endpoint held at most two connections for one timeout; its other events in this
    // batch were not sent (failed attempts, retried on their schedule).
    const logA = (await a.call("GET", `/v1/webhooks/${stuck.id}/deliveries`)).body.deliveries;
    const errors = logA.map((d: { error: string }) => d.error);
    expect(errors.filter((error: string) => error === "no response within 300 ms").length).toBe(2);
    expect(errors.filter((error: string) => error.startsWith("not sent:")).length).toBe(10);
    expect((await hanging.state()).requests).toHaveLength(2);
  });
});
