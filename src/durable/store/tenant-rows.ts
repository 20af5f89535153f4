// The tenant's tables: its record, API keys (hashes only), tool manifests and their verdicts,
// sealed secrets, the approvals inbox and unknown-outcomes list its operations deliver to, its
// webhook endpoints (secret sealed like a tenant secret) with their delivery logs (kept for the
// retention period), the events the tenant writes itself until the queue took them
// (`tenant_outbox`: endpoint.failing), and the tenant-plane events the queue consumer stores (`pos`: arrival order, the feed's order), which
// endpoints are a run's notify.url (`run_endpoints`, deleted with the run's retention), and its
// Cedar policy set (one row, issue 21; `invalid`: a forced tool change broke it, issue 31), and its
// runs' ids (`tenant_runs`: what an index rebuild walks, tenant/runs.ts), and its receipt signing
// keys (`receipt_keys`, issue 37: the private key sealed like a secret, each with its window).
// The tenant's `unknowns` rows stay, closed, as tombstones until retention: a late, older delivery
// (`seq`) cannot reopen one. Tables from before `seq`/`open` get the columns on first use.
import { z } from "zod";
import {
  EventType,
  readEvent,
  RouteData,
  type ToolgateEvent,
} from "../../domain/journal/events.ts";
import { DECIDER_VIA } from "../../domain/journal/trace-event.ts";
import { VerdictStatus, type Verification } from "../../domain/verification.ts";
import { ApiScope } from "../../http/schemas.ts";
import { decodeOrNull, decodeWith, parseJson } from "./codec.ts";
import type { SqlStore } from "./sql-store.ts";
export const TENANT_SCHEMA = `
CREATE TABLE IF NOT EXISTS tenant (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL, secret_hash TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tools (name TEXT PRIMARY KEY, manifest TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (
  operation_id TEXT PRIMARY KEY, state TEXT NOT NULL, requested_at INTEGER NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS unknowns (operation_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, tool TEXT NOT NULL, since INTEGER NOT NULL, seq INTEGER NOT NULL DEFAULT 0, open INTEGER NOT NULL DEFAULT 1, closed_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, ciphertext TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS quotas (id TEXT PRIMARY KEY, definition TEXT NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS origin_pauses (origin TEXT PRIMARY KEY, until_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verifications (name TEXT PRIMARY KEY, settings_hash TEXT NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhooks (
  id TEXT PRIMARY KEY, url TEXT NOT NULL, events TEXT NOT NULL, format TEXT NOT NULL, description TEXT, console_url TEXT NOT NULL,
  iv TEXT NOT NULL, ciphertext TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  consecutive_failures INTEGER NOT NULL DEFAULT 0, last_attempt_at INTEGER, last_delivered_at INTEGER, failing_since INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  endpoint_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, event TEXT NOT NULL, attempt INTEGER NOT NULL,
  at_ms INTEGER NOT NULL, delivered INTEGER NOT NULL, status INTEGER, latency_ms INTEGER NOT NULL, error TEXT, snippet TEXT NOT NULL,
  next_at_ms INTEGER, gave_up INTEGER NOT NULL DEFAULT 0, by_hand INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (endpoint_id, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS webhook_deliveries_event ON webhook_deliveries (endpoint_id, event_id);
CREATE TABLE IF NOT EXISTS policies (k INTEGER PRIMARY KEY CHECK (k = 1), text TEXT NOT NULL, version TEXT NOT NULL, updated_at INTEGER NOT NULL, invalid TEXT, invalid_at INTEGER);
CREATE TABLE IF NOT EXISTS events (pos INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, at_ms INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_endpoints (webhook_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, prune_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_runs (run_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_outbox (id TEXT PRIMARY KEY, payload TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipt_keys (kid TEXT PRIMARY KEY, public_jwk TEXT NOT NULL, iv TEXT NOT NULL, ciphertext TEXT NOT NULL, not_before_ms INTEGER NOT NULL, not_after_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS passkeys (credential_id TEXT PRIMARY KEY, person TEXT NOT NULL, public_key TEXT NOT NULL, counter INTEGER NOT NULL, created_at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS delegations (from_id TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS freezes (id TEXT PRIMARY KEY, data TEXT NOT NULL, lifted_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS freeze_holds (operation_id TEXT PRIMARY KEY, freeze_id TEXT NOT NULL, seq INTEGER NOT NULL, woken_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS freeze_tells (run_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tripwires (id TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS grants (id TEXT PRIMARY KEY, data TEXT NOT NULL, live_until INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS grant_uses (grant_id TEXT NOT NULL, operation_id TEXT NOT NULL, chain_seq INTEGER NOT NULL, amount REAL, PRIMARY KEY (grant_id, operation_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_chain (seq INTEGER PRIMARY KEY, event TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS oauth_providers (id TEXT PRIMARY KEY, data TEXT NOT NULL, iv TEXT NOT NULL, ciphertext TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;`;

/** Added to `tenant_outbox` at its first failed send (the one outbox schedule counts its tries). */
/** A grant use's amount (issue 35: `grant.exhausted`); rows chained before it count 0 toward the sum. */
export const GRANT_USE_AMOUNT_COLUMN = "amount REAL";
export const TENANT_OUTBOX_ATTEMPTS = "attempts INTEGER NOT NULL DEFAULT 0";

/** Columns of `unknowns` added after its first version (older tenants get them on first use). */
export const UNKNOWNS_ADDED_COLUMNS = [
  "seq INTEGER NOT NULL DEFAULT 0",
  "open INTEGER NOT NULL DEFAULT 1",
  "closed_at INTEGER",
];

/** Columns of the webhook tables added after their first version (issue 38), added on first use. */
export const WEBHOOKS_ADDED_COLUMNS = ["failing_since INTEGER"];
export const DELIVERIES_ADDED_COLUMNS = [
  "next_at_ms INTEGER",
  "gave_up INTEGER NOT NULL DEFAULT 0",
  "by_hand INTEGER NOT NULL DEFAULT 0",
];

export type WebhookRow = {
  id: string;
  url: string;
  /** JSON: event types, or ["*"]. */
  events: string;
  format: string;
  description: string | null;
  console_url: string;
  iv: string;
  ciphertext: string;
  created_at: number;
  updated_at: number;
  consecutive_failures: number;
  last_attempt_at: number | null;
  last_delivered_at: number | null;
  /** Since when a delivery to it was given up with none delivered since (absent: an older table). */
  failing_since?: number | null;
};
export type WebhookDeliveryRow = {
  endpoint_id: string;
  seq: number;
  event_id: string;
  /**
   * JSON: the event as delivered, or only its id, type and operation_id when the tenant's `events`
   * table holds it (redeliver reads it from there: one copy per event, not one per attempt).
   */
  event: string;
  attempt: number;
  at_ms: number;
  delivered: number;
  status: number | null;
  latency_ms: number;
  error: string | null;
  snippet: string;
  /** This attempt failed and the next scheduled one is due then (absent columns: an older table). */
  next_at_ms?: number | null;
  /** 1: with this attempt the delivery was given up (its schedule ended, or it aged out). */
  gave_up?: number;
  /** 1: an attempt by hand (redeliver, test), outside the schedule. */
  by_hand?: number;
};
export type ToolRow = { name: string; manifest: string; version: number; updated_at: number };
export type SecretRow = {
  name: string;
  iv: string;
  ciphertext: string;
  fingerprint: string;
  created_at: number;
  updated_at: number;
};

/** A `tools` row's manifest: JSON (the compile in tools/catalog.ts is its schema, and says why not). */
export const decodeManifest = (text: string): unknown => parseJson(text, "tool manifest");

/** A JSON value whose key JSON drops when it is undefined (a body never sent): read as null. */
const AbsentIsNull = z
  .unknown()
  .optional()
  .transform((value) => value ?? null);

/**
 * What `registeredLimits` reads of a stored manifest: its input schema and its limits across runs,
 * which `compileAcrossRuns` checks in full (every stored manifest passed the PUT's Manifest schema).
 */
const ManifestLimits = z.object({
  input_schema: z.record(z.string(), z.unknown()).default({}),
  limits_across_runs: z.unknown().optional(),
});
export const decodeManifestLimits = (text: string) =>
  decodeWith(ManifestLimits, decodeManifest(text), "tool manifest");

/**
 * An `api_keys` row's scopes. Fails closed: a stored scope that is not one of today's `ApiScope`
 * makes the row undecodable (`null`), and `keys.ts` then treats the key as no key at all — a
 * corrupt or downgraded row never grants more than it says, and never a scope read as another.
 */
const Scopes = z.array(ApiScope).min(1);
export const decodeScopes = (text: string): ApiScope[] | null => decodeOrNull(Scopes, text);

/** A `verifications` row's verdict, as `recordVerification` stored it. */
const Exchange = z.object({
  idempotency_key: z.string(),
  sent: z.object({
    method: z.string(),
    url: z.string(),
    headers: z.record(z.string(), z.string()),
    body: AbsentIsNull,
  }),
  received: z.discriminatedUnion("kind", [
    z.object({
      kind: z.literal("response"),
      status: z.number(),
      body: AbsentIsNull,
      digest: z.string(),
      truncated: z.boolean(),
      valid_output: z.boolean(),
    }),
    z.object({ kind: z.literal("no_response"), detail: z.string() }),
  ]),
});
const VerificationCodec = z.object({
  status: z.enum(VerdictStatus),
  checked_at: z.string().nullable(),
  settings_hash: z.string().nullable(),
  base_url: z.string().nullable(),
  checks: z.array(
    z.object({
      name: z.enum([
        "first_send",
        "same_key_replay",
        "changed_body_refused",
        "concurrent_duplicate",
        "lookup_finds_effect",
        "lookup_unknown_key",
      ]),
      status: z.enum(["passed", "failed", "skipped"]),
      expected: z.string(),
      observed: z.string(),
      exchanges: z.array(Exchange),
    }),
  ),
}) satisfies z.ZodType<Verification>;
/**
 * Fails closed: a verdict that does not decode vouches for nothing (`null`: the tool reads as
 * unverified, and can be verified again), rather than a guess at what it said.
 */
export const decodeVerification = (text: string): Verification | null =>
  decodeOrNull(VerificationCodec, text);

/**
 * An `approvals` row: the inbox item as the operation's outbox delivered it, and the `seq` of that
 * delivery. Rows written before previews were capped have no `truncated` (they were never cut).
 */
const StoredApproval = z.object({
  operation_id: z.string(),
  run_id: z.string(),
  call_id: z.string(),
  tool: z.string(),
  target: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  state: z.enum(["pending", "approved", "rejected", "expired", "cancelled"]),
  requested_by: z.string(),
  requested_at_ms: z.number(),
  expires_at_ms: z.number(),
  input_hash: z.string(),
  policy_version: z.string(),
  approval_hash: z.string().optional(),
  preview: z
    .object({
      status: z.number().nullable(),
      body: AbsentIsNull,
      detail: z.string().nullable(),
      truncated: z.boolean().optional(),
    })
    .nullable(),
  decided_by: z.string().nullable(),
  decided_via: z.enum(DECIDER_VIA).nullable().optional(),
  decided_at_ms: z.number().nullable(),
  reason: z.string().nullable(),
  shadow: z.literal(true).optional(),
  compensates: z.string().optional(),
  route: RouteData.optional(),
  payment: z
    .object({ amount: z.string(), asset: z.string(), network: z.string(), pay_to: z.string() })
    .optional(),
  credential: z
    .object({ provider: z.string(), user: z.string(), scopes: z.array(z.string()) })
    .optional(),
  seq: z.number().optional(),
});
export type StoredApproval = z.infer<typeof StoredApproval>;
export const decodeApproval = (text: string): StoredApproval =>
  decodeWith(StoredApproval, parseJson(text, "approval"), "approval");

/** A `webhooks` row's `events`: the types it subscribed to, or `["*"]`. */
const WebhookEvents = z.array(z.union([z.literal("*"), EventType]));
export const decodeWebhookEvents = (text: string): Array<EventType | "*"> =>
  decodeWith(WebhookEvents, parseJson(text, "webhook"), "webhook");

/**
 * An `events` row's body (the tenant-plane feed), or a delivery log's full copy of one: typed, or
 * as another version wrote it (journal/events.ts readEvent: stored and listed, never lost).
 */
export function decodeEvent(text: string): ToolgateEvent {
  const read = readEvent(parseJson(text, "event"));
  if (!read) throw new Error("corrupt event row: no event envelope");
  return read.event;
}

/** A `webhook_deliveries` row's event: the event, or only its id, type and operation_id. */
const LoggedEventType = z.object({ type: z.string() });
export const decodeLoggedEventType = (text: string): string =>
  decodeWith(LoggedEventType, parseJson(text, "webhook delivery"), "webhook delivery").type;

/** The tenant record, if this object holds one (read paths never create the table). */
export function tenantRecord(store: SqlStore): { id: string } | null {
  if (!store.exists("tenant")) return null;
  // Read once per write to it (SqlStore.memo): every RPC of the tenant checks it.
  return store.memo("tenant", "tenant", () => store.one<{ id: string }>("SELECT id FROM tenant"));
}
