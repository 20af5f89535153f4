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
/** Logs one attempt (its number: earlier attempts of this event in the log + 1) and updates the state. */
export function recordDelivery(
  store: SqlStore,
  endpointId: string,
  event: ToolgateEvent,
  result: DeliveryResult,
  atMs: number,
): { attempt: number; state: EndpointState } | null {
  if (!webhookRow(store, endpointId)) return null; // deleted while the attempt was in flight
  store.ensureSchema();
  return store.transaction(() => {
    const last = store.one<{ seq: number }>(
      "SELECT seq FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY seq DESC LIMIT 1",
      endpointId,
    );
    const seq = (last?.seq ?? 0) + 1;
    const earlier = store.one<{ n: number }>(
      "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?",
      endpointId,
      event.id,
    )!.n;
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
    store.run(
      "DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND seq <= ?",
      endpointId,
      seq - DELIVERIES_KEPT,
    );
    store.run(
      result.delivered
        ? "UPDATE webhooks SET consecutive_failures = 0, last_attempt_at = ?, last_delivered_at = ? WHERE id = ?"
        : "UPDATE webhooks SET consecutive_failures = consecutive_failures + 1, last_attempt_at = ? WHERE id = ?",
      ...(result.delivered ? [atMs, atMs, endpointId] : [atMs, endpointId]),
    );
    const failures = webhookRow(store, endpointId)!.consecutive_failures;
    return { attempt: earlier + 1, state: endpointState(failures) };
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
