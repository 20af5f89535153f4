// The EVENTS queue's dead letters (issue 18): after the main consumer's 10 tries a message goes to
// toolgate-events-dlq, whose consumer (events/dead-letters.ts) keeps trying it with long delays
// instead of dropping it — the outbox row is gone by then, so the queue holds the only copy. The
// consumer is called directly with a batch whose tenant RPC fails (the pool cannot make a real
// tenant object unreachable), then with the real bindings: the parked event is stored and delivered.
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ToolgateEvent } from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import {
  DEAD_LETTER_QUEUE,
  handleDeadLetters,
  type DeadLetter,
} from "../../src/events/dead-letters.ts";
import worker from "../../src/index.ts";
import { ALL_SCOPES, api, newTenant, upstream } from "../support/api.ts";
import { testEvent } from "../support/event-queue.ts";

const realEnv = env as unknown as Env;
const RETENTION_MS = 2 * 24 * 60 * 60_000; // the pool's TOOLGATE_RETENTION_MS (vitest.config.ts)

const event = (tenantId: string, atMs = Date.now()) => testEvent(tenantId, { at_ms: atMs });

/** A one-message dead-letter batch that records what the consumer did with it. */
function batchOf(body: DeadLetter) {
  const did: string[] = [];
  const message = {
    id: crypto.randomUUID(),
    timestamp: new Date(),
    attempts: 1,
    body,
    ack: () => void did.push("ack"),
    retry: () => void did.push("retry"),
  };
  const batch = {
    queue: DEAD_LETTER_QUEUE,
    messages: [message],
    ackAll: () => {},
    retryAll: () => {},
  } as unknown as MessageBatch<DeadLetter>;
  return { batch, did };
}

/** The real bindings, but the tenant object throws on every call and the parks are recorded. */
function unreachableTenant(sendFails = false) {
  const parked: Array<{ body: DeadLetter; delaySeconds: number | undefined }> = [];
  const down = new Proxy(
    {},
    { get: () => () => Promise.reject(new Error("Durable Object is overloaded")) },
  );
  const fake = {
    ...realEnv,
    TENANTS: { idFromName: (name: string) => name, get: () => down },
    EVENTS_DLQ: {
      send: async (body: DeadLetter, options?: QueueSendOptions) => {
        if (sendFails) throw new Error("queue unavailable");
        parked.push({ body, delaySeconds: options?.delaySeconds });
      },
    },
  } as unknown as Env;
  return { env: fake, parked };
}

afterEach(() => vi.restoreAllMocks());

describe("EVENTS dead letters", () => {
  it(
    "an event whose tenant cannot be reached is parked with a growing delay, not dropped; once the tenant answers it is stored and delivered, signed",
    { timeout: 30_000 },
    async () => {
      const t = await newTenant(ALL_SCOPES);
      const auth = { Authorization: `Bearer ${t.key}` };
      const up = upstream();
      const put = await api(
        "PUT",
        "/v1/webhooks/dlq",
        { url: `${up.url}/webhooks/dlq`, events: ["approval.requested"], format: "standard" },
        auth,
      );
      expect(put.status).toBe(201);
      const lost = event(t.tenantId);

      const down = unreachableTenant();
      const first = batchOf({ kind: "event", event: lost });
      // Through the Worker's queue handler: a batch of the dead-letter queue goes to its consumer.
      await worker.queue(first.batch, down.env);
      // Acked only because a copy is parked for later: 5 min, then doubling.
      expect(first.did).toEqual(["ack"]);
      expect(down.parked).toEqual([
        { body: { kind: "event", event: lost, parked: 1 }, delaySeconds: 300 },
      ]);
      const again = batchOf(down.parked[0]!.body);
      await handleDeadLetters(again.batch, down.env);
      expect(again.did).toEqual(["ack"]);
      expect(down.parked[1]).toEqual({
        body: { kind: "event", event: lost, parked: 2 },
        delaySeconds: 600,
      });
      expect((await up.state()).requests).toHaveLength(0);

      // The tenant answers again: the parked copy is stored (the feed has it) and delivered.
      const back = batchOf(down.parked[1]!.body);
      await handleDeadLetters(back.batch, realEnv);
      expect(back.did).toEqual(["ack"]);
      const feed = await api("GET", "/v1/events?limit=100", undefined, auth);
      expect(feed.body.events.map((e: ToolgateEvent) => e.id)).toContain(lost.id);
      const got = (await up.state()).requests.filter((r) => r.path === "/webhooks/dlq");
      expect(got).toHaveLength(1);
      const headers = got[0]!.headers as Record<string, string>;
      expect(headers["webhook-id"]).toBe(lost.id);
      expect(new Webhook(put.body.secret).verify(got[0]!.raw!, headers)).toMatchObject({
        type: "approval.requested",
      });
    },
  );

  it("an event another version wrote (its data unknown to this one) is parked like any other, not thrown back to the queue", async () => {
    const t = await newTenant(ALL_SCOPES);
    const down = unreachableTenant();
    const typed = event(t.tenantId);
    const written = { ...typed, data: { written_by: "v-previous" } } as unknown as ToolgateEvent;
    const { batch, did } = batchOf({ kind: "event", event: written });
    await handleDeadLetters(batch, down.env);
    expect(did).toEqual(["ack"]);
    expect(down.parked).toEqual([
      { body: { kind: "event", event: written, parked: 1 }, delaySeconds: 300 },
    ]);
  });

  it("a failed endpoint retry (a delivery message) is parked too, and the delay stops growing at 12 h", async () => {
    const t = await newTenant(ALL_SCOPES);
    const down = unreachableTenant();
    const { batch, did } = batchOf({
      kind: "delivery",
      endpoint_id: "dlq",
      event: event(t.tenantId),
      parked: 20,
    });
    await handleDeadLetters(batch, down.env);
    expect(did).toEqual(["ack"]);
    expect(down.parked).toEqual([
      {
        body: expect.objectContaining({ kind: "delivery", endpoint_id: "dlq", parked: 21 }),
        delaySeconds: 12 * 60 * 60,
      },
    ]);
  });

  it("a park that cannot be sent is not acked: the queue keeps the message", async () => {
    const t = await newTenant(ALL_SCOPES);
    const down = unreachableTenant(true);
    const { batch, did } = batchOf({ kind: "event", event: event(t.tenantId) });
    await handleDeadLetters(batch, down.env);
    expect(did).toEqual(["retry"]);
  });

  it("an event older than the retention period is given up explicitly (toolgate.event_lost), not silently", async () => {
    const t = await newTenant(ALL_SCOPES);
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation(
      (line: unknown) => void logged.push(String(line)),
    );
    const old = event(t.tenantId, Date.now() - RETENTION_MS - 60_000);
    const down = unreachableTenant();
    const { batch, did } = batchOf({ kind: "event", event: old, parked: 12 });
    await handleDeadLetters(batch, down.env);
    expect(did).toEqual(["ack"]);
    expect(down.parked).toEqual([]);
    const lost = logged
      .map((line) => JSON.parse(line))
      .find((l) => l.event === "toolgate.event_lost");
    expect(lost).toMatchObject({
      level: "error",
      event_id: old.id,
      type: "approval.requested",
      tenant_id: t.tenantId,
    });
  });
});
