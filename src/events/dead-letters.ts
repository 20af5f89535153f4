// The EVENTS queue's dead letters (issue 18). The outbox deletes its row once the queue has accepted
// an event, so from then on the queue holds the only copy: a message the consumer could not handle
// in its 10 tries (the tenant object unreachable or overloaded for that long) goes to the dead-letter
// queue `toolgate-events-dlq` instead of being dropped, and this consumer keeps trying it with long
// delays: the same handling as the main consumer (store at the tenant, then deliver), and when that
// fails again the message is parked — sent to the dead-letter queue again, delayed 5 min, 10 min, …
// up to 12 h — and the failed copy acked. It gives up only once the event is older than the
// retention period (the tenant would prune it on arrival): then it is dropped and said so, loudly
// (`toolgate.event_lost`, with the event's id, type, tenant and run). A park that cannot be sent
// leaves the message to the queue's own retries (max_retries in wrangler.toml).
import { retentionMs } from "../config.ts";
import { EventMessage } from "../domain/journal/events.ts";
import type { Env } from "../durable/env.ts";
import { deadLetterQueue, EVENT_QUEUES } from "../durable/placement.ts";
import { handleEventBatch } from "./consumer.ts";

/** The dead-letter queue's name (wrangler.toml): index.ts routes its batches here. */
export const DEAD_LETTER_QUEUE = EVENT_QUEUES.none.deadLetterQueue;
const FIRST_PARK_S = 5 * 60;
/** Cloudflare Queues accepts a delivery delay of at most 12 hours. */
const MAX_PARK_S = 12 * 60 * 60;

/** A dead letter: the message as it was, and how often this consumer has parked it. */
export type DeadLetter = EventMessage & { parked?: number };

/** The delay before the next try after the `parked`-th park (1-based): doubling, capped at 12 h. */
export const parkDelaySeconds = (parked: number) =>
  Math.min(MAX_PARK_S, FIRST_PARK_S * 2 ** Math.max(0, parked - 1));

export async function handleDeadLetters(
  batch: MessageBatch<DeadLetter>,
  env: Env,
  nowMs = Date.now(),
): Promise<void> {
  const failed = new Set<Message<DeadLetter>>();
  // The main consumer's handling, with "retry" meaning "park" for each message it gives back.
  const wrapped = batch.messages.map((message) => ({
    id: message.id,
    body: message.body,
    timestamp: message.timestamp,
    attempts: message.attempts,
    ack: () => message.ack(),
    retry: () => void failed.add(message),
  }));
  await handleEventBatch({ ...batch, messages: wrapped } as MessageBatch<EventMessage>, env);
  await Promise.all([...failed].map((message) => park(message, env, nowMs)));
}

async function park(message: Message<DeadLetter>, env: Env, nowMs: number): Promise<void> {
  const { parked = 0, ...body } = message.body;
  // Read as the main consumer reads it (an event another version wrote stays an event, untyped);
  // the main consumer acked anything malformed, so this parses. An index drop (issue 20) carries no
  // event and has no age: it is parked until the index takes it (a pruned row must not outlive its
  // operation).
  const read = EventMessage.safeParse(body);
  if (!read.success) return message.ack();
  const event = read.data.kind === "index_drop" ? null : read.data.event;
  const tenantId =
    read.data.kind === "index_drop" ? read.data.tenant_id : read.data.event.tenant_id;
  if (event && nowMs > event.at_ms + retentionMs(env)) {
    console.error(
      JSON.stringify({
        level: "error",
        event: "toolgate.event_lost",
        detail: `tried for the whole retention period (parked ${parked} times): the tenant would prune it on arrival`,
        kind: body.kind,
        event_id: event.id,
        type: event.type,
        tenant_id: event.tenant_id,
        run_id: event.run_id,
        operation_id: event.operation_id,
      }),
    );
    return message.ack();
  }
  const delaySeconds = parkDelaySeconds(parked + 1);
  try {
    // The dead-letter queue of the tenant's jurisdiction (placement.ts), as the message came from.
    await deadLetterQueue(env, tenantId).send({ ...body, parked: parked + 1 } as DeadLetter, {
      contentType: "json",
      delaySeconds,
    });
  } catch {
    return message.retry({ delaySeconds: 60 });
  }
  console.error(
    JSON.stringify({
      level: "warn",
      event: "toolgate.event_parked",
      kind: body.kind,
      ...(event ? { event_id: event.id, type: event.type } : {}),
      tenant_id: tenantId,
      parked: parked + 1,
      next_try_in_s: delaySeconds,
    }),
  );
  message.ack();
}
