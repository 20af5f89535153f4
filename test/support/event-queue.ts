// Driving the EVENTS queue consumer by hand (issue 38): a batch of messages whose ack/retry are
// recorded, and an env whose EVENTS producer records what the consumer queues (each message with its
// delay) and refuses, as the platform does, a sendBatch over 100 messages or 256 KB. The recorded
// `delivery` messages are fed back as the next batch: the retry schedule runs in one test, without
// waiting for its delays.
import { env } from "cloudflare:workers";
import {
  ToolgateEvent,
  type EventMessage,
  type EventType,
} from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { handleEventBatch } from "../../src/events/consumer.ts";
import type { DeliveryOptions } from "../../src/events/deliver.ts";

export const realEnv = env as unknown as Env;

/** Valid data for each event type (the consumer drops an event whose data does not match its type). */
function sampleData(type: EventType, nowMs: number): ToolgateEvent["data"] {
  const args = { order_id: "ord_1", amount: 1200 };
  const run = {
    user: "u1",
    created_at_ms: nowMs,
    expires_at_ms: nowMs + 3_600_000,
    cancelled_at_ms: null,
    usage: { turns: 1, tool_calls: 1, cost: 0 },
  };
  switch (type) {
    case "approval.requested":
    case "approval.decided":
    case "approval.expired":
    case "approval.voted":
    case "approval.reminded":
    case "approval.escalated":
    case "approval.quorum_reached":
      return {
        created_at_ms: nowMs,
        state: "pending",
        target: "order:ord_1",
        arguments: args,
        requested_by: "u1",
        expires_at_ms: nowMs + 15 * 60_000,
        decided_by: null,
        reason: null,
      };
    case "operation.outcome_unknown":
      return {
        created_at_ms: nowMs,
        status: "outcome_unknown",
        code: "timeout_unknown",
        reconcile: "human",
        needs_person: true,
        arguments: args,
      };
    case "operation.recorded":
      return {
        created_at_ms: nowMs,
        status: "succeeded",
        code: null,
        took_effect: true,
        attempts: 1,
        latency_ms: 10,
        via: "attempt",
        arguments: args,
      };
    case "lock.waiting_long":
      return { created_at_ms: nowMs, resource: "order:ord_1", blocked_by: null, waited_ms: 60_000 };
    case "credential.required":
      return {
        created_at_ms: nowMs,
        user: "u1",
        provider: "calendar",
        reason: "never connected",
        connect_url: "https://as.example/authorize",
      };
    case "turn.settled":
      return { turn_id: "turn_1", results: [], run };
    case "run.budget_exhausted":
      return { turn_id: "turn_1", call_id: "c1", code: "budget_exhausted", run };
    case "endpoint.failing":
      return {
        webhook_id: "wh",
        description: null,
        reason: "schedule_ended",
        given_up_event_id: `evt_${"0".repeat(32)}`,
        given_up_event_type: "approval.requested",
        attempts: 8,
        consecutive_failures: 8,
        last_status: 503,
        last_error: null,
      };
    case "webhook.test":
      return { webhook_id: "wh" };
    case "freeze.created":
    case "freeze.lifted":
      return {
        freeze_id: "fz",
        scope: { tool: "refund" },
        mode: "hold",
        writes_only: false,
        reason: "incident",
        expires_at: null,
        by: "ops",
      };
    case "tripwire.tripped":
      return {
        tripwire_id: "tw",
        subject: "context.customer_id:cus_1",
        measure: "count",
        threshold: 3,
        freeze_id: "tw.tw.1.abc",
        mode: "hold",
        reason: "refund spike",
        tripped_by: null,
      };
    case "grant.created":
    case "grant.confirmed":
    case "grant.revoked":
    case "grant.used":
    case "grant.exhausted":
      return {
        grant_id: "gr_01HZZZZZZZZZZZZZZZZZZZZZZZ",
        tools: ["refund"],
        subject: "any",
        field: "amount",
        per_call_max: 50,
        total_max: 100,
        count: null,
        expires_at: new Date(nowMs + 3_600_000).toISOString(),
        reason: "goodwill",
        state: "live",
        by: "alice",
      };
  }
}

/** An event of `tenantId` (approval.requested unless `type` says) with a fresh id and valid data. */
export function testEvent(
  tenantId: string,
  overrides: Partial<Omit<ToolgateEvent, "type" | "data">> & { type?: EventType } = {},
): ToolgateEvent {
  const hex = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");
  const type = overrides.type ?? "approval.requested";
  return ToolgateEvent.parse({
    id: `evt_${hex}`,
    type,
    at_ms: Date.now(),
    tenant_id: tenantId,
    run_id: "run_01HZZZZZZZZZZZZZZZZZZZZZZZ",
    operation_id: `op_${hex}`,
    tool: "refund",
    data: sampleData(type, Date.now()),
    ...overrides,
  });
}

export type Queued = { body: EventMessage; delaySeconds: number | undefined };
export type Did = { message: number; action: "ack" | "retry"; delaySeconds?: number };

/** The platform's sendBatch limits (https://developers.cloudflare.com/queues/platform/limits/). */
function checkLimits(messages: readonly { body: unknown }[]): void {
  const bytes = messages.reduce(
    (sum, m) => sum + new TextEncoder().encode(JSON.stringify(m.body)).byteLength,
    0,
  );
  if (messages.length > 100 || bytes > 256_000)
    throw new Error(`sendBatch refused: ${messages.length} messages, ${bytes} bytes`);
}

/** `base` (the real bindings by default) with an EVENTS producer that records instead of sending. */
export function recordingEnv(base: Env = realEnv, refuse = false) {
  const queued: Queued[] = [];
  const batches: number[] = [];
  const record = (body: EventMessage, options?: QueueSendOptions) => {
    if (refuse) throw new Error("queue unavailable");
    queued.push({ body, delaySeconds: options?.delaySeconds });
  };
  const fake = {
    ...base,
    EVENTS: {
      send: async (body: EventMessage, options?: QueueSendOptions) => record(body, options),
      sendBatch: async (messages: MessageSendRequest<EventMessage>[]) => {
        checkLimits(messages);
        if (refuse) throw new Error("queue unavailable");
        batches.push(messages.length);
        for (const m of messages) record(m.body, m);
      },
    },
  } as unknown as Env;
  return { env: fake, queued, batches };
}

/** One batch of `bodies` through the consumer: what it did with each message, by index. */
export async function consume(
  consumerEnv: Env,
  bodies: readonly EventMessage[],
  options: DeliveryOptions & { attempts?: number } = {},
): Promise<Did[]> {
  const did: Did[] = [];
  const messages = bodies.map((body, index) => ({
    id: `m${index}`,
    timestamp: new Date(),
    attempts: options.attempts ?? 1,
    body,
    ack: () => void did.push({ message: index, action: "ack" }),
    retry: (opts?: QueueRetryOptions) =>
      void did.push({ message: index, action: "retry", delaySeconds: opts?.delaySeconds }),
  }));
  const batch = { queue: "toolgate-events", messages, ackAll() {}, retryAll() {} };
  await handleEventBatch(batch as unknown as MessageBatch<EventMessage>, consumerEnv, options);
  return did.sort((a, b) => a.message - b.message);
}

/**
 * Runs `bodies` and then every `delivery` message they queue, batch after batch (at most 100 each,
 * the queue's batch size), until nothing more is queued or `rounds` batches ran: the whole retry
 * schedule, its delays skipped. Every message must be acked. The rounds' queued retries, in order.
 */
export async function runSchedule(
  bodies: readonly EventMessage[],
  options: DeliveryOptions & { rounds?: number } = {},
): Promise<{ rounds: Queued[][]; did: Did[] }> {
  const rounds: Queued[][] = [];
  const did: Did[] = [];
  let pending = [...bodies];
  for (let round = 0; pending.length > 0 && round < (options.rounds ?? 20); round++) {
    const recorded = recordingEnv();
    for (let at = 0; at < pending.length; at += 100)
      did.push(...(await consume(recorded.env, pending.slice(at, at + 100), options)));
    rounds.push(recorded.queued);
    pending = recorded.queued.map((q) => q.body);
  }
  return { rounds, did };
}
