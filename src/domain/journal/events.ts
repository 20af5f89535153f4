// Tenant-plane events (DESIGN "The tenant plane"): what toolgate tells people and other systems, one
// per reportable transition, written as an outbox row in the same transaction as the transition and
// delivered asynchronously (Cloudflare Queues), so a turn never waits for it, a crash never loses
// it, and no event exists for a transition that did not commit. `data` is a redacted summary: never
// a secret value, never a redacted field, never more than the console would show. Pure types.
import { z } from "zod";
import { sha256HexSync } from "../trace-chain.ts";
import { DECIDER_VIA } from "./trace-event.ts";

export const EVENT_TYPES = [
  "approval.requested",
  "approval.decided",
  "approval.expired",
  /** A routed approval (issue 35): a vote counted, the group reminded, escalated to the next group, quorum reached. */
  "approval.voted",
  "approval.reminded",
  "approval.escalated",
  "approval.quorum_reached",
  "operation.outcome_unknown",
  "operation.recorded",
  "run.budget_exhausted",
  "turn.settled",
  "lock.waiting_long",
  /** A call waits for its end user to connect an OAuth provider (issue 36): nothing was sent. */
  "credential.required",
  /**
   * A webhook endpoint became failing: a delivery to it was given up after its whole schedule (or
   * its age limit). Written by the tenant, once until the endpoint heals; never sent to that endpoint.
   */
  "endpoint.failing",
  /** A ping sent by hand to one endpoint (POST /v1/webhooks/{id}/test); no transition writes it. */
  "webhook.test",
  /** An operator froze calls (issue 34), or a freeze was lifted (DELETE, or its expires_at passed). */
  "freeze.created",
  "freeze.lifted",
  /** A tripwire crossed its threshold and made its freeze (issue 34), once per trip. */
  "tripwire.tripped",
  /**
   * A standing grant (issue 35) made (live, or proposed under four eyes), confirmed by a second
   * person, revoked; a call it let through (once per grant and operation); its count or total used up.
   */
  "grant.created",
  "grant.confirmed",
  "grant.revoked",
  "grant.used",
  "grant.exhausted",
] as const;
export const EventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;
/**
 * What an endpoint's filter or GET /v1/events?type= may name: every type a transition writes. A
 * `webhook.test` ping goes to one endpoint by hand and is never stored, so a filter naming it could
 * never match: refused rather than accepted and ignored.
 */
export const SubscribableEventType = EventType.exclude(["webhook.test"]);

/** The envelope every event shares: `id` is stable (see `eventId`), `data` depends on `type`. */
const envelope = {
  id: z.string().regex(/^evt_[0-9a-f]{32}$/),
  at_ms: z.number().int().nonnegative(),
  tenant_id: z.string(),
  run_id: z.string().nullable(),
  operation_id: z.string().nullable(),
  tool: z.string().nullable(),
};

/**
 * What every operation event's data carries: when the operation was created (the tenant index reads
 * it), and — absent otherwise — that it is a shadow run's write (a consumer must not take its
 * "succeeded" for a real effect) or the compensation of operation `compensates` (undo, issue 22).
 */
const operationData = {
  created_at_ms: z.number().int(),
  shadow: z.literal(true).optional(),
  compensates: z.string().optional(),
  /** The call's arguments: redacted fields absent, hidden values scrubbed. */
  arguments: z.unknown().optional(),
};

/**
 * A routed approval (issue 35) as people see it: quorum, the votes so far (a delegate's as its
 * delegator's, `cast_by` the delegate), the step reached and who may still vote — the groups
 * reached, their listed members who have not voted, anyone holding one of their scopes except
 * `excluded` (the proposer and those who voted).
 */
export const RouteData = z.object({
  quorum: z.number().int(),
  needed: z.number().int(),
  step: z.number().int(),
  steps: z.number().int(),
  group: z.string().nullable(),
  reminded: z.boolean(),
  votes: z.array(
    z.object({
      by: z.string(),
      cast_by: z.string().optional(),
      via: z.enum(DECIDER_VIA),
      at_ms: z.number(),
    }),
  ),
  may_vote: z.array(
    z.object({
      group: z.string(),
      scopes: z.array(z.string()),
      members: z.array(z.string()),
      /** A group by attribute: a verified Access claim holding one of these values, an email domain. */
      claims: z.record(z.string(), z.array(z.string())).optional(),
      email_domains: z.array(z.string()).optional(),
    }),
  ),
  excluded: z.array(z.string()),
});
export type RouteData = z.infer<typeof RouteData>;

/** An approval request as its events show it (the inbox row, redacted). */
export const ApprovalEventData = z.object({
  ...operationData,
  state: z.enum(["pending", "approved", "rejected", "expired", "cancelled"]),
  target: z.string(),
  requested_by: z.string(),
  expires_at_ms: z.number(),
  decided_by: z.string().nullable(),
  /** How `decided_by` was verified: access (a person, Cloudflare Access), api_key, console, delegated. */
  decided_via: z.enum(DECIDER_VIA).nullable().optional(),
  reason: z.string().nullable(),
  /** A routed approval's votes and who may still vote (absent: one person decides). */
  route: RouteData.optional(),
  /** x402 (issue 37): the payment it is asked for, amount in atomic units (absent: not a payment's). */
  payment: z
    .object({ amount: z.string(), asset: z.string(), network: z.string(), pay_to: z.string() })
    .optional(),
  /**
   * A person edited the arguments while it awaited approval (issue 35 item 2): the model's hash,
   * the version that runs and who edited it. Null or absent: not edited.
   */
  edited: z
    .object({
      proposed_input_hash: z.string(),
      input_hash: z.string(),
      by: z.string(),
      via: z.enum(DECIDER_VIA),
    })
    .nullable()
    .optional(),
});
export type ApprovalEventData = z.infer<typeof ApprovalEventData>;

export const OutcomeUnknownData = z.object({
  ...operationData,
  status: z.literal("outcome_unknown"),
  code: z.string(),
  reconcile: z.enum(["resend", "lookup", "human"]),
  needs_person: z.literal(true),
});
export type OutcomeUnknownData = z.infer<typeof OutcomeUnknownData>;

export const RecordedData = z.object({
  ...operationData,
  status: z.string(),
  code: z.string().nullable(),
  /** failed/invalid_output took effect: a consumer must not read "failed" as "not done". */
  took_effect: z.boolean(),
  attempts: z.number().int(),
  /** First attempt sent → recorded (retry waits included; approval and lock waits not). */
  latency_ms: z.number().nullable(),
  via: z.enum(["attempt", "reconcile", "resolve"]),
});
export type RecordedData = z.infer<typeof RecordedData>;

export const LockWaitingLongData = z.object({
  created_at_ms: z.number().int(),
  shadow: z.literal(true).optional(),
  compensates: z.string().optional(),
  resource: z.string().nullable(),
  blocked_by: z.string().nullable(),
  waited_ms: z.number(),
});
export type LockWaitingLongData = z.infer<typeof LockWaitingLongData>;

/**
 * A call that waits for its end user to connect (issue 36): whose connection, why (`invalid_grant`:
 * revoked or expired at the provider; told apart from a transient failure, which only retries), and
 * the link for the user to open. Never a token.
 */
export const CredentialRequiredData = z.object({
  created_at_ms: z.number().int(),
  shadow: z.literal(true).optional(),
  compensates: z.string().optional(),
  user: z.string(),
  provider: z.string(),
  reason: z.string(),
  connect_url: z.string(),
});
export type CredentialRequiredData = z.infer<typeof CredentialRequiredData>;

/** The run summary turn.settled and run.budget_exhausted carry in `data.run` (the tenant index reads it). */
export const RunSummary = z.object({
  user: z.string(),
  created_at_ms: z.number(),
  expires_at_ms: z.number(),
  cancelled_at_ms: z.number().nullable(),
  usage: z.object({ turns: z.number(), tool_calls: z.number(), cost: z.number() }),
});
export type RunSummary = z.infer<typeof RunSummary>;

export const TurnSettledData = z.object({
  turn_id: z.string(),
  /** The endpoint the run named at creation: it gets this event whatever its filter. */
  notify_webhook_id: z.string().optional(),
  results: z.array(
    z.object({
      call_id: z.string(),
      tool: z.string(),
      operation_id: z.string().nullable(),
      status: z.string(),
      code: z.string().nullable(),
    }),
  ),
  run: RunSummary,
});
export type TurnSettledData = z.infer<typeof TurnSettledData>;

export const BudgetExhaustedData = z.object({
  turn_id: z.string(),
  call_id: z.string(),
  code: z.string(),
  run: RunSummary,
});
export type BudgetExhaustedData = z.infer<typeof BudgetExhaustedData>;

/** Which endpoint, why, and the delivery that was given up (never its URL). */
export const EndpointFailingData = z.object({
  webhook_id: z.string(),
  description: z.string().nullable(),
  reason: z.enum(["schedule_ended", "too_old"]),
  given_up_event_id: z.string(),
  given_up_event_type: z.string(),
  attempts: z.number().int(),
  consecutive_failures: z.number().int(),
  last_status: z.number().nullable(),
  last_error: z.string().nullable(),
});
export type EndpointFailingData = z.infer<typeof EndpointFailingData>;

export const WebhookTestData = z.object({ webhook_id: z.string() });

/** A freeze as its events show it (issue 34): what it covers, how, why, who; `expired`: lifted by its expires_at. */
export const FreezeEventData = z.object({
  freeze_id: z.string(),
  scope: z.record(z.string(), z.union([z.string(), z.literal(true)])),
  mode: z.enum(["hold", "refuse"]),
  writes_only: z.boolean(),
  reason: z.string(),
  expires_at: z.string().nullable(),
  by: z.string(),
  expired: z.boolean().optional(),
});
export type FreezeEventData = z.infer<typeof FreezeEventData>;

/** A trip (issue 34): which tripwire, on which subject, what it measured, the freeze it made. */
export const TripwireTrippedData = z.object({
  tripwire_id: z.string(),
  subject: z.string(),
  measure: z.enum(["count", "sum", "failure_rate"]),
  threshold: z.number(),
  freeze_id: z.string(),
  mode: z.enum(["hold", "refuse"]),
  reason: z.string(),
  /** The operation whose reservation (or recorded outcome) crossed the threshold. */
  tripped_by: z.string().nullable(),
});
export type TripwireTrippedData = z.infer<typeof TripwireTrippedData>;

/**
 * A standing grant as its events show it (issue 35): its bounds, state and who did this step (for
 * `grant.used` / `grant.exhausted`: null, the call did); `use`: the call a `grant.used` is about;
 * `used`: the uses the tenant has been told of so far (a call recorded with nothing applied later
 * gives its share back at the counter, so `exhausted` is as far as those uses say).
 */
export const GrantEventData = z.object({
  grant_id: z.string(),
  tools: z.array(z.string()),
  subject: z.union([z.record(z.string(), z.string()), z.literal("any")]),
  field: z.string().nullable(),
  per_call_max: z.number().nullable(),
  total_max: z.number().nullable(),
  count: z.number().int().nullable(),
  expires_at: z.string(),
  reason: z.string(),
  state: z.enum(["proposed", "live", "revoked", "expired"]),
  by: z.string().nullable(),
  use: z.object({ operation_id: z.string(), amount: z.number().nullable() }).optional(),
  used: z.object({ calls: z.number().int(), sum: z.number() }).optional(),
});
export type GrantEventData = z.infer<typeof GrantEventData>;

/** The data schema of each event type: the public contract a webhook consumer reads (OpenAPI). */
export const EVENT_DATA = {
  "approval.requested": ApprovalEventData,
  "approval.decided": ApprovalEventData,
  "approval.expired": ApprovalEventData,
  "approval.voted": ApprovalEventData,
  "approval.reminded": ApprovalEventData,
  "approval.escalated": ApprovalEventData,
  "approval.quorum_reached": ApprovalEventData,
  "operation.outcome_unknown": OutcomeUnknownData,
  "operation.recorded": RecordedData,
  "run.budget_exhausted": BudgetExhaustedData,
  "turn.settled": TurnSettledData,
  "lock.waiting_long": LockWaitingLongData,
  "credential.required": CredentialRequiredData,
  "endpoint.failing": EndpointFailingData,
  "webhook.test": WebhookTestData,
  "freeze.created": FreezeEventData,
  "freeze.lifted": FreezeEventData,
  "tripwire.tripped": TripwireTrippedData,
  "grant.created": GrantEventData,
  "grant.confirmed": GrantEventData,
  "grant.revoked": GrantEventData,
  "grant.used": GrantEventData,
  "grant.exhausted": GrantEventData,
} as const satisfies Record<EventType, z.ZodType>;

const eventOf = <T extends EventType>(type: T) =>
  z.object({ ...envelope, type: z.literal(type), data: EVENT_DATA[type] });

/**
 * One event, told apart by `type`: each type has its own data schema, so a reader that switches on
 * `type` gets that type's fields (and a new type a reader does not handle fails `tsc`). `id` is
 * stable (derived from the object that wrote it, its log position and the type), so a redelivery —
 * by the outbox alarm, the queue, or a person — carries the same id everywhere (it is the Standard
 * Webhooks `webhook-id`).
 */
export const ToolgateEvent = z.discriminatedUnion("type", [
  eventOf("approval.requested"),
  eventOf("approval.decided"),
  eventOf("approval.expired"),
  eventOf("approval.voted"),
  eventOf("approval.reminded"),
  eventOf("approval.escalated"),
  eventOf("approval.quorum_reached"),
  eventOf("operation.outcome_unknown"),
  eventOf("operation.recorded"),
  eventOf("run.budget_exhausted"),
  eventOf("turn.settled"),
  eventOf("lock.waiting_long"),
  eventOf("credential.required"),
  eventOf("endpoint.failing"),
  eventOf("webhook.test"),
  eventOf("freeze.created"),
  eventOf("freeze.lifted"),
  eventOf("tripwire.tripped"),
  eventOf("grant.created"),
  eventOf("grant.confirmed"),
  eventOf("grant.revoked"),
  eventOf("grant.used"),
  eventOf("grant.exhausted"),
]);
export type ToolgateEvent = z.infer<typeof ToolgateEvent>;
/** The event of one type. */
export type EventOf<T extends EventType> = Extract<ToolgateEvent, { type: T }>;

/** Any event's envelope with its data as written: what another version of toolgate may have sent. */
const WrittenEvent = z.object({ ...envelope, type: EventType, data: z.looseObject({}) });

/**
 * An event read from the queue or from storage. `typed`: its data matches its type's schema. An event
 * whose envelope is sound but whose data this version does not know (written by another version:
 * during a rolling deploy both run, and a queued message may outlive its writer) is still an event —
 * stored, listed and delivered as written, never dropped; only readers of typed data (the tenant
 * index) skip it. Null: not an event at all.
 */
export function readEvent(raw: unknown): { event: ToolgateEvent; typed: boolean } | null {
  const strict = ToolgateEvent.safeParse(raw);
  if (strict.success) return { event: strict.data, typed: true };
  const written = WrittenEvent.safeParse(raw);
  // Its data kept as written, untyped: a typed reader must check `typed` first.
  return written.success ? { event: written.data as unknown as ToolgateEvent, typed: false } : null;
}
/** An event as its writer builds it: the envelope and one type's data. */
export function makeEvent<T extends EventType>(
  type: T,
  fields: Omit<EventOf<T>, "type">,
): EventOf<T> {
  return { ...fields, type } as EventOf<T>;
}

/** The endpoint a run named at creation (`notify`): it gets that run's turn.settled whatever its filter. */
export function notifiedEndpoint(event: ToolgateEvent): string | null {
  return event.type === "turn.settled" ? (event.data.notify_webhook_id ?? null) : null;
}

/** The endpoint an event is about and must never be sent to (endpoint.failing: the failing one). */
export function excludedEndpoint(event: ToolgateEvent): string | null {
  return event.type === "endpoint.failing" ? event.data.webhook_id : null;
}

/** An event off the queue, as `readEvent` reads it; not an event at all: the message does not parse. */
const QueuedEvent = z.unknown().transform((raw, ctx) => {
  const read = readEvent(raw);
  if (read) return read;
  ctx.addIssue({ code: "custom", message: "not an event" });
  return z.NEVER;
});
/**
 * What travels on the EVENTS queue, parsed once by its consumer (events/consumer.ts): anything else
 * is malformed. An event to store and fan out to the tenant's webhook endpoints; one endpoint's
 * delivery retry (sent with the delay the retry schedule gave) — its `attempt` is the number of the
 * attempt it makes, `first_attempt_at_ms` when the event's first attempt at that endpoint was made
 * (both absent in messages queued before issue 38: then attempt 2, counted from the event's own
 * time); an event the tenant index could not take when first consumed (issue 20), tried again on its
 * own so a failing index never holds back the tenant's store or its webhooks; retention's word that
 * an operation's or a run's rows are gone (issue 20: index-only, never stored, never delivered).
 * `typed` (read side only): the event's data matches its type (`readEvent`).
 */
export const EventMessage = z
  .discriminatedUnion("kind", [
    z.object({ kind: z.literal("event"), event: QueuedEvent }),
    z.object({
      kind: z.literal("delivery"),
      endpoint_id: z.string(),
      event: QueuedEvent,
      attempt: z.number().int().positive().optional(),
      first_attempt_at_ms: z.number().optional(),
    }),
    z.object({ kind: z.literal("index_retry"), event: QueuedEvent }),
    z.object({
      kind: z.literal("index_drop"),
      tenant_id: z.string(),
      operations: z.array(z.string()),
      runs: z.array(z.string()),
    }),
  ])
  // The event and whether it is typed, side by side.
  .transform((message) =>
    message.kind === "index_drop"
      ? message
      : { ...message, event: message.event.event, typed: message.event.typed },
  );
/** A message as the consumer reads it. */
export type ReadMessage = z.output<typeof EventMessage>;
/** A message as its writer sends it: what the consumer reads, without what reading adds. */
export type EventMessage = ReadMessage extends infer M
  ? M extends { typed: boolean }
    ? Omit<M, "typed">
    : M
  : never;
export type DeliveryMessage = Extract<EventMessage, { kind: "delivery" }>;
export type IndexRetryMessage = Extract<EventMessage, { kind: "index_retry" }>;
export type IndexDropMessage = Extract<EventMessage, { kind: "index_drop" }>;

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
