// The tenant's stored events (issue 18): what the EVENTS queue consumer hands over, kept once per id
// (a redelivery by the outbox alarm or the queue changes nothing) in arrival order, read by the pull
// feed GET /v1/events (oldest first after a cursor) and later by webhook delivery; pruned with the
// tenant's retention. The events are already redacted by the object that wrote them. The tenant
// writes one kind itself (endpoint.failing, webhook-deliveries.ts): stored here and kept in
// `tenant_outbox` until the EVENTS queue took it (sendTenantEvents: after the write, then the alarm),
// so it is delivered to the tenant's other endpoints like any event, on the one outbox's schedule.
import { retentionMs } from "../../config.ts";
import {
  excludedEndpoint,
  notifiedEndpoint,
  type EventType,
  type ToolgateEvent,
} from "../../domain/journal/events.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Env } from "../env.ts";
import { sendEvents } from "../outbox/drain.ts";
import { backoffMs, readEvent } from "../outbox/outbox.ts";
import { decodeEvent, TENANT_OUTBOX_ATTEMPTS } from "../store/tenant-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { TenantError } from "./object.ts";
import { routeEvents, type EventRoutes } from "./webhooks.ts";

/** Where a page starts: after a stored event (its id), or at a time; null: the oldest kept. */
export type EventsSince = { afterId: string } | { atMs: number } | null;
export type EventsQuery = { since: EventsSince; type: EventType | null; limit: number };
/** `next_cursor`: pass it as `since` for the next page (the last event's id; the given one if none). */
export type EventsPage = { events: ToolgateEvent[]; next_cursor: string | null; has_more: boolean };

/**
 * Stores each event of this tenant once (by id): a repeated id changes nothing. Answers where each
 * event of the batch goes (stored now or before: a redelivered message is delivered again), so the
 * consumer needs no other call before it sends.
 */
export async function receiveEvents(
  store: SqlStore,
  storage: DurableObjectStorage,
  env: Env,
  tenantId: string,
  events: readonly ToolgateEvent[],
): Promise<Result<EventRoutes, TenantError>> {
  if (events.some((event) => event.tenant_id !== tenantId))
    return err({ code: "invalid_request", detail: "an event of another tenant" });
  store.ensureTable("events");
  let written = 0;
  for (const event of events)
    written += store.run(
      "INSERT INTO events (id, type, at_ms, body) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
      event.id,
      event.type,
      event.at_ms,
      JSON.stringify(event),
    );
  // Retention: the tenant's alarm prunes (object.ts); armed here if nothing else armed it.
  if (written > 0 && (await storage.getAlarm()) === null)
    await storage.setAlarm(Math.min(...events.map((event) => event.at_ms)) + retentionMs(env));
  return routeEvents(
    store,
    env,
    tenantId,
    events.map((event) => ({
      id: event.id,
      type: event.type,
      also: notifiedEndpoint(event),
      not: excludedEndpoint(event),
    })),
  );
}

export function listEvents(
  store: SqlStore,
  query: EventsQuery,
): Result<EventsPage, { code: "invalid_request"; detail: string }> {
  if (!store.exists("events")) {
    if (query.since && "afterId" in query.since)
      return err({ code: "invalid_request", detail: unknownCursor(query.since.afterId) });
    return ok({ events: [], next_cursor: null, has_more: false });
  }
  let fromPos = 0;
  let fromMs = 0;
  if (query.since && "afterId" in query.since) {
    const at = store.one<{ pos: number }>(
      "SELECT pos FROM events WHERE id = ?",
      query.since.afterId,
    );
    if (!at) return err({ code: "invalid_request", detail: unknownCursor(query.since.afterId) });
    fromPos = at.pos;
  } else if (query.since) fromMs = query.since.atMs;
  const rows = store.all<{ body: string }>(
    `SELECT body FROM events WHERE pos > ? AND at_ms >= ?${query.type ? " AND type = ?" : ""} ORDER BY pos LIMIT ?`,
    ...[fromPos, fromMs, ...(query.type ? [query.type] : []), query.limit + 1],
  );
  const events = rows.slice(0, query.limit).map((row) => decodeEvent(row.body));
  const given = query.since && "afterId" in query.since ? query.since.afterId : null;
  return ok({
    events,
    next_cursor: events.at(-1)?.id ?? given,
    has_more: rows.length > query.limit,
  });
}

const unknownCursor = (id: string) =>
  `no stored event ${id} (events are kept for the retention period): pass an ISO time as since`;

/** Drops events older than the retention period; the next one's due time (null: none left). */
export function pruneEvents(store: SqlStore, env: Env, nowMs: number): number | null {
  if (!store.exists("events")) return null;
  const keepMs = retentionMs(env);
  store.run("DELETE FROM events WHERE at_ms <= ?", nowMs - keepMs);
  const oldest = store.one<{ at: number | null }>("SELECT MIN(at_ms) AS at FROM events")?.at;
  return oldest == null ? null : oldest + keepMs;
}

/**
 * Hands the events the tenant wrote itself (`tenant_outbox`) to its events queue through the one
 * outbox sender (durable/outbox/), each row deleted once the queue took its batch. Answers when the
 * alarm must try again (null: nothing left), on the one schedule (5 s doubling to 10 min). Never throws.
 */
export async function sendTenantEvents(store: SqlStore, env: Env): Promise<number | null> {
  if (!store.exists("tenant_outbox")) return null;
  const rows = store.all<{ id: string; payload: string }>("SELECT id, payload FROM tenant_outbox");
  if (rows.length === 0) return null;
  const sent = await sendEvents(
    env,
    rows,
    (row) => readEvent(row.payload),
    (batch) => {
      for (const row of batch) store.run("DELETE FROM tenant_outbox WHERE id = ?", row.id);
    },
  );
  if (sent) return null;
  // Each failed send counts once for what is left (older rows: no count yet).
  store.ensureColumn("tenant_outbox", TENANT_OUTBOX_ATTEMPTS);
  store.run("UPDATE tenant_outbox SET attempts = attempts + 1");
  const attempts = store.one<{ n: number }>("SELECT MAX(attempts) AS n FROM tenant_outbox")?.n ?? 1;
  return Date.now() + backoffMs(attempts);
}
