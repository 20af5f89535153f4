// Every sendBatch fits the queue's limits (issue 38, E5): a run whose events piled up while the
// queue refused them (an outage) sends them all once it recovers, in batches of at most 100
// messages and 256 KB. The run's producer is swapped in its live object, as events.test.ts does for
// an operation's, and the recovered one forwards to the real queue, so the consumer stores them.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventMessage, ToolgateEvent } from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { api, manifest, setup, turn, upstream } from "../support/api.ts";

const realEnv = env as unknown as Env;

/** The run's view of the EVENTS binding, replaced in its live instance. */
type Producer = { sendBatch: (messages: MessageSendRequest<EventMessage>[]) => Promise<unknown> };
const setRunQueue = (runId: string, queue: Producer) =>
  runInDurableObject(
    placedStub(realEnv, "RUNS", runId) as unknown as DurableObjectStub,
    (instance: unknown) => {
      const events = (instance as { events: { env: Env } }).events;
      events.env = { ...events.env, EVENTS: queue } as unknown as Env;
    },
  );

const unsentRows = (runId: string) =>
  runInDurableObject(
    placedStub(realEnv, "RUNS", runId) as unknown as DurableObjectStub,
    (_: unknown, state: DurableObjectState) =>
      state.storage.sql
        .exec<{ n: number }>("SELECT COUNT(*) AS n FROM run_events WHERE sent = 0")
        .one().n,
  );

async function feedOf(runId: string): Promise<ToolgateEvent[]> {
  const events: ToolgateEvent[] = [];
  let since: string | null = null;
  for (;;) {
    const res = await api(
      "GET",
      `/v1/events?type=turn.settled&limit=500${since ? `&since=${since}` : ""}`,
    );
    events.push(...(res.body.events as ToolgateEvent[]).filter((e) => e.run_id === runId));
    since = res.body.next_cursor;
    if (!res.body.has_more) return events;
  }
}

afterEach(() => vi.restoreAllMocks());

describe("event batches within the queue's limits", () => {
  it(
    "a run that settled 150 turns while the queue refused its events sends all 150 once it recovers, in batches of at most 100 messages and 256 KB",
    { timeout: 120_000 },
    async () => {
      vi.spyOn(console, "error").mockImplementation(() => {}); // 150 refused sends, each said once
      const up = upstream();
      const { runId, name } = await setup(manifest({ url: up.url }));
      const refused: number[] = [];
      await setRunQueue(runId, {
        sendBatch: async (messages) => {
          refused.push(messages.length);
          throw new Error("queue unavailable");
        },
      });
      for (let i = 0; i < 150; i++) {
        const res = await turn(runId, [
          { id: `c${i}`, name, arguments: { amount: i + 1, currency: "usd" } },
        ]);
        expect(res.body.results[0].status).toBe("succeeded");
      }
      expect(refused.length).toBeGreaterThan(0);
      expect(await unsentRows(runId)).toBe(150);

      // The queue is back: what the run hands it is checked against the platform's limits, then sent.
      const batches: Array<{ messages: number; bytes: number }> = [];
      await setRunQueue(runId, {
        sendBatch: async (messages) => {
          const bytes = messages.reduce(
            (sum, m) => sum + new TextEncoder().encode(JSON.stringify(m.body)).byteLength,
            0,
          );
          batches.push({ messages: messages.length, bytes });
          if (messages.length > 100 || bytes > 256_000) throw new Error("batch over the limits");
          await realEnv.EVENTS.sendBatch(messages);
        },
      });
      expect(
        await runDurableObjectAlarm(
          placedStub(realEnv, "RUNS", runId) as unknown as DurableObjectStub,
        ),
      ).toBe(true);
      expect(await unsentRows(runId)).toBe(0);
      expect(batches.map((b) => b.messages).reduce((a, b) => a + b, 0)).toBe(150);
      expect(batches.every((b) => b.messages <= 100 && b.bytes <= 256_000)).toBe(true);

      // All 150 reach the tenant, each once.
      let settled: ToolgateEvent[] = [];
      for (let i = 0; i < 400 && settled.length < 150; i++) {
        settled = await feedOf(runId);
        if (settled.length < 150) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(new Set(settled.map((e) => e.id)).size).toBe(150);
    },
  );
});
