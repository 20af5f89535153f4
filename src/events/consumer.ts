// The EVENTS queue consumer (issue 18). An `event` message is stored at its tenant
// (TenantObject.receiveEvents, deduplicated by id there) and in its tenant index (issue 20:
// IndexObject.ingest, one call per tenant per batch; `index_drop` messages remove pruned rows), then
// delivered to each of the tenant's subscribed webhook endpoints (deliverJobs: the tenant's store
// answers where each event goes; each endpoint's attempts are logged in one call per batch); an
// endpoint that failed gets its own `delivery` message carrying the attempt number and the first
// attempt's time, delayed by the retry schedule (domain/webhook-retry.ts), until the schedule ends.
// A `delivery` message is sent only if its endpoint still wants the event and has not received it
// meanwhile (TenantObject.deliveryTargets). The batch's requests take turns in one set of connection
// slots (send-slots.ts), so one slow or dead endpoint holds back no other's, whatever the tenant.
// A message is acked only once its attempts are recorded and what follows them is queued (an
// attempt the tenant could not record is made again, never acked away); anything else is retried
// by the queue, with a growing delay. Delivery is at-least-once: a redelivered message may deliver
// again, with the same webhook-id (Standard Webhooks receivers deduplicate by it).
import {
  EventMessage,
  excludedEndpoint,
  notifiedEndpoint,
  type DeliveryMessage,
  type ReadMessage,
  type ToolgateEvent,
} from "../domain/journal/events.ts";
import { queueRetryDelaySeconds } from "../domain/webhook-retry.ts";
import type { Env } from "../durable/env.ts";
import { eventsQueue } from "../durable/placement.ts";
import { indexStub } from "../durable/stubs.ts";
import type { EventRoutes } from "../durable/tenant/webhooks.ts";
import {
  deliverJobs,
  deliveryFor,
  type DeliveryJob,
  type DeliveryOptions,
  type EndpointOutcome,
} from "./deliver.ts";
import { sendInBatches } from "./queue-batches.ts";
import { SendSlots } from "./send-slots.ts";

/** Cloudflare Queues accepts a delivery delay of at most 12 hours. */
const MAX_DELAY_S = 12 * 60 * 60;

type Read<K extends ReadMessage["kind"]> = Extract<ReadMessage, { kind: K }>;
/**
 * A message to store and deliver, as read: `body.typed`, its event's data matches its type
 * (journal/events.ts readEvent); else only the index skips it.
 */
type Item = { message: Message<unknown>; body: Read<"event" | "delivery">; event: ToolgateEvent };
/** One endpoint's scheduled retry of an event. */
type Retry = Item & { body: Read<"delivery"> };
const isRetry = (item: Item): item is Retry => item.body.kind === "delivery";

export async function handleEventBatch(
  batch: MessageBatch<EventMessage>,
  env: Env,
  options: DeliveryOptions = {},
): Promise<void> {
  // Every webhook request of this invocation, whatever its tenant, takes its turn here.
  const slots = new SendSlots();
  const byTenant = new Map<string, Item[]>();
  const drops: Promise<void>[] = [];
  for (const message of batch.messages) {
    // Parsed once: what it is decides where it goes (an event of another version still is one).
    const parsed = EventMessage.safeParse(message.body);
    if (!parsed.success) {
      // Not an event at all (no envelope, or an unknown message kind): nothing will ever make it one.
      console.error(
        JSON.stringify({ level: "warn", event: "toolgate.event_malformed", id: message.id }),
      );
      message.ack();
      continue;
    }
    const body = parsed.data;
    if (body.kind === "index_drop") {
      drops.push(dropFromIndex(env, message, body));
      continue;
    }
    if (body.kind === "index_retry") {
      drops.push(retryIndex(env, message, body));
      continue;
    }
    if (!body.typed) warn("toolgate.event_untyped", body.event.tenant_id, body.event.id);
    const group = byTenant.get(body.event.tenant_id) ?? [];
    group.push({ message, body, event: body.event });
    byTenant.set(body.event.tenant_id, group);
  }
  await Promise.all([
    ...drops,
    ...[...byTenant].map(([tenantId, group]) => handleTenant(env, tenantId, group, slots, options)),
  ]);
}

/** Events the index did not take, queued again for it alone (false: the queue refused them too). */
async function requeueForIndex(env: Env, tenantId: string, events: ToolgateEvent[]) {
  try {
    await sendInBatches(eventsQueue(env, tenantId), events, (event) => ({
      body: { kind: "index_retry", event } satisfies EventMessage,
      contentType: "json" as const,
      delaySeconds: 5,
    }));
    return true;
  } catch (error) {
    warn("toolgate.index_requeue_failed", tenantId, error);
    return false;
  }
}

/** One event for the tenant index alone; retried by the queue until it takes it. */
async function retryIndex(
  env: Env,
  message: Message<unknown>,
  { event, typed }: Read<"index_retry">,
): Promise<void> {
  if (!typed) return message.ack(); // the index reads typed data only (storeAndRoute)
  try {
    await indexStub(env, event.tenant_id).ingest(event.tenant_id, [event]);
    message.ack();
  } catch (error) {
    warn("toolgate.index_ingest_failed", event.tenant_id, error);
    message.retry({ delaySeconds: backoff(message) });
  }
}

/** Retention's word that rows are gone (issue 20): the tenant index drops them. */
async function dropFromIndex(
  env: Env,
  message: Message<unknown>,
  { tenant_id: tenantId, operations, runs }: Read<"index_drop">,
): Promise<void> {
  try {
    await indexStub(env, tenantId).drop({ operations, runs });
    message.ack();
  } catch (error) {
    warn("toolgate.index_drop_failed", tenantId, error);
    message.retry({ delaySeconds: backoff(message) });
  }
}

async function handleTenant(
  env: Env,
  tenantId: string,
  group: Item[],
  slots: SendSlots,
  options: DeliveryOptions,
): Promise<void> {
  const delivery = deliveryFor(env, tenantId, slots, options);
  const fresh = group.filter((item) => item.body.kind === "event");
  // One copy of each event (the outbox alarm and the queue may both have sent it).
  const events = [...new Map(fresh.map((item) => [item.event.id, item.event])).values()];
  const untyped = new Set(fresh.filter((item) => !item.body.typed).map((item) => item.event.id));
  // One copy of each scheduled retry, too (the queue delivers at least once): the first.
  const retryOf = new Map<string, Retry>();
  for (const item of group)
    if (isRetry(item) && !retryOf.has(retryKey(item.body))) retryOf.set(retryKey(item.body), item);
  const retries = [...retryOf.values()];
  const [routed, targets] = await Promise.all([
    storeAndRoute(env, delivery, tenantId, events, untyped),
    retries.length === 0
      ? []
      : delivery.tenant
          .deliveryTargets(
            tenantId,
            retries.map(({ body, event }) => ({
              endpoint_id: body.endpoint_id,
              id: event.id,
              type: event.type,
              also: notifiedEndpoint(event),
              not: excludedEndpoint(event),
            })),
          )
          .then((result) => (result.ok ? result.value : null))
          .catch((error) => (warn("toolgate.webhook_targets_failed", tenantId, error), null)),
  ]);
  // The jobs: each stored event to each endpoint it is routed to (attempt 1), each retry whose
  // endpoint still wants it (the attempt and first-attempt time its message carries).
  const jobs: Array<DeliveryJob & { item: Item | null }> = [];
  if (routed) {
    const byId = new Map(routed.targets.map((target) => [target.id, target]));
    for (const event of events)
      for (const id of routed.routes[event.id] ?? []) {
        const target = byId.get(id);
        if (target) jobs.push({ target, event, attempt: 1, firstAttemptAtMs: null, item: null });
      }
  }
  retries.forEach((item, index) => {
    const answer = targets?.[index];
    if (!answer || !("target" in answer)) return;
    jobs.push({
      target: answer.target,
      event: item.event,
      attempt: item.body.attempt ?? 2,
      firstAttemptAtMs: item.body.first_attempt_at_ms ?? item.event.at_ms,
      item,
    });
  });
  const outcomes = await deliverJobs(delivery, jobs).catch((error) => {
    warn("toolgate.webhook_dispatch_failed", tenantId, error);
    return null;
  });
  const firstOf = new Map<string, EndpointOutcome[]>();
  const ofRetry = new Map<Item, EndpointOutcome>();
  jobs.forEach((job, index) => {
    const outcome = outcomes?.[index];
    if (!outcome) return;
    if (job.item) ofRetry.set(job.item, outcome);
    else firstOf.set(job.event.id, [...(firstOf.get(job.event.id) ?? []), outcome]);
  });

  const followedUp = new Set<string>(); // by one message of each event or retry, not by its copies
  await Promise.all(
    group.map(async (item) => {
      const { message, event } = item;
      try {
        if (!isRetry(item)) {
          if (!routed || !outcomes) return message.retry({ delaySeconds: backoff(message) });
          if (followedUp.has(event.id)) return message.ack();
          followedUp.add(event.id);
          // Its next attempts, and a new try of any attempt the tenant could not record.
          await queueFollowUps(env, event, firstOf.get(event.id) ?? [], backoff(message));
          return message.ack();
        }
        const key = retryKey(item.body);
        if (followedUp.has(key)) return message.ack();
        followedUp.add(key);
        const index = retries.indexOf(item);
        const answer = targets?.[index];
        if (!targets || !answer || !outcomes)
          return message.retry({ delaySeconds: backoff(message) });
        if (!("target" in answer)) return message.ack(); // delivered meanwhile, or gone: nothing to do
        const outcome = ofRetry.get(item);
        // Not recorded: the message comes back and the attempt is made again (never acked away).
        if (!outcome || !outcome.recorded) return message.retry({ delaySeconds: backoff(message) });
        await queueFollowUps(env, event, [outcome], 0);
        message.ack();
      } catch (error) {
        warn("toolgate.webhook_dispatch_failed", tenantId, error);
        message.retry({ delaySeconds: backoff(message) });
      }
    }),
  );
}

/**
 * Stored at the tenant (which answers where each event goes) and in the tenant index (issue 20),
 * both idempotent. The tenant's store comes before any webhook delivery (a failure: the events come
 * again); the index's failure holds nothing back: its events are queued again for the index alone
 * (index_retry). null: the events must come again.
 */
async function storeAndRoute(
  env: Env,
  delivery: ReturnType<typeof deliveryFor>,
  tenantId: string,
  events: ToolgateEvent[],
  untyped: ReadonlySet<string>,
): Promise<EventRoutes | null> {
  if (events.length === 0) return null;
  // The index reads typed data: an event written by another version reaches the tenant and its
  // webhooks as written, and the index hears of its operation from the next typed event.
  const indexed = events.filter((event) => !untyped.has(event.id));
  const [received, index] = await Promise.all([
    delivery.tenant
      .receiveEvents(tenantId, events)
      .then((result) => (result.ok ? result.value : null))
      .catch((error) => (warn("toolgate.event_store_failed", tenantId, error), null)),
    indexed.length === 0
      ? true
      : indexStub(env, tenantId)
          .ingest(tenantId, indexed)
          .then(() => true)
          .catch((error) => (warn("toolgate.index_ingest_failed", tenantId, error), false)),
  ]);
  return received && (index || (await requeueForIndex(env, tenantId, indexed))) ? received : null;
}

const retryKey = (body: DeliveryMessage) =>
  `${body.endpoint_id}/${body.event.id}/${body.attempt ?? 2}`;

/** The queue's own retry of a message this consumer could not handle: growing, not immediate. */
const backoff = (message: Message<unknown>) => queueRetryDelaySeconds(message.attempts);

/**
 * What follows a message's attempts, as delayed `delivery` messages sent before it is acked (a
 * refusal throws: the message is retried): each recorded failure's next scheduled attempt (none
 * once the schedule is over), and each attempt the tenant could not record, made again after
 * `redoDelaySeconds` with the same number.
 */
async function queueFollowUps(
  env: Env,
  event: ToolgateEvent,
  outcomes: readonly EndpointOutcome[],
  redoDelaySeconds: number,
): Promise<void> {
  const now = Date.now();
  const follow: MessageSendRequest<EventMessage>[] = [];
  for (const outcome of outcomes) {
    const next: DeliveryMessage = {
      kind: "delivery",
      endpoint_id: outcome.endpoint_id,
      event,
      attempt: outcome.attempt ?? 1,
      first_attempt_at_ms: outcome.first_attempt_at_ms,
    };
    if (!outcome.recorded)
      follow.push({ body: next, contentType: "json", delaySeconds: redoDelaySeconds });
    else if (outcome.retry?.kind === "retry")
      follow.push({
        body: { ...next, attempt: next.attempt! + 1 },
        contentType: "json",
        delaySeconds: Math.min(
          MAX_DELAY_S,
          Math.max(0, Math.ceil((outcome.retry.dueAtMs - now) / 1000)),
        ),
      });
  }
  if (follow.length > 0)
    await sendInBatches(eventsQueue(env, event.tenant_id), follow, (request) => request);
}

function warn(event: string, tenantId: string, error: unknown): void {
  console.error(
    JSON.stringify({ level: "warn", event, tenant_id: tenantId, detail: String(error) }),
  );
}
