// One outbox, one suite (issue 32 item 2): the operation's events (riding in their log row, then
// `op_outbox`) and the run's (`run_events`) must behave alike. A send the queue refuses backs off on
// the one schedule (outbox.ts: 5 s, then doubling) and the alarm resends it with the same event id;
// an object that dies between the commit and the send resends after restart, and the webhook
// receiver gets each id once; rows written before the one outbox (commit 228353e) are still sent.
// The tenant is the third subject: its own `endpoint.failing` (`tenant_outbox`, written when a
// webhook delivery is given up) rides the same schedule, its next try being the tenant's alarm.
// The EVENTS producer is swapped in the live instance (as events.test.ts and event-batches.test.ts
// do); a restarted instance starts with the real binding again.
import { env } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventMessage, EventType, ToolgateEvent } from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { OP_OUTBOX_TABLE } from "../../src/durable/store/operation-rows.ts";
import type { DeliveryAttempt } from "../../src/durable/tenant/webhook-deliveries.ts";
import { testEvent } from "../support/event-queue.ts";
import {
  api,
  manifest,
  operation,
  opStub,
  setup,
  testTenant,
  turn,
  until,
  upstream,
} from "../support/api.ts";

const realEnv = env as unknown as Env;
const charge = { amount: 700, currency: "usd" };
type Up = ReturnType<typeof upstream>;
type Producer = { sendBatch: (messages: MessageSendRequest<EventMessage>[]) => Promise<unknown> };
/** An unsent event as the object stores it: its backoff (`attempts` tries failed, next at `nextAtMs`). */
type Pending = { id: string; type: string; attempts: number; nextAtMs: number };

/** What each object under the suite must offer it. */
type Subject = {
  name: string;
  /** The event the suite follows. */
  type: EventType;
  /** The charges its `commit()` makes at the upstream (each exactly once). */
  charges: number;
  /** An object (a fresh stub each call: a crashed one stays broken) whose `commit()` writes `type`. */
  start(up: Up): Promise<{ object: () => DurableObjectStub; commit: () => Promise<void> }>;
  /** Replaces the EVENTS binding in the live instance (its outbox's view of it). */
  setQueue(stub: DurableObjectStub, queue: Producer): Promise<void>;
  pending(stub: DurableObjectStub): Promise<Pending[]>;
  /**
   * Writes an unsent `type` row as the code before the one outbox stored it; arms the alarm. null:
   * the object's outbox has no older shape.
   */
  writeOld: ((stub: DurableObjectStub, id: string) => Promise<void>) | null;
};

const sql =
  (stub: DurableObjectStub) =>
  async <T>(read: (sql: SqlStorage, storage: DurableObjectStorage) => T | Promise<T>) =>
    runInDurableObject(stub, (_: unknown, state: DurableObjectState) =>
      read(state.storage.sql, state.storage),
    );
const has = (sql: SqlStorage, table: string) =>
  sql.exec("SELECT 1 FROM sqlite_schema WHERE name = ?", table).toArray().length > 0;

/** An event with every field its type asks (the envelope and data the old code wrote). */
function oldEnvelope(id: string, tenantId: string, runId: string, operationId: string | null) {
  return { id, at_ms: Date.now(), tenant_id: tenantId, run_id: runId, operation_id: operationId };
}
const runSummary = () => ({
  user: "u1",
  created_at_ms: Date.now(),
  expires_at_ms: Date.now() + 3_600_000,
  cancelled_at_ms: null,
  usage: { turns: 1, tool_calls: 1, cost: 0 },
});

const operationSubject: Subject = {
  name: "the operation",
  type: "operation.recorded",
  charges: 1,
  async start(up) {
    // Approval first: the object exists (and its queue can be swapped) before the transition.
    const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
    const { runId, name } = await setup(tool);
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = res.body.results[0].operation_id as string;
    return {
      object: () => opStub(operationId),
      commit: async () => {
        expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
        expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
      },
    };
  },
  setQueue: (stub, queue) =>
    runInDurableObject(stub, (instance: unknown) => {
      const shell = (instance as { shell: { env: Env } }).shell;
      shell.env = { ...shell.env, EVENTS: queue } as unknown as Env;
    }),
  pending: (stub) =>
    sql(stub)((sql) => {
      // Riding in their log row (never tried), or in `op_outbox` after a failed send.
      const inLog = sql
        .exec<{ seq: number; unsent_events: string | null }>("SELECT * FROM op_log")
        .toArray()
        .filter((row) => row.unsent_events)
        .flatMap((row) => JSON.parse(row.unsent_events!) as ToolgateEvent[])
        .map((e) => ({ id: e.id, type: e.type, attempts: 0, nextAtMs: NaN }));
      const outboxed = has(sql, "op_outbox")
        ? sql
            .exec<{ payload: string; attempts: number; next_at_ms: number }>(
              "SELECT payload, attempts, next_at_ms FROM op_outbox WHERE kind LIKE 'event:%'",
            )
            .toArray()
            .map((row) => {
              const e = JSON.parse(row.payload) as ToolgateEvent;
              return { id: e.id, type: e.type, attempts: row.attempts, nextAtMs: row.next_at_ms };
            })
        : [];
      return [...outboxed, ...inLog];
    }),
  writeOld: (stub, id) =>
    sql(stub)(async (sql, storage) => {
      const head = sql
        .exec<{ seq: number; frozen: string }>("SELECT seq, frozen FROM op_log ORDER BY seq")
        .toArray();
      const frozen = JSON.parse(head.find((row) => row.frozen)!.frozen) as Record<string, any>;
      // 228353e operation/events.ts: a failed send moved the event to `op_outbox` as `event:<type>`
      // with attempts 1, its payload the event as built (no schema, no `shadow` when false).
      const event = {
        ...oldEnvelope(id, frozen.tenant_id, frozen.run_id, frozen.id),
        type: "operation.recorded",
        tool: "refund",
        data: {
          status: "succeeded",
          code: null,
          took_effect: true,
          attempts: 1,
          latency_ms: 12,
          via: "attempt",
          arguments: charge,
          created_at_ms: frozen.created_at,
        },
      };
      sql.exec(OP_OUTBOX_TABLE);
      sql.exec(
        "INSERT INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, 'event:operation.recorded', ?, 1, ?, ?)",
        head.at(-1)!.seq,
        JSON.stringify(event),
        Date.now() + 5_000,
        Date.now(),
      );
      // Armed far ahead: on a loaded machine the 5 s the old row asks could pass before the test
      // fires the alarm itself, and the alarm would then run on its own, through the real queue.
      await storage.setAlarm(Date.now() + 600_000);
    }),
};

const runSubject: Subject = {
  name: "the run",
  type: "turn.settled",
  charges: 1,
  async start(up) {
    const { runId, name } = await setup(manifest({ url: up.url }));
    return {
      object: () => runStub(runId),
      commit: async () => {
        const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
        expect(res.body.results[0].status).toBe("succeeded");
      },
    };
  },
  setQueue: (stub, queue) =>
    runInDurableObject(stub, (instance: unknown) => {
      const events = (instance as { events: { env: Env } }).events;
      events.env = { ...events.env, EVENTS: queue } as unknown as Env;
    }),
  pending: (stub) =>
    sql(stub)((sql) =>
      has(sql, "run_events")
        ? sql
            .exec<{ payload: string; attempts: number; next_at_ms: number }>(
              "SELECT payload, attempts, next_at_ms FROM run_events WHERE sent = 0",
            )
            .toArray()
            .map((row) => {
              const e = JSON.parse(row.payload) as ToolgateEvent;
              return { id: e.id, type: e.type, attempts: row.attempts, nextAtMs: row.next_at_ms };
            })
        : [],
    ),
  writeOld: (stub, id) =>
    sql(stub)(async (sql, storage) => {
      const { tenantId } = await testTenant();
      const runId = sql.exec<{ id: string }>("SELECT id FROM run").toArray()[0]?.id ?? "run_old";
      // 228353e run/events.ts: the event as built, `sent = 0` until the queue took it.
      const event = {
        ...oldEnvelope(id, tenantId, runId, null),
        type: "turn.settled",
        tool: null,
        data: {
          turn_id: "turn_old",
          results: [
            { call_id: "c0", tool: "refund", operation_id: null, status: "succeeded", code: null },
          ],
          run: runSummary(),
        },
      };
      sql.exec(
        "INSERT INTO run_events (id, payload, sent, attempts, next_at_ms) VALUES (?, ?, 0, 3, ?)",
        id,
        JSON.stringify(event),
        Date.now() + 5_000,
      );
      // Armed far ahead: on a loaded machine the 5 s the old row asks could pass before the test
      // fires the alarm itself, and the alarm would then run on its own, through the real queue.
      await storage.setAlarm(Date.now() + 600_000);
    }),
};

function runStub(runId: string): DurableObjectStub {
  return placedStub(realEnv, "RUNS", runId) as unknown as DurableObjectStub;
}

const tenantSubject: Subject = {
  name: "the tenant",
  type: "endpoint.failing",
  charges: 0,
  async start(up) {
    const { tenantId } = await testTenant();
    // The endpoint whose delivery is given up (its own endpoint.failing never goes to it); it asks
    // for a type nothing else in this file sends.
    const deadId = `wh_dead_${crypto.randomUUID().slice(0, 8)}`;
    const put = await api("PUT", `/v1/webhooks/${deadId}`, {
      url: `${up.url}/webhooks/${deadId}`,
      events: ["lock.waiting_long"],
      format: "standard",
    });
    expect(put.status).toBe(201);
    const object = () => placedStub(realEnv, "TENANTS", tenantId) as unknown as DurableObjectStub;
    return {
      object,
      // The queue consumer's record of the 8th and last scheduled attempt (the schedule's end),
      // through the tenant's RPC: the endpoint becomes failing, endpoint.failing is written to
      // `tenant_outbox` in that transaction and sent after it.
      commit: async () => {
        const given: DeliveryAttempt = {
          event: testEvent(tenantId, { type: "lock.waiting_long" }),
          result: { delivered: false, status: 503, latency_ms: 5, snippet: "", error: null },
          atMs: Date.now(),
          attempt: 8,
          plan: { kind: "failed", reason: "schedule_ended" },
        };
        const tenant = object() as unknown as {
          recordDeliveries(id: string, attempts: DeliveryAttempt[]): Promise<unknown>;
        };
        expect(await tenant.recordDeliveries(deadId, [given])).toMatchObject([
          { attempt: 8, state: "failing" },
        ]);
      },
    };
  },
  setQueue: (stub, queue) =>
    runInDurableObject(stub, (instance: unknown) => {
      const object = instance as { env: Env };
      object.env = { ...object.env, EVENTS: queue } as unknown as Env;
    }),
  // Not written in a row: the tenant's next try is its alarm (shared with retention, but sooner).
  pending: (stub) =>
    sql(stub)(async (sql, storage) => {
      if (!has(sql, "tenant_outbox")) return [];
      const rows = sql.exec<{ payload: string }>("SELECT * FROM tenant_outbox").toArray();
      const nextAtMs = (await storage.getAlarm()) ?? NaN;
      return rows.map((row) => {
        const e = JSON.parse(row.payload) as ToolgateEvent;
        const attempts = (row as { attempts?: number }).attempts ?? 0;
        return { id: e.id, type: e.type, attempts, nextAtMs };
      });
    }),
  // `tenant_outbox` was added after 228353e (this session, issue 32): no row of an older shape exists.
  writeOld: null,
};

/** A producer that records the ids it was asked to send, then refuses, hangs or forwards them. */
function producer(mode: "refuse" | "hang" | "forward") {
  const asked: Array<{ id: string; type: string }> = [];
  const queue: Producer = {
    sendBatch: async (messages) => {
      for (const m of messages)
        if (m.body.kind === "event") asked.push({ id: m.body.event.id, type: m.body.event.type });
      if (mode === "refuse") throw new Error("queue unavailable");
      if (mode === "hang") return new Promise(() => {});
      return realEnv.EVENTS.sendBatch(messages);
    },
  };
  return { queue, asked };
}

/** A webhook endpoint of the test tenant for `type`; what it received, by webhook-id. */
async function receiver(up: Up, type: EventType) {
  const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
  const put = await api("PUT", `/v1/webhooks/${id}`, {
    url: `${up.url}/webhooks/${id}`,
    events: [type],
    format: "standard",
  });
  expect(put.status).toBe(201);
  const got = async () =>
    (await up.state()).requests
      .filter((r) => r.path.endsWith(`/webhooks/${id}`))
      .map((r) => r.headers["webhook-id"]!);
  return { got, gotFor: (eventId: string) => until(got, (ids) => ids.includes(eventId)) };
}

/** The tool's effects at the upstream (its webhook receiver's requests are not charges). */
const charges = async (up: Up) =>
  (await up.state()).effects.filter((e) => e.path.endsWith("/charges")).length;
const fire = (stub: DurableObjectStub) => runDurableObjectAlarm(stub);
const ids = (asked: Array<{ id: string; type: string }>, type: string) =>
  asked.filter((a) => a.type === type).map((a) => a.id);

afterEach(() => vi.restoreAllMocks());

describe.each([operationSubject, runSubject, tenantSubject])("the one outbox: $name", (subject) => {
  it("a send the queue refuses backs off on the one schedule; the alarm resends it with the same event id", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {}); // the refused sends, each said once
    const up = upstream();
    const hook = await receiver(up, subject.type);
    const { object, commit } = await subject.start(up);
    const refused = producer("refuse");
    await subject.setQueue(object(), refused.queue);
    const before = Date.now();
    await commit();
    const ofType = async () =>
      (await subject.pending(object())).filter((p) => p.type === subject.type);
    // The send runs after the commit, in the background: the first refusal backs it off 5 s.
    const [first] = await until(ofType, (rows) => rows[0]?.attempts === 1);
    expect(first).toMatchObject({ attempts: 1 });
    expect(first!.nextAtMs).toBeGreaterThanOrEqual(before + 5_000);
    expect(first!.nextAtMs).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(ids(refused.asked, subject.type)).toEqual([first!.id]);

    // Still refused when the alarm resends it: the next gap doubles (10 s), the id stays.
    const again = Date.now();
    expect(await fire(object())).toBe(true);
    const [second] = await ofType();
    expect(second).toMatchObject({ id: first!.id, attempts: 2 });
    expect(second!.nextAtMs).toBeGreaterThanOrEqual(again + 10_000);
    expect(second!.nextAtMs).toBeLessThanOrEqual(Date.now() + 10_000);
    expect(ids(refused.asked, subject.type)).toEqual([first!.id, first!.id]);

    // The queue is back: the alarm sends it with the id written in the transaction, once.
    const back = producer("forward");
    await subject.setQueue(object(), back.queue);
    expect(await fire(object())).toBe(true);
    expect(await ofType()).toEqual([]);
    expect(ids(back.asked, subject.type)).toEqual([first!.id]);
    expect((await hook.gotFor(first!.id)).filter((id) => id === first!.id)).toHaveLength(1);
    expect(await charges(up)).toBe(subject.charges);
  });

  it(
    "an object that dies between the commit and the send resends after the restart: same id, delivered once",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const hook = await receiver(up, subject.type);
      const { object, commit } = await subject.start(up);
      // The queue never answers this instance: the send is under way when the object dies.
      const dead = producer("hang");
      await subject.setQueue(object(), dead.queue);
      await commit();
      // The first send after the commit is under way (and never ends); the followed event waits in
      // storage, committed, not taken, never tried (no backoff recorded).
      await until(
        async () => dead.asked.length,
        (n) => n > 0,
      );
      const unsent = (await subject.pending(object())).filter((p) => p.type === subject.type);
      expect(unsent).toMatchObject([{ attempts: 0 }]);
      const id = unsent[0]!.id;
      // evictDurableObject waits for the hung send; an abort is the crash.
      await runInDurableObject(object(), (_: unknown, state: DurableObjectState) =>
        state.abort("crash"),
      ).catch(() => {});

      // A fresh instance (its own producer, forwarding to the real queue): the alarm sends it.
      const restarted = producer("forward");
      await subject.setQueue(object(), restarted.queue);
      expect(ids(restarted.asked, subject.type)).toEqual([]);
      expect(await fire(object())).toBe(true);
      expect((await subject.pending(object())).filter((p) => p.type === subject.type)).toEqual([]);
      expect(ids(restarted.asked, subject.type)).toEqual([id]);
      // An alarm delivered twice (at least once) sends nothing more.
      await fire(object());
      expect(ids(restarted.asked, subject.type)).toEqual([id]);
      const got = await hook.gotFor(id);
      expect(got.filter((x) => x === id)).toHaveLength(1);
      expect(await charges(up)).toBe(subject.charges);
    },
  );

  const writeOld = subject.writeOld;
  if (writeOld)
    it(
      "an unsent row written by the code before the one outbox (228353e) is still sent, with its id",
      { timeout: 20_000 },
      async () => {
        const up = upstream();
        const hook = await receiver(up, subject.type);
        const { object, commit } = await subject.start(up);
        await commit();
        await until(
          async () => (await subject.pending(object())).length,
          (n) => n === 0,
        );
        const oldId = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
        await writeOld(object(), oldId);
        // A deploy restarts the object: the new code meets the row in storage, not in memory.
        await evictDurableObject(object());
        const queue = producer("forward");
        await subject.setQueue(object(), queue.queue);
        expect(await fire(object())).toBe(true);
        expect(ids(queue.asked, subject.type)).toEqual([oldId]);
        expect(await subject.pending(object())).toEqual([]);
        expect((await hook.gotFor(oldId)).filter((x) => x === oldId)).toHaveLength(1);
      },
    );
});
