// Tenant-plane events (DESIGN "The tenant plane"): what toolgate tells people and other systems, one
// per reportable transition, written as an outbox row in the same transaction as the transition and
// delivered asynchronously (Cloudflare Queues), so a turn never waits for it, a crash never loses
// it, and no event exists for a transition that did not commit. `data` is a redacted summary: never
// a secret value, never a redacted field, never more than the console would show. Pure types.
import { z } from "zod";
import { sha256HexSync } from "./trace-chain.ts";

export const EVENT_TYPES = [
  "approval.requested",
  "approval.decided",
  "approval.expired",
  "operation.outcome_unknown",
  "operation.recorded",
  "run.budget_exhausted",
  "turn.settled",
  "lock.waiting_long",
  /**
   * A webhook endpoint became failing: a delivery to it was given up after its whole schedule (or
   * its age limit). Written by the tenant, once until the endpoint heals; never sent to that endpoint.
   */
  "endpoint.failing",
  /** A ping sent by hand to one endpoint (POST /v1/webhooks/{id}/test); no transition writes it. */
  "webhook.test",
] as const;
export const EventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;
/**
 * What an endpoint's filter or GET /v1/events?type= may name: every type a transition writes. A
 * `webhook.test` ping goes to one endpoint by hand and is never stored, so a filter naming it could
 * never match: refused rather than accepted and ignored.
 */
export const SubscribableEventType = EventType.exclude(["webhook.test"]);

/**
 * One event. `id` is stable (derived from the object that wrote it, its log position and the type),
 * so a redelivery — by the outbox alarm, the queue, or a person — carries the same id everywhere
 * (it is the Standard Webhooks `webhook-id`).
 */
export const ToolgateEvent = z.object({
  id: z.string().regex(/^evt_[0-9a-f]{32}$/),
  type: EventType,
  at_ms: z.number().int().nonnegative(),
  tenant_id: z.string(),
  run_id: z.string().nullable(),
  operation_id: z.string().nullable(),
  tool: z.string().nullable(),
  data: z.record(z.string(), z.unknown()),
});
export type ToolgateEvent = z.infer<typeof ToolgateEvent>;

/** The endpoint a run named at creation (`notify`): it gets that run's turn.settled whatever its filter. */
export function notifiedEndpoint(event: ToolgateEvent): string | null {
  const id = event.data["notify_webhook_id"];
  return event.type === "turn.settled" && typeof id === "string" ? id : null;
}

/** The endpoint an event is about and must never be sent to (endpoint.failing: the failing one). */
export function excludedEndpoint(event: Pick<ToolgateEvent, "type" | "data">): string | null {
  const id = event.data["webhook_id"];
  return event.type === "endpoint.failing" && typeof id === "string" ? id : null;
}

/**
 * What travels on the EVENTS queue: an event to store and fan out to the tenant's webhook endpoints,
 * or one endpoint's delivery retry (sent with the delay the retry schedule gave).
 */
export type EventMessage =
  { kind: "event"; event: ToolgateEvent } | DeliveryMessage | IndexDropMessage | IndexRetryMessage;

/**
 * One endpoint's next scheduled attempt of one event. The schedule travels with it: `attempt` is
 * the number of the attempt this message makes, `first_attempt_at_ms` when the event's first
 * attempt at this endpoint was made (both absent in messages queued before issue 38: then attempt 2,
 * counted from the event's own time).
 */
export type DeliveryMessage = {
  kind: "delivery";
  endpoint_id: string;
  event: ToolgateEvent;
  attempt?: number;
  first_attempt_at_ms?: number;
};

/**
 * An event the tenant index could not take when it was first consumed (issue 20): tried again on
 * its own, so a failing index never holds back the tenant's store or its webhooks.
 */
export type IndexRetryMessage = { kind: "index_retry"; event: ToolgateEvent };

/**
 * Retention pruned an operation or a run: the tenant index drops its row (issue 20). Index-only:
 * never stored as an event, never delivered to a webhook.
 */
export type IndexDropMessage = {
  kind: "index_drop";
  tenant_id: string;
  operations: string[];
  runs: string[];
};

/**
 * The stable id of the event of `type` written by object `objectId` at its log position `seq`:
 * `evt_` + 32 hex of SHA-256, so every redelivery (outbox alarm, queue retry) carries the same id.
 */
export function eventId(objectId: string, seq: number, type: EventType): string {
  return `evt_${sha256HexSync(`${objectId}\n${seq}\n${type}`).slice(0, 32)}`;
}

/**
 * `doc` without the values at `paths` (a redacted field is absent from an event, not masked): an
 * object loses the key, an array keeps its length with `null` in the slot. Missing paths change nothing.
 */
export function omitPaths(doc: unknown, paths: readonly (readonly string[])[]): unknown {
  let out = doc;
  for (const path of paths) out = omitAt(out, path);
  return out;
}

function omitAt(node: unknown, path: readonly string[]): unknown {
  const [head, ...rest] = path;
  if (head === undefined) return node;
  if (Array.isArray(node)) {
    const index = /^(0|[1-9][0-9]*)$/.test(head) ? Number(head) : -1;
    if (index < 0 || index >= node.length) return node;
    return node.map((item, i) =>
      i !== index ? item : rest.length === 0 ? null : omitAt(item, rest),
    );
  }
  if (!node || typeof node !== "object" || !Object.hasOwn(node, head)) return node;
  const { [head]: inner, ...others } = node as Record<string, unknown>;
  return rest.length === 0 ? others : { ...others, [head]: omitAt(inner, rest) };
}
