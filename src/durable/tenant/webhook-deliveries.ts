// A webhook endpoint's delivery log (issue 18, issue 38): every attempt recorded with its number on
// the schedule (carried by the queue message, never counted from this log) and what follows it — the
// next attempt's due time, or the end of the schedule — newest first when read, kept for the
// tenant's retention period (pruned by age, not by count). Each record updates the endpoint's
// consecutive failures and `failing_since` (set by the first delivery given up, cleared by a
// delivered attempt), from which its state is derived (domain/webhook-retry.ts); becoming failing
// writes one `endpoint.failing` event to the tenant's events and its outbox (tenant/events.ts).
import { retentionMs } from "../../config.ts";
import { eventId, type ToolgateEvent } from "../../domain/journal/events.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import {
  endpointState,
  type EndpointState,
  type GiveUpReason,
  type WebhookRetryPlan,
} from "../../domain/webhook-retry.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import {
  decodeLoggedEventType,
  DELIVERIES_ADDED_COLUMNS,
  tenantRecord,
  WEBHOOKS_ADDED_COLUMNS,
  type WebhookDeliveryRow,
  type WebhookRow,
} from "../store/tenant-rows.ts";
import type { TenantError } from "./contracts.ts";
import { iso, runOfEndpoint, webhookRow } from "./webhooks.ts";

/** One attempt's outcome: 2xx is delivered; anything else, a timeout or a refusal is a failure. */
export type DeliveryResult = {
  delivered: boolean;
  status: number | null;
  latency_ms: number;
  /** The start of the response body (capped, secret-scrubbed), or why there was none. */
  snippet: string;
  error: string | null;
};
export type DeliveryRecord = DeliveryResult & {
  event_id: string;
  event_type: string;
  attempt: number;
  at: string;
  /** An attempt by hand (redeliver, test), outside the schedule. */
  by_hand: boolean;
  /** Failed, and the event's next scheduled attempt is due then (only on its latest attempt). */
  next_attempt_at: string | null;
  /** With this attempt the delivery was given up: no automatic attempt follows (redeliver by hand). */
  given_up: boolean;
};
export type DeliveryAttempt = {
  event: ToolgateEvent;
  result: DeliveryResult;
  atMs: number;
  /** Its number on the schedule; null: by hand (numbered after the event's last logged attempt). */
  attempt: number | null;
  /** After a failed scheduled attempt: the next one, or the end. null: delivered, or by hand. */
  plan: WebhookRetryPlan | null;
};
export type LoggedAttempt = { attempt: number; state: EndpointState };
export type Recorded = {
  logged: LoggedAttempt[];
  /** The endpoint.failing event this record wrote (the endpoint became failing), to be sent. */
  announced: ToolgateEvent | null;
};

/** The log may outlive the retention period by this much: its pruning needs no alarm of its own. */
const PRUNE_GAP_MS = 3_600_000;

/**
 * Logs one endpoint's attempts of a queue batch in one transaction, in order, and updates the
 * endpoint's state as if recorded one by one. An attempt by hand inherits what the schedule had
 * planned (a failed redeliver leaves the next scheduled attempt as it was; a delivered one ends it).
 * null: the endpoint was deleted while the attempts were in flight (nothing is logged).
 */
export function recordDeliveries(
  store: SqlStore,
  endpointId: string,
  attempts: readonly DeliveryAttempt[],
): Recorded | null {
  const endpoint = webhookRow(store, endpointId);
  if (!endpoint) return null;
  if (attempts.length === 0) return { logged: [], announced: null };
  store.ensureSchema();
  for (const column of WEBHOOKS_ADDED_COLUMNS) store.ensureColumn("webhooks", column);
  for (const column of DELIVERIES_ADDED_COLUMNS) store.ensureColumn("webhook_deliveries", column);
  const tenantId = tenantRecord(store)!.id;
  return store.transaction(() => {
    const last = store.one<{ seq: number }>(
      "SELECT seq FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY seq DESC LIMIT 1",
      endpointId,
    );
    let seq = last?.seq ?? 0;
    let failures = endpoint.consecutive_failures;
    let failingSince = endpoint.failing_since ?? null;
    let lastAttempt = endpoint.last_attempt_at;
    let lastDelivered = endpoint.last_delivered_at;
    let announce: {
      seq: number;
      attempt: DeliveryAttempt;
      number: number;
      reason: GiveUpReason;
    } | null = null;
    const logged: LoggedAttempt[] = [];
    for (const item of attempts) {
      const { event, result, atMs, plan } = item;
      let attempt = item.attempt;
      let next: { atMs: number | null; gaveUp: number } = { atMs: null, gaveUp: 0 };
      if (plan && !result.delivered)
        next =
          plan.kind === "retry" ? { atMs: plan.dueAtMs, gaveUp: 0 } : { atMs: null, gaveUp: 1 };
      if (attempt === null) {
        const before = byHandBasis(store, endpointId, event.id);
        attempt = before.top + 1;
        if (!result.delivered && before.latest) next = before.latest;
      }
      seq += 1;
      store.run(
        `INSERT INTO webhook_deliveries (endpoint_id, seq, event_id, event, attempt, at_ms, delivered, status, latency_ms, error, snippet, next_at_ms, gave_up, by_hand)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        endpointId,
        seq,
        event.id,
        storedEvent(store, event),
        attempt,
        atMs,
        result.delivered ? 1 : 0,
        result.status,
        result.latency_ms,
        result.error,
        result.snippet,
        next.atMs,
        next.gaveUp,
        item.attempt === null ? 1 : 0,
      );
      failures = result.delivered ? 0 : failures + 1;
      if (result.delivered) ((failingSince = null), (announce = null));
      else if (plan?.kind === "failed" && failingSince === null) {
        failingSince = atMs;
        announce = { seq, attempt: item, number: attempt, reason: plan.reason };
      }
      lastAttempt = Math.max(lastAttempt ?? atMs, atMs);
      if (result.delivered) lastDelivered = Math.max(lastDelivered ?? atMs, atMs);
      logged.push({ attempt, state: endpointState(failures, failingSince) });
    }
    store.run(
      "UPDATE webhooks SET consecutive_failures = ?, last_attempt_at = ?, last_delivered_at = ?, failing_since = ? WHERE id = ?",
      failures,
      lastAttempt,
      lastDelivered,
      failingSince,
      endpointId,
    );
    // A run's notify.url endpoint (an agent's own URL) fails when its agent is gone: not announced.
    if (!announce || runOfEndpoint(store, endpointId) !== null) return { logged, announced: null };
    const announced = endpointFailing(tenantId, endpoint, failures, announce);
    store.run(
      "INSERT INTO events (id, type, at_ms, body) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
      announced.id,
      announced.type,
      announced.at_ms,
      JSON.stringify(announced),
    );
    store.run(
      "INSERT OR IGNORE INTO tenant_outbox (id, payload) VALUES (?, ?)",
      announced.id,
      JSON.stringify(announced),
    );
    return { logged, announced };
  });
}

/** For an attempt by hand: the event's highest attempt number here and what its latest attempt planned. */
function byHandBasis(store: SqlStore, endpointId: string, eventId: string) {
  const latest = store.one<{
    attempt: number;
    delivered: number;
    next_at_ms: number | null;
    gave_up: number;
  }>(
    "SELECT attempt, delivered, next_at_ms, gave_up FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ? ORDER BY seq DESC LIMIT 1",
    endpointId,
    eventId,
  );
  const top = store.one<{ n: number | null }>(
    "SELECT MAX(attempt) AS n FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?",
    endpointId,
    eventId,
  )!.n;
  return {
    top: top ?? 0,
    latest:
      latest && latest.delivered === 0 ? { atMs: latest.next_at_ms, gaveUp: latest.gave_up } : null,
  };
}

/** What the log keeps of the event: a reference when the tenant's events table holds it, else all of it. */
function storedEvent(store: SqlStore, event: ToolgateEvent): string {
  const held =
    store.exists("events") &&
    store.one("SELECT 1 AS x FROM events WHERE id = ?", event.id) !== null;
  return JSON.stringify(
    held ? { id: event.id, type: event.type, operation_id: event.operation_id } : event,
  );
}

/** The endpoint.failing event: which endpoint, why, and the delivery that was given up (never its URL). */
function endpointFailing(
  tenantId: string,
  endpoint: WebhookRow,
  consecutiveFailures: number,
  given: { seq: number; attempt: DeliveryAttempt; number: number; reason: GiveUpReason },
): ToolgateEvent {
  const { event, result, atMs } = given.attempt;
  return {
    id: eventId(`${tenantId}:webhook:${endpoint.id}`, given.seq, "endpoint.failing"),
    type: "endpoint.failing",
    at_ms: atMs,
    tenant_id: tenantId,
    run_id: null,
    operation_id: null,
    tool: null,
    data: {
      webhook_id: endpoint.id,
      description: endpoint.description,
      reason: given.reason,
      given_up_event_id: event.id,
      given_up_event_type: event.type,
      attempts: given.number,
      consecutive_failures: consecutiveFailures,
      last_status: result.status,
      last_error: result.error,
    },
  };
}

/** Newest first. */
export function listDeliveries(
  store: SqlStore,
  id: string,
  limit: number,
): Result<DeliveryRecord[], TenantError> {
  if (!webhookRow(store, id)) return err({ code: "not_found", detail: `no webhook ${id}` });
  if (!store.exists("webhook_deliveries")) return ok([]);
  const rows = store.all<WebhookDeliveryRow & { latest: number }>(
    `SELECT d.*, d.seq = (SELECT MAX(seq) FROM webhook_deliveries e WHERE e.endpoint_id = d.endpoint_id AND e.event_id = d.event_id) AS latest
     FROM webhook_deliveries d WHERE d.endpoint_id = ? ORDER BY d.seq DESC LIMIT ?`,
    id,
    limit,
  );
  return ok(
    rows.map((row) => ({
      event_id: row.event_id,
      event_type: decodeLoggedEventType(row.event),
      attempt: row.attempt,
      at: new Date(row.at_ms).toISOString(),
      delivered: row.delivered === 1,
      status: row.status,
      latency_ms: row.latency_ms,
      snippet: row.snippet,
      error: row.error,
      by_hand: row.by_hand === 1,
      next_attempt_at: row.latest === 1 && row.delivered === 0 ? iso(row.next_at_ms ?? null) : null,
      given_up: row.gave_up === 1,
    })),
  );
}

/** Drops attempts older than the retention period; the next due time (null: none left). */
export function pruneDeliveries(store: SqlStore, env: Env, nowMs: number): number | null {
  if (!store.exists("webhook_deliveries")) return null;
  const keepMs = retentionMs(env);
  store.run("DELETE FROM webhook_deliveries WHERE at_ms <= ?", nowMs - keepMs);
  const oldest = store.one<{ at: number | null }>(
    "SELECT MIN(at_ms) AS at FROM webhook_deliveries",
  )?.at;
  return oldest == null ? null : Math.max(oldest + keepMs, nowMs + PRUNE_GAP_MS);
}
