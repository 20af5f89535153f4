// The EVENTS queue consumer (issue 18). An `event` message is stored at its tenant
// (TenantObject.receiveEvents, deduplicated by id there) and in its tenant index (issue 20:
// IndexObject.ingest, one call per tenant per batch; `index_drop` messages remove pruned rows), then delivered to each of the tenant's
// subscribed webhook endpoints at once and independently (deliverRouted: the tenant's store answers
// where each event goes, and each endpoint's attempts are logged in one call per batch); an endpoint that
// failed gets its own `delivery` message, delayed by the retry schedule (domain/webhook-retry.ts),
// so one slow or dead endpoint never holds back another's or another tenant's deliveries. A message
// is acked only once its work is done and its retries are queued; anything else is retried by the
// queue. Delivery is at-least-once: a redelivered message may deliver again, with the same
// webhook-id (Standard Webhooks receivers deduplicate by it).
import {
  ToolgateEvent,
  type EventMessage,
  type IndexDropMessage,
  type IndexRetryMessage,
} from "../domain/events.ts";
import type { WebhookRetryPlan } from "../domain/webhook-retry.ts";
import type { Env } from "../durable/env.ts";
import { eventsQueue } from "../durable/placement.ts";
import { indexStub, tenantStub } from "../durable/stubs.ts";
import { hostPolicy } from "../config.ts";
import type { EventRoutes } from "../durable/tenant/webhooks.ts";
import { deliverRouted, deliverToEndpoint, type EndpointOutcome } from "./deliver.ts";

/** Cloudflare Queues accepts a delivery delay of at most 12 hours. */
const MAX_DELAY_S = 12 * 60 * 60;

type EventBody = Exclude<EventMessage, IndexDropMessage | IndexRetryMessage>;
type Item = { message: Message<EventMessage>; body: EventBody; event: ToolgateEvent };

export async function handleEventBatch(batch: MessageBatch<EventMessage>, env: Env): Promise<void> {
  const byTenant = new Map<string, Item[]>();
  const drops: Promise<void>[] = [];
  for (const message of batch.messages) {
    const body = message.body as { kind?: unknown; event?: unknown; endpoint_id?: unknown } | null;
    if (body?.kind === "index_drop") {
      drops.push(dropFromIndex(env, message as Message<IndexDropMessage>));
      continue;
    }
    if (body?.kind === "index_retry") {
      drops.push(retryIndex(env, message as Message<IndexRetryMessage>));
      continue;
    }
    const parsed = ToolgateEvent.safeParse(body?.event);
    const valid =
      parsed.success &&
      (body?.kind === "event" ||
        (body?.kind === "delivery" && typeof body.endpoint_id === "string"));
    if (!valid) {
      // Nothing will ever make it valid: dropped, said once.
      console.error(
        JSON.stringify({ level: "warn", event: "toolgate.event_malformed", id: message.id }),
      );
      message.ack();
      continue;
    }
    const group = byTenant.get(parsed.data.tenant_id) ?? [];
    group.push({ message, body: body as EventBody, event: parsed.data });
    byTenant.set(parsed.data.tenant_id, group);
  }
  await Promise.all([
    ...drops,
    ...[...byTenant].map(([tenantId, group]) => handleTenant(env, tenantId, group)),
  ]);
}

/** Events the index did not take, queued again for it alone (false: the queue refused them too). */
async function requeueForIndex(env: Env, tenantId: string, events: ToolgateEvent[]) {
  try {
    await eventsQueue(env, tenantId).sendBatch(
      events.map((event) => ({
        body: { kind: "index_retry", event } satisfies IndexRetryMessage,
        contentType: "json" as const,
        delaySeconds: 5,
      })),
    );
    return true;
  } catch (error) {
    warn("toolgate.index_requeue_failed", tenantId, error);
    return false;
  }
}

/** One event for the tenant index alone; retried by the queue until it takes it. */
async function retryIndex(env: Env, message: Message<IndexRetryMessage>): Promise<void> {
  const parsed = ToolgateEvent.safeParse(message.body.event);
  if (!parsed.success) return message.ack();
  try {
    await indexStub(env, parsed.data.tenant_id).ingest(parsed.data.tenant_id, [parsed.data]);
    message.ack();
  } catch (error) {
    warn("toolgate.index_ingest_failed", parsed.data.tenant_id, error);
    message.retry();
  }
}

/** Retention's word that rows are gone (issue 20): the tenant index drops them. */
async function dropFromIndex(env: Env, message: Message<IndexDropMessage>): Promise<void> {
  const body = message.body;
  const ids = (list: unknown) =>
    Array.isArray(list) ? list.filter((id): id is string => typeof id === "string") : [];
  if (typeof body.tenant_id !== "string") return message.ack();
  try {
    await indexStub(env, body.tenant_id).drop({
      operations: ids(body.operations),
      runs: ids(body.runs),
    });
    message.ack();
  } catch (error) {
    warn("toolgate.index_drop_failed", body.tenant_id, error);
    message.retry();
  }
}

async function handleTenant(env: Env, tenantId: string, group: Item[]): Promise<void> {
  const tenant = tenantStub(env, tenantId);
  const fresh = group.filter((item) => item.body.kind === "event");
  // One copy of each event (the outbox alarm and the queue may both have sent it).
  const events = [...new Map(fresh.map((item) => [item.event.id, item.event])).values()];
  let routed: EventRoutes | null = null;
  if (events.length > 0) {
    // Stored at the tenant (which answers where each event goes) and in the tenant index (issue 20),
    // both idempotent. The tenant's store comes before any webhook delivery (a failure: the events
    // come again); the index's failure holds nothing back: its events are queued again for the
    // index alone (index_retry).
    const [received, index] = await Promise.all([
      tenant
        .receiveEvents(tenantId, events)
        .then((result) => (result.ok ? result.value : null))
        .catch((error) => (warn("toolgate.event_store_failed", tenantId, error), null)),
      indexStub(env, tenantId)
        .ingest(tenantId, events)
        .then(() => true)
        .catch((error) => (warn("toolgate.index_ingest_failed", tenantId, error), false)),
    ]);
    routed =
      received && (index || (await requeueForIndex(env, tenantId, events))) ? received : null;
  }
  const delivered =
    routed && deliverRouted(tenant, routed, events, hostPolicy(env)).catch(() => null);
  const retriesQueued = new Set<string>(); // by one message of each event, not by its copies
  await Promise.all(
    group.map(async (item) => {
      try {
        let outcomes: EndpointOutcome[] | null;
        if (item.body.kind === "event") {
          outcomes = (await delivered)?.get(item.event.id) ?? null;
          if (outcomes && retriesQueued.has(item.event.id)) outcomes = [];
          retriesQueued.add(item.event.id);
        } else {
          const one = await deliverToEndpoint(env, tenantId, item.body.endpoint_id, item.event);
          outcomes = one.ok ? (one.value ? [one.value] : []) : null;
        }
        if (!outcomes) return item.message.retry();
        await Promise.all(outcomes.map((outcome) => queueRetry(env, item.event, outcome)));
        item.message.ack();
      } catch (error) {
        warn("toolgate.webhook_dispatch_failed", tenantId, error);
        item.message.retry();
      }
    }),
  );
}

/** A failed endpoint's next attempt, as its own delayed message (none once the schedule is used up). */
async function queueRetry(env: Env, event: ToolgateEvent, outcome: EndpointOutcome): Promise<void> {
  const retry: WebhookRetryPlan | null = outcome.retry;
  if (!retry || retry.kind !== "retry") return;
  const delaySeconds = Math.min(
    MAX_DELAY_S,
    Math.max(0, Math.ceil((retry.dueAtMs - Date.now()) / 1000)),
  );
  const message: EventMessage = { kind: "delivery", endpoint_id: outcome.endpoint_id, event };
  await eventsQueue(env, event.tenant_id).send(message, { contentType: "json", delaySeconds });
}

function warn(event: string, tenantId: string, error: unknown): void {
  console.error(
    JSON.stringify({ level: "warn", event, tenant_id: tenantId, detail: String(error) }),
  );
}
