// Driving the EVENTS queue consumer by hand (issue 38): a batch of messages whose ack/retry are
// recorded, and an env whose EVENTS producer records what the consumer queues (each message with its
// delay) and refuses, as the platform does, a sendBatch over 100 messages or 256 KB. The recorded
// `delivery` messages are fed back as the next batch: the retry schedule runs in one test, without
// waiting for its delays.
import { env } from "cloudflare:workers";
import type { EventMessage, ToolgateEvent } from "../../src/domain/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { handleEventBatch } from "../../src/events/consumer.ts";
import type { DeliveryOptions } from "../../src/events/deliver.ts";

export const realEnv = env as unknown as Env;

/** An approval.requested event of `tenantId` with a fresh id (the fields a webhook shows). */
export function testEvent(tenantId: string, overrides: Partial<ToolgateEvent> = {}): ToolgateEvent {
  const hex = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");
  return {
    id: `evt_${hex}`,
    type: "approval.requested",
    at_ms: Date.now(),
    tenant_id: tenantId,
    run_id: "run_01HZZZZZZZZZZZZZZZZZZZZZZZ",
    operation_id: `op_${hex}`,
    tool: "refund",
    data: {
      target: "order:ord_1",
      arguments: { order_id: "ord_1", amount: 1200 },
      requested_by: "u1",
      expires_at_ms: Date.now() + 15 * 60_000,
    },
    ...overrides,
  };
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
