// Wire schemas of the public API, in one place: routes parse requests with them and /openapi.json
// is generated from them, so the documentation cannot drift from what the code accepts.
import { z } from "zod";
import { OP_STATUSES, RUN_STATUSES } from "../domain/index-feed.ts";
import { SubscribableEventType } from "../domain/journal/events.ts";
import { EnvelopeCodec } from "../durable/store/run-rows.ts";

export const ApiScope = z.enum([
  "runs:write",
  "runs:read",
  "tools:write",
  "secrets:write",
  "approvals:decide",
  /** With approvals:decide: may name the person a decision is made for (`approver.id`). */
  "approvals:delegate",
  "operations:resolve",
  "traces:read",
  /** Webhook endpoints: create, change, delete, rotate secrets, redeliver (and read). */
  "webhooks:write",
  /** Webhook endpoints and their delivery logs, read-only (never a secret). */
  "webhooks:read",
  /** The tenant-plane event feed (GET /v1/events). */
  "events:read",
  /** The tenant's Cedar policy set (PUT and GET /v1/policies). */
  "policies:write",
  /** Undo (issue 22): POST /v1/operations/{id}/compensate, and cancel with rollback (with runs:write). */
  "operations:compensate",
  /** Freezes (issue 34): PUT and DELETE /v1/freezes/{id} (and GET). */
  "freezes:write",
  /** Receipts (issue 37): rotate the tenant's receipt signing key (POST /v1/receipts/keys/rotate). */
  "receipts:admin",
]);
export type ApiScope = z.infer<typeof ApiScope>;

/** PUT /v1/admin/tenants/{id}/settings: strict, every setting given (issue 35: grant_four_eyes). */
export const TenantSettings = z.object({ grant_four_eyes: z.boolean() }).strict();

export const CreateTenant = z.object({
  name: z.string().min(1).max(200),
  /** "eu" or "fedramp" (domain/jurisdiction.ts); anything else is refused with unsupported_jurisdiction. */
  jurisdiction: z
    .string()
    .nullable()
    .optional()
    .describe(
      'Where every object of the tenant is created and stored: "eu" or "fedramp"; left out or null: no restriction. Fixed at creation.',
    ),
});
export const IssueKey = z.object({
  name: z.string().min(1).max(200),
  scopes: z.array(ApiScope).min(1),
});

export const Budgets = z
  .object({
    max_turns: z.number().int().positive(),
    max_tool_calls: z.number().int().positive(),
    max_duration_ms: z.number().int().positive(),
    max_cost: z.number().positive(),
  })
  .partial()
  .strict();

export const CreateRun = z.object({
  user: z.object({
    id: z.string().min(1).max(256),
    scopes: z.array(z.string()).default([]),
    /** Seen only by the tenant's Cedar policies (principal tags, e.g. `principal.hasTag("senior")`). */
    attributes: z.record(z.string().max(128), z.string().max(1024)).optional(),
  }),
  tools: z.array(z.string()).min(1).max(128),
  context: z.record(z.string(), z.unknown()).default({}),
  budgets: Budgets.default({}),
  mode: z
    .enum(["live", "shadow"])
    .default("live")
    .describe(
      "shadow: reads run as usual; each write is gated, limited (a separate shadow ledger), approved and locked as usual, then sent only to its tool's sandbox (or answered with its sandbox result) and recorded with the production request it would have sent; a write tool without a sandbox is refused (shadow_unsupported)",
    ),
  notify: z
    .strictObject({
      webhook_id: z.string().min(1).max(128).optional(),
      url: z.string().min(1).max(2048).optional(),
    })
    .refine((notify) => (notify.webhook_id === undefined) !== (notify.url === undefined), {
      message: "notify takes exactly one of url or webhook_id",
    })
    .optional()
    .describe(
      "Where this run's turn.settled events go: webhook_id names one of the tenant's webhook endpoints (PUT /v1/webhooks/{id}), whatever its events filter; url makes an endpoint for this run only (the webhook URL rules, 422 webhook_url_not_allowed), whose whsec_ secret is in this answer only",
    ),
  request_id: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,128}$/, "request_id is 1-128 letters, digits, '.', '_', ':' or '-'")
    .optional()
    .describe(
      "Chosen by the client, unique per run it means to create (e.g. a UUID): the same request sent again returns the same run (200); another body with it is 409 request_id_conflict",
    ),
});

export const PatchRun = z
  .object({
    user: z.object({ scopes: z.array(z.string()) }).strict(),
    tools: z.array(z.string()).min(1).max(128),
  })
  .partial()
  .strict()
  .refine(
    (patch) => patch.user !== undefined || patch.tools !== undefined,
    "send user.scopes and/or tools",
  );

/** Tenant secret names: what `{secret:NAME}` references. TOOLGATE_* is the deployment's own namespace. */
export const SecretName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
    "secret names are 1-64 letters, digits or _, not starting with a digit",
  )
  .refine(
    (name) => !name.toUpperCase().startsWith("TOOLGATE_"),
    "names starting with TOOLGATE_ are reserved for the deployment",
  );
/** At least 8 characters: every value is scrubbed from upstream text, so a short one would mangle results. */
export const PutSecret = z.strictObject({
  value: z.string().min(8, "secret values are at least 8 characters").max(8192),
});
export const SecretRecord = z.object({
  name: z.string(),
  fingerprint: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});

const Approver = z
  .strictObject({ id: z.string().min(1).max(256) })
  .describe(
    "Who decides, when a service key holding approvals:delegate decides on a person's behalf; default: the API key's name",
  );
const B64URL = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/)
  .max(16_384);
const CLIENT_EXTENSIONS = z.record(z.string(), z.unknown());
const ATTACHMENT = z.enum(["platform", "cross-platform"]).optional();
/** A WebAuthn assertion as a browser's `PublicKeyCredential.toJSON()` gives it (AuthenticationResponseJSON). */
export const PasskeyAssertion = z
  .strictObject({
    id: B64URL,
    rawId: B64URL,
    type: z.literal("public-key"),
    response: z.strictObject({
      clientDataJSON: B64URL,
      authenticatorData: B64URL,
      signature: B64URL,
      userHandle: B64URL.optional(),
    }),
    clientExtensionResults: CLIENT_EXTENSIONS,
    authenticatorAttachment: ATTACHMENT,
  })
  .describe(
    "A passkey assertion over the operation's approval.step_up.challenge (needs input_hash): the step-up a tool with approval.step_up asks for",
  );
/** A WebAuthn registration as `PublicKeyCredential.toJSON()` gives it (RegistrationResponseJSON). */
export const PasskeyRegistration = z.strictObject({
  id: B64URL,
  rawId: B64URL,
  type: z.literal("public-key"),
  response: z.strictObject({
    clientDataJSON: B64URL,
    attestationObject: B64URL,
    authenticatorData: B64URL.optional(),
    transports: z.array(z.string().max(32)).max(8).optional(),
    publicKeyAlgorithm: z.number().int().optional(),
    publicKey: B64URL.optional(),
  }),
  clientExtensionResults: CLIENT_EXTENSIONS,
  authenticatorAttachment: ATTACHMENT,
});

/** The approval a decision is for (its `approval_hash`, as listed): a payment's differs from its arguments'. */
const APPROVAL_HASH = z
  .string()
  .min(1)
  .max(128)
  .describe(
    "The approval you saw (the inbox's approval_hash): input_hash for a plain approval, its own for an x402 payment's; a decision naming another, or only an input_hash for a payment's approval, is refused",
  );
/**
 * `input_hash` / `policy_version` / `approval_hash`: optional, what the approver saw; a mismatch
 * is refused (409). Naming none approves what is pending now.
 */
const Decide = z.strictObject({
  reason: z.string().min(1).max(2000).optional(),
  approver: Approver.optional(),
  input_hash: z.string().optional(),
  policy_version: z.string().optional(),
  approval_hash: APPROVAL_HASH.optional(),
  passkey: PasskeyAssertion.optional(),
  on_behalf_of: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe(
      "Vote on a routed approval as this person, who delegated to you for now (PUT /v1/delegations); the vote is theirs, recorded with who cast it",
    ),
});
/** `arguments`: edit-on-approve (issue 35 item 2), the whole edited arguments; needs `input_hash`. */
export const Approve = Decide.extend({
  arguments: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      "Edit-on-approve: the arguments to run instead of the proposed ones (bound fields may be left out), with the input_hash they edit",
    ),
});
export const Reject = Decide.extend({ reason: z.string().min(1).max(2000) });

/** POST /v1/approvals/batch: at most this many decisions per request. */
export const MAX_BATCH_DECISIONS = 100;
const batchItem = {
  operation_id: z.string().min(1).max(128),
  input_hash: z
    .string()
    .min(1)
    .max(128)
    .describe("The arguments the approver saw (the inbox's input_hash): required"),
  policy_version: z.string().min(1).max(128).optional(),
  approval_hash: APPROVAL_HASH.optional(),
};
/**
 * Each item is one single decision (approve's reason optional, reject's required), bound to the
 * input hash the approver saw; an operation named twice is refused (which would win is not a choice).
 */
export const ApprovalBatch = z
  .array(
    z.discriminatedUnion("decision", [
      z.strictObject({
        ...batchItem,
        decision: z.literal("approve"),
        reason: z.string().min(1).max(2000).optional(),
      }),
      z.strictObject({
        ...batchItem,
        decision: z.literal("reject"),
        reason: z.string().min(1).max(2000),
      }),
    ]),
  )
  .min(1)
  .max(MAX_BATCH_DECISIONS)
  .refine((items) => new Set(items.map((item) => item.operation_id)).size === items.length, {
    message: "an operation_id appears twice; decide each operation once",
  });
export type ApprovalBatch = z.infer<typeof ApprovalBatch>;
export const ApprovalsQuery = z.object({
  state: z.enum(["pending", "decided"]).default("pending"),
  cursor: z
    .string()
    .regex(/^\d+:op_(?:(?:eu|fedramp)_)?[0-9a-f]{32}$/)
    .optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});

/** GET /v1/unknown-outcomes. */
export const UnknownsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
/** GET /v1/operations/{id}: `?verify=1` checks the stored events' hash chain. */
export const VerifyQuery = z.object({ verify: z.enum(["0", "1"]).optional() });

/** GET /v1/events: `since` an event id (exclusive: the page starts after it) or an ISO time (inclusive). */
export const EventsQuery = z
  .object({
    since: z
      .union([z.string().regex(/^evt_[0-9a-f]{32}$/), z.iso.datetime({ offset: true })])
      .optional(),
    type: SubscribableEventType.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();

/** GET /v1/runs and /v1/operations (issue 20): filters over the tenant index, newest first. */
const IndexFilters = {
  tool: z.string().min(1).max(200).optional(),
  user: z.string().min(1).max(200).optional(),
  /** A bound subject: `cus_42`, or `customer_id:cus_42` for that argument only. */
  subject: z.string().min(1).max(200).optional(),
  /** Search: an exact run id, operation id, user or subject value. */
  q: z.string().min(1).max(200).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/)
    .optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
};
export const OperationsQuery = z
  .object({
    ...IndexFilters,
    status: z.enum(OP_STATUSES).optional(),
    code: z.string().min(1).max(100).optional(),
    run_id: z.string().min(1).max(100).optional(),
  })
  .strict();
export const RunsQuery = z
  .object({ ...IndexFilters, status: z.enum(RUN_STATUSES).optional() })
  .strict();
/** GET /v1/overview: counts and per-tool aggregates since `since` (default 24 h ago, at most 7 days). */
export const OverviewQuery = z
  .object({ since: z.iso.datetime({ offset: true }).optional() })
  .strict();

/** A person's verdict on an outcome_unknown; "resend" (keyed tools only) sends once more with the same key. */
export const Resolve = z.object({
  outcome: z.enum(["succeeded", "failed", "resend"]),
  result: z.unknown().optional(),
  reason: z.string().min(1).max(2000),
});

/** Undo (issue 22): why the operation is being reversed (kept with the compensation). */
export const Compensate = z.strictObject({ reason: z.string().min(1).max(500) });
/** POST /v1/runs/{id}/cancel: no body, `{}`, or `{ "rollback": true }` (undo the run's applied writes). */
export const CancelRun = z.strictObject({ rollback: z.boolean().optional() });
/**
 * POST /v1/runs/{id}/rollback/approve (issue 35 item 4): the plan as the person was shown it, each
 * compensation's (input_hash, policy_version), exactly, in its order.
 */
export const ApproveRollbackPlan = z.strictObject({
  items: z
    .array(
      z.strictObject({
        input_hash: z.string().min(1).max(128),
        policy_version: z.string().min(1).max(128),
      }),
    )
    .min(1)
    .max(1000)
    .describe(
      "Every compensation's input_hash and policy_version as GET /v1/runs/{id}/rollback lists them, in order",
    ),
  reason: z.string().min(1).max(2000).optional(),
  approver: Approver.optional(),
});

/** The envelope the model reads: the same codec the run object stores it with. */
export const Envelope = EnvelopeCodec;

export const TurnResponse = z.object({
  turn_id: z.string(),
  status: z.enum(["settled", "pending"]),
  results: z
    .unknown()
    .describe(
      "Ready to append to the conversation, in the provider's format (native: an array of envelopes)",
    ),
  poll_url: z.string().optional(),
});

export const Problem = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number(),
  code: z.string(),
  detail: z.string(),
});

/** Webhook endpoint ids are chosen by the tenant (PUT is create-or-replace). */
export const WebhookId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, "webhook ids are 1-64 letters, digits, '_' or '-'");
export const PutWebhook = z.strictObject({
  url: z
    .string()
    .max(2048)
    .describe("https, host on TOOLGATE_UPSTREAM_ALLOWLIST, no private address"),
  // One list of "*" or types (not a union of two lists), so a typo is refused by its place and
  // value, with every valid choice named.
  events: z
    .array(z.union([z.literal("*"), SubscribableEventType]))
    .min(1)
    .refine(
      (types) => !types.includes("*") || types.length === 1,
      '"*" stands alone: ["*"] sends every event',
    )
    .describe('Event types to send, or ["*"] for all'),
  format: z
    .enum(["standard", "slack"])
    .describe("standard: Standard Webhooks JSON; slack: a Block Kit message"),
  description: z.string().max(500).optional(),
});
export const WebhookRecord = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  format: z.enum(["standard", "slack"]),
  description: z.string().nullable(),
  state: z
    .enum(["healthy", "failing"])
    .describe(
      "failing: its last 8 attempts failed, or a delivery to it was given up after its whole schedule; a delivered attempt heals it",
    ),
  consecutive_failures: z.number(),
  failing_since: z
    .string()
    .nullable()
    .describe(
      "When a delivery to it was first given up with none delivered since (an endpoint.failing event said so)",
    ),
  created_at: z.string(),
  updated_at: z.string(),
  last_attempt_at: z.string().nullable(),
  last_delivered_at: z.string().nullable(),
  secret: z
    .string()
    .optional()
    .describe("whsec_…: only in the answer that created the endpoint; never shown again"),
});
export const WebhookDelivery = z.object({
  event_id: z.string(),
  event_type: z.string(),
  attempt: z.number(),
  at: z.string(),
  delivered: z.boolean(),
  status: z.number().nullable(),
  latency_ms: z.number(),
  snippet: z
    .string()
    .describe("The start of the receiver's answer (256 characters, secret-scrubbed)"),
  error: z.string().nullable(),
  by_hand: z.boolean().describe("A redeliver or test by hand, outside the retry schedule"),
  next_attempt_at: z
    .string()
    .nullable()
    .describe(
      "Failed, and the event's next scheduled attempt is due then (only on its latest attempt; null once delivered, given up, or superseded)",
    ),
  given_up: z
    .boolean()
    .describe(
      "With this attempt the delivery was given up (its 8th attempt, or past its age limit): no automatic attempt follows; redeliver by hand",
    ),
});
export const Redeliver = z.strictObject({ event_id: z.string().regex(/^evt_[0-9a-f]{32}$/) });
export const DeliveriesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
});
