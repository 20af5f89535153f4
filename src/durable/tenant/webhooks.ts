// A tenant's webhook endpoints and their delivery logs. The `whsec_` signing secret (Standard
// Webhooks: whsec_ + base64 of 32 random bytes) is sealed like a tenant secret and leaves this object
// in two ways only: once to the person who created or rotated it, and opened for a delivery from
// this Worker (events/deliver.ts). Every attempt is logged (capped per endpoint); an endpoint's
// state is derived from its consecutive failures (domain/webhook-retry.ts).
import { openSecret, sealSecret } from "../../crypto.ts";
import { hostPolicy, secretsKey } from "../../config.ts";
import type { EventType, ToolgateEvent } from "../../domain/events.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { endpointState, type EndpointState } from "../../domain/webhook-retry.ts";
import { checkWebhookUrl, type WebhookUrlError } from "../../events/webhook-url.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantRecord, type WebhookRow } from "../store/tenant-rows.ts";
import type { TenantError } from "./object.ts";

/** Attempts kept per endpoint (the oldest go first); redeliver replays events from this log. */
export const DELIVERIES_KEPT = 100;

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
  const routed = await routeEvents(store, env, tenantId, [{ id: "", type, also }]);
  return routed.ok ? ok(routed.value.targets) : routed;
}

/** Where a batch of events goes: each endpoint's secret opened once, and per event the ids it goes to. */
export type EventRoutes = { targets: WebhookTarget[]; routes: Record<string, string[]> };

/**
 * The endpoints each event is for (subscribed to its type, or the run's `notify` endpoint named by
 * `also`), for a whole queue batch at once: one read of the table and one opening per endpoint.
 */
export async function routeEvents(
  store: SqlStore,
  env: Env,
  tenantId: string,
  events: ReadonlyArray<{ id: string; type: EventType; also: string | null }>,
): Promise<Result<EventRoutes, TenantError>> {
  const none: EventRoutes = { targets: [], routes: {} };
  if (tenantRecord(store)?.id !== tenantId || !store.exists("webhooks")) return ok(none);
  // Read once per write to the table (SqlStore.memo): each queue batch of events asks.
  const all = store.memo("webhooks", "webhooks", () =>
    store.all<WebhookRow>("SELECT * FROM webhooks ORDER BY id"),
  );
  const routes: Record<string, string[]> = {};
  const used = new Set<string>();
  for (const event of events) {
    const ids = all
      .filter((row) => {
        const types = JSON.parse(row.events) as string[];
        return types.includes("*") || types.includes(event.type) || row.id === event.also;
      })
      .map((row) => row.id);
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

/** For redeliver: the endpoint and the event as this endpoint's log last recorded it. */
export async function redeliveryOf(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  eventId: string,
): Promise<Result<{ target: WebhookTarget; event: ToolgateEvent }, TenantError>> {
  const row = tenantRecord(store)?.id === tenantId ? webhookRow(store, id) : null;
  if (!row) return err({ code: "not_found", detail: `no webhook ${id}` });
  const logged = store.exists("webhook_deliveries")
    ? store.one<{ event: string }>(
        "SELECT event FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ? ORDER BY seq DESC LIMIT 1",
        id,
        eventId,
      )
    : null;
  if (!logged)
    return err({
      code: "not_found",
      detail: `event ${eventId} is not in webhook ${id}'s delivery log (its last ${DELIVERIES_KEPT} attempts): only events sent to this endpoint can be redelivered`,
    });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const target = await openTarget(master.value, tenantId, row);
  if (!target)
    return err({
      code: "misconfigured",
      detail: `webhook ${id}'s secret could not be opened (TOOLGATE_SECRETS_KEY changed?): rotate it`,
    });
  return ok({ target, event: JSON.parse(logged.event) as ToolgateEvent });
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
    return { id: row.id, url: row.url, format, secret, console_url: row.console_url };
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
  events: JSON.parse(row.events) as WebhookRecord["events"],
  format: row.format as WebhookFormat,
  description: row.description,
  state: endpointState(row.consecutive_failures),
  consecutive_failures: row.consecutive_failures,
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
  last_attempt_at: iso(row.last_attempt_at),
  last_delivered_at: iso(row.last_delivered_at),
});
