// A webhook endpoint's delivery log: every attempt recorded (its number: earlier attempts of the
// same event + 1), capped per endpoint, newest first when read; each record updates the endpoint's
// consecutive failures, from which its state is derived (domain/webhook-retry.ts).
import type { ToolgateEvent } from "../../domain/events.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { endpointState, type EndpointState } from "../../domain/webhook-retry.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { WebhookDeliveryRow } from "../store/tenant-rows.ts";
import type { TenantError } from "./object.ts";
import { DELIVERIES_KEPT, webhookRow } from "./webhooks.ts";

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
};
export type DeliveryAttempt = { event: ToolgateEvent; result: DeliveryResult; atMs: number };
export type LoggedAttempt = { attempt: number; state: EndpointState };

/** Logs one attempt (its number: earlier attempts of this event in the log + 1) and updates the state. */
export function recordDelivery(
  store: SqlStore,
  endpointId: string,
  event: ToolgateEvent,
  result: DeliveryResult,
  atMs: number,
): LoggedAttempt | null {
  return recordDeliveries(store, endpointId, [{ event, result, atMs }])?.[0] ?? null;
}

/**
 * Logs one endpoint's attempts of a queue batch in one transaction, in order (each numbered after
 * the earlier attempts of its event), and updates the endpoint's state as if recorded one by one.
 * null: the endpoint was deleted while the attempts were in flight (nothing is logged).
 */
export function recordDeliveries(
  store: SqlStore,
  endpointId: string,
  attempts: readonly DeliveryAttempt[],
): LoggedAttempt[] | null {
  const endpoint = webhookRow(store, endpointId);
  if (!endpoint) return null;
  if (attempts.length === 0) return [];
  store.ensureSchema();
  return store.transaction(() => {
    const last = store.one<{ seq: number }>(
      "SELECT seq FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY seq DESC LIMIT 1",
      endpointId,
    );
    let seq = last?.seq ?? 0;
    let failures = endpoint.consecutive_failures;
    let lastAttempt = endpoint.last_attempt_at;
    let lastDelivered = endpoint.last_delivered_at;
    const earlierOf = new Map<string, number>();
    const logged: LoggedAttempt[] = [];
    for (const { event, result, atMs } of attempts) {
      const earlier =
        earlierOf.get(event.id) ??
        store.one<{ n: number }>(
          "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?",
          endpointId,
          event.id,
        )!.n;
      earlierOf.set(event.id, earlier + 1);
      seq += 1;
      store.run(
        `INSERT INTO webhook_deliveries (endpoint_id, seq, event_id, event, attempt, at_ms, delivered, status, latency_ms, error, snippet)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        endpointId,
        seq,
        event.id,
        JSON.stringify(event),
        earlier + 1,
        atMs,
        result.delivered ? 1 : 0,
        result.status,
        result.latency_ms,
        result.error,
        result.snippet,
      );
      failures = result.delivered ? 0 : failures + 1;
      lastAttempt = Math.max(lastAttempt ?? atMs, atMs);
      if (result.delivered) lastDelivered = Math.max(lastDelivered ?? atMs, atMs);
      logged.push({ attempt: earlier + 1, state: endpointState(failures) });
    }
    store.run(
      "DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND seq <= ?",
      endpointId,
      seq - DELIVERIES_KEPT,
    );
    store.run(
      "UPDATE webhooks SET consecutive_failures = ?, last_attempt_at = ?, last_delivered_at = ? WHERE id = ?",
      failures,
      lastAttempt,
      lastDelivered,
      endpointId,
    );
    return logged;
  });
}

/** Newest first. */
export function listDeliveries(
  store: SqlStore,
  id: string,
  limit: number,
): Result<DeliveryRecord[], TenantError> {
  if (!webhookRow(store, id)) return err({ code: "not_found", detail: `no webhook ${id}` });
  if (!store.exists("webhook_deliveries")) return ok([]);
  const rows = store.all<WebhookDeliveryRow>(
    "SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY seq DESC LIMIT ?",
    id,
    limit,
  );
  return ok(
    rows.map((row) => ({
      event_id: row.event_id,
      event_type: (JSON.parse(row.event) as ToolgateEvent).type,
      attempt: row.attempt,
      at: new Date(row.at_ms).toISOString(),
      delivered: row.delivered === 1,
      status: row.status,
      latency_ms: row.latency_ms,
      snippet: row.snippet,
      error: row.error,
    })),
  );
}
