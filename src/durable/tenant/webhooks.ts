// A tenant's webhook endpoints and their delivery logs. The `whsec_` signing secret (Standard
// Webhooks: whsec_ + base64 of 32 random bytes) is sealed like a tenant secret and leaves this object
// in two ways only: once to the person who created or rotated it, and opened for a delivery from
// this Worker (events/deliver.ts). Every attempt is logged (webhook-deliveries.ts, kept for the
// retention period); an endpoint's state is derived from its consecutive failures and whether a
// delivery to it was given up (domain/webhook-retry.ts).
import { openSecret, sealSecret } from "../../crypto.ts";
import { hostPolicy, secretsKey } from "../../config.ts";
import {
  excludedEndpoint,
  notifiedEndpoint,
  readEvent,
  type EventType,
  type ToolgateEvent,
} from "../../domain/journal/events.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { endpointState, type EndpointState } from "../../domain/webhook-retry.ts";
import { checkWebhookUrl, type WebhookUrlError } from "../../events/webhook-url.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import {
  decodeEvent,
  decodeWebhookEvents,
  tenantRecord,
  type WebhookRow,
} from "../store/tenant-rows.ts";
import type { TenantError } from "./object.ts";

export type WebhookFormat = "standard" | "slack";
export type WebhookSpec = {
  url: string;
  events: Array<EventType | "*">;
  format: WebhookFormat;
  description: string | null;
  /** Origin of the request that created the endpoint: Slack messages link to its console. */
  console_url: string;
};
export type WebhookRecord = Omit<WebhookSpec, "console_url"> & {
  id: string;
  state: EndpointState;
  consecutive_failures: number;
  /** Since when a delivery to it was given up (its whole schedule failed), none delivered since. */
  failing_since: string | null;
  created_at: string;
  updated_at: string;
  last_attempt_at: string | null;
  last_delivered_at: string | null;
};
/** What a delivery needs: the endpoint with its secret opened. Lives only for the send. */
export type WebhookTarget = {
  id: string;
  url: string;
  format: WebhookFormat;
  secret: string;
  console_url: string;
  /** Its state is `failing`: its requests wait until the other endpoints' have a connection. */
  failing: boolean;
};
export type WebhooksError = WebhookUrlError;

const sealName = (id: string) => `webhook/${id}`;

function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

export async function putWebhook(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  spec: WebhookSpec,
  /** Set by run-endpoints.ts only: the run whose notify.url endpoint this is. */
  forRun: string | null = null,
): Promise<Result<WebhookRecord & { created: boolean; secret?: string }, TenantError>> {
  if (!tenantRecord(store)) return err({ code: "not_found", detail: "no such tenant" });
  const owner = runOfEndpoint(store, id);
  if (owner !== forRun)
    return err({
      code: "invalid_request",
      detail: `webhook ${id} is the notify.url endpoint of run ${owner}: it is managed by the run (DELETE removes it)`,
    });
  const url = checkWebhookUrl(spec.url, hostPolicy(env));
  if (!url.ok) return url;
  const previous = webhookRow(store, id);
  const now = Date.now();
  store.ensureSchema();
  const fields = [url.value, JSON.stringify(spec.events), spec.format, spec.description];
  if (previous) {
    store.run(
      "UPDATE webhooks SET url = ?, events = ?, format = ?, description = ?, updated_at = ? WHERE id = ?",
      ...fields,
      now,
      id,
    );
    return ok({ ...toRecord(webhookRow(store, id)!), created: false });
  }
  const master = secretsKey(env);
  if (!master.ok) return master;
  const secret = newSecret();
  const sealed = await sealSecret(master.value, tenantId, sealName(id), secret);
  store.run(
    `INSERT INTO webhooks (id, url, events, format, description, console_url, iv, ciphertext, created_at, updated_at, consecutive_failures)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
    id,
    ...fields,
    spec.console_url,
    sealed.iv,
    sealed.ciphertext,
    now,
    now,
  );
  return ok({ ...toRecord(webhookRow(store, id)!), created: true, secret });
}

/** The tenant's own endpoints: a run's notify.url endpoint (run-endpoints.ts) is not listed. */
export function listWebhooks(store: SqlStore): WebhookRecord[] {
  if (!store.exists("webhooks")) return [];
  const ownOnly = store.exists("run_endpoints")
    ? " WHERE id NOT IN (SELECT webhook_id FROM run_endpoints)"
    : "";
  return store.all<WebhookRow>(`SELECT * FROM webhooks${ownOnly} ORDER BY id`).map(toRecord);
}

/** The run whose notify.url endpoint `id` is (run-endpoints.ts); null for the tenant's own endpoints. */
export function runOfEndpoint(store: SqlStore, id: string): string | null {
  if (!store.exists("run_endpoints")) return null;
  const row = store.one<{ run_id: string }>(
    "SELECT run_id FROM run_endpoints WHERE webhook_id = ?",
    id,
  );
  return row?.run_id ?? null;
}

export function deleteWebhook(store: SqlStore, id: string): Result<true, TenantError> {
  if (!webhookRow(store, id)) return err({ code: "not_found", detail: `no webhook ${id}` });
  store.transaction(() => {
    store.run("DELETE FROM webhooks WHERE id = ?", id);
    if (store.exists("webhook_deliveries"))
      store.run("DELETE FROM webhook_deliveries WHERE endpoint_id = ?", id);
  });
  return ok(true);
}

/** A new secret, returned once; the old one stops signing at once. */
export async function rotateWebhookSecret(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
): Promise<Result<{ id: string; secret: string }, TenantError>> {
  if (!webhookRow(store, id)) return err({ code: "not_found", detail: `no webhook ${id}` });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const secret = newSecret();
  const sealed = await sealSecret(master.value, tenantId, sealName(id), secret);
  store.run(
    "UPDATE webhooks SET iv = ?, ciphertext = ?, updated_at = ? WHERE id = ?",
    sealed.iv,
    sealed.ciphertext,
    Date.now(),
    id,
  );
  return ok({ id, secret });
}

/** The endpoints subscribed to `type`, secrets opened (one that cannot be opened is left out, logged). */
export async function webhookTargets(
  store: SqlStore,
  env: Env,
  tenantId: string,
  type: EventType,
  also: string | null = null,
): Promise<Result<WebhookTarget[], TenantError>> {
  const routed = await routeEvents(store, env, tenantId, [{ id: "", type, also, not: null }]);
  return routed.ok ? ok(routed.value.targets) : routed;
}

/** Where a batch of events goes: each endpoint's secret opened once, and per event the ids it goes to. */
export type EventRoutes = { targets: WebhookTarget[]; routes: Record<string, string[]> };

/** How an event is routed: its type, the run's `notify` endpoint (`also`), the endpoint it is about (`not`). */
export type RoutedEvent = { id: string; type: EventType; also: string | null; not: string | null };

/** Whether endpoint `row` gets `event`: subscribed to its type or named by it, never the one it is about. */
const routesTo = (row: WebhookRow, event: RoutedEvent) => {
  if (row.id === event.not) return false;
  const types: string[] = decodeWebhookEvents(row.events);
  return types.includes("*") || types.includes(event.type) || row.id === event.also;
};

/** The tenant's endpoints, read once per write to the table (SqlStore.memo): each queue batch asks. */
const allEndpoints = (store: SqlStore) =>
  store.memo("webhooks", "webhooks", () =>
    store.all<WebhookRow>("SELECT * FROM webhooks ORDER BY id"),
  );

/**
 * The endpoints each event is for (subscribed to its type, or the run's `notify` endpoint named by
 * `also`; never the endpoint an endpoint.failing is about), for a whole queue batch at once: one
 * read of the table and one opening per endpoint.
 */
export async function routeEvents(
  store: SqlStore,
  env: Env,
  tenantId: string,
  events: readonly RoutedEvent[],
): Promise<Result<EventRoutes, TenantError>> {
  const none: EventRoutes = { targets: [], routes: {} };
  if (tenantRecord(store)?.id !== tenantId || !store.exists("webhooks")) return ok(none);
  const all = allEndpoints(store);
  const routes: Record<string, string[]> = {};
  const used = new Set<string>();
  for (const event of events) {
    const ids = all.filter((row) => routesTo(row, event)).map((row) => row.id);
    routes[event.id] = ids;
    for (const id of ids) used.add(id);
  }
  if (used.size === 0) return ok({ targets: [], routes });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const targets: WebhookTarget[] = [];
  for (const row of all.filter((candidate) => used.has(candidate.id))) {
    const target = await openTarget(master.value, tenantId, row);
    if (target) targets.push(target);
  }
  return ok({ targets, routes });
}

/** A scheduled retry's answer: the endpoint to send to, or why nothing is sent. */
export type RetryTarget =
  | { target: WebhookTarget }
  /** delivered: the event reached this endpoint already (by hand, or a later attempt); gone: deleted or unsubscribed. */
  | { skip: "delivered" | "gone" };

/**
 * For a queue batch's scheduled retries (`delivery` messages): per retry, its endpoint with the
 * secret opened, or why it is not sent — the event was delivered there meanwhile (a redeliver by
 * hand: the retry is cancelled), or the endpoint was deleted or no longer wants the event.
 */
export async function deliveryTargets(
  store: SqlStore,
  env: Env,
  tenantId: string,
  asks: ReadonlyArray<RoutedEvent & { endpoint_id: string }>,
): Promise<Result<RetryTarget[], TenantError>> {
  if (tenantRecord(store)?.id !== tenantId || !store.exists("webhooks"))
    return ok(asks.map(() => ({ skip: "gone" as const })));
  const all = allEndpoints(store);
  const opened = new Map<string, WebhookTarget | null>();
  const answers: RetryTarget[] = [];
  for (const ask of asks) {
    const row = all.find((candidate) => candidate.id === ask.endpoint_id);
    if (!row || !routesTo(row, ask)) {
      answers.push({ skip: "gone" });
      continue;
    }
    if (deliveredBefore(store, row.id, ask.id)) {
      answers.push({ skip: "delivered" });
      continue;
    }
    if (!opened.has(row.id)) {
      const master = secretsKey(env);
      if (!master.ok) return master;
      opened.set(row.id, await openTarget(master.value, tenantId, row));
    }
    const target = opened.get(row.id);
    answers.push(target ? { target } : { skip: "gone" });
  }
  return ok(answers);
}

/** Whether `eventId` was delivered to `endpointId` (a scheduled retry then does nothing). */
function deliveredBefore(store: SqlStore, endpointId: string, eventId: string): boolean {
  return (
    store.exists("webhook_deliveries") &&
    store.one(
      "SELECT 1 AS x FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ? AND delivered = 1 LIMIT 1",
      endpointId,
      eventId,
    ) !== null
  );
}

/**
 * For redeliver: the endpoint and the event, for as long as the tenant keeps the event (its
 * retention period): an event sent to this endpoint before (in its log), or a stored event it
 * subscribes to. The event is read from the tenant's events (the log keeps a reference to it), or
 * from the log itself for what is never stored (a webhook.test ping, an event sent but not stored).
 */
export async function redeliveryOf(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  eventId: string,
): Promise<Result<{ target: WebhookTarget; event: ToolgateEvent }, TenantError>> {
  const row = tenantRecord(store)?.id === tenantId ? webhookRow(store, id) : null;
  if (!row) return err({ code: "not_found", detail: `no webhook ${id}` });
  const stored = store.exists("events")
    ? store.one<{ body: string }>("SELECT body FROM events WHERE id = ?", eventId)
    : null;
  const logged = store.exists("webhook_deliveries")
    ? store.one<{ event: string }>(
        "SELECT event FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ? ORDER BY seq DESC LIMIT 1",
        id,
        eventId,
      )
    : null;
  // A log row keeps the whole event only when the events table does not (else its id and type).
  const event = stored
    ? decodeEvent(stored.body)
    : logged
      ? (readEvent(JSON.parse(logged.event))?.event ?? null)
      : null;
  const sendable =
    event &&
    (logged !== null ||
      routesTo(row, {
        id: event.id,
        type: event.type,
        also: notifiedEndpoint(event),
        not: excludedEndpoint(event),
      }));
  if (!event || !sendable)
    return err({
      code: "not_found",
      detail: `event ${eventId} was not sent to webhook ${id} and is not a stored event it subscribes to (events are kept for the retention period)`,
    });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const target = await openTarget(master.value, tenantId, row);
  if (!target)
    return err({
      code: "misconfigured",
      detail: `webhook ${id}'s secret could not be opened (TOOLGATE_SECRETS_KEY changed?): rotate it`,
    });
  return ok({ target, event });
}

export function webhookRow(store: SqlStore, id: string): WebhookRow | null {
  return tenantRecord(store) && store.exists("webhooks")
    ? store.one<WebhookRow>("SELECT * FROM webhooks WHERE id = ?", id)
    : null;
}

async function openTarget(
  master: string,
  tenantId: string,
  row: WebhookRow,
): Promise<WebhookTarget | null> {
  try {
    const secret = await openSecret(master, tenantId, sealName(row.id), row);
    const format = row.format as WebhookFormat;
    const failing =
      endpointState(row.consecutive_failures, row.failing_since ?? null) === "failing";
    return { id: row.id, url: row.url, format, secret, console_url: row.console_url, failing };
  } catch {
    console.error(
      JSON.stringify({
        level: "error",
        event: "toolgate.webhook_secret_unreadable",
        webhook: row.id,
      }),
    );
    return null;
  }
}

export const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const toRecord = (row: WebhookRow): WebhookRecord => ({
  id: row.id,
  url: row.url,
  events: decodeWebhookEvents(row.events),
  format: row.format as WebhookFormat,
  description: row.description,
  state: endpointState(row.consecutive_failures, row.failing_since ?? null),
  consecutive_failures: row.consecutive_failures,
  failing_since: iso(row.failing_since ?? null),
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
  last_attempt_at: iso(row.last_attempt_at),
  last_delivered_at: iso(row.last_delivered_at),
});
