// Tenant-plane events (DESIGN "The tenant plane"): what toolgate tells people and other systems, one
// per reportable transition, written as an outbox row in the same transaction as the transition and
// delivered asynchronously (Cloudflare Queues), so a turn never waits for it, a crash never loses
// it, and no event exists for a transition that did not commit. `data` is a redacted summary: never
// a secret value, never a redacted field, never more than the console would show. Pure types.
import { z } from "zod";

export const EVENT_TYPES = [
  "approval.requested",
  "approval.decided",
  "approval.expired",
  "operation.outcome_unknown",
  "operation.recorded",
  "run.budget_exhausted",
  "turn.settled",
  "lock.waiting_long",
] as const;
export const EventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;

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

/** What travels on the EVENTS queue. */
export type EventMessage = { kind: "event"; event: ToolgateEvent };
