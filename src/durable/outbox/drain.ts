// Hands an object's outbox to its sinks, oldest first; never throws. Events go to the EVENTS queue of
// the tenant's jurisdiction (placement.ts: an EU tenant's events stay in the EU) in batches within
// the queue's limits (queue-batches.ts: 100 messages / 256 KB), each batch marked taken once the
// queue took it; inbox updates and limit releases go one by one, in order, stopping at the first
// that fails. What was not taken backs off on the one schedule (outbox.ts) and the alarm resends it,
// with the same event ids.
import type { EventMessage, ToolgateEvent } from "../../domain/journal/events.ts";
import { boundedBytes, sendInBatches } from "../../events/queue-batches.ts";
import type { Env } from "../env.ts";
import { eventsQueue } from "../placement.ts";

/**
 * Sends `items` (each carrying one event, all of one tenant) to the events queue; `taken` is told of
 * each batch the queue took. False: the queue refused one (the rest were not sent); logged here.
 * `textOf`: the stored JSON holding the item's event (its row's), which bounds its size without
 * encoding it again (queue-batches.ts boundedBytes).
 */
export async function sendEvents<T>(
  env: Env,
  items: readonly T[],
  eventOf: (item: T) => ToolgateEvent,
  taken: (batch: T[]) => void,
  context: Record<string, unknown> = {},
  textOf?: (item: T) => string,
): Promise<boolean> {
  if (items.length === 0) return true;
  try {
    await sendInBatches(
      eventsQueue(env, eventOf(items[0]!).tenant_id),
      items,
      (item) => ({
        body: { kind: "event", event: eventOf(item) } satisfies EventMessage,
        contentType: "json" as const,
      }),
      taken,
      textOf && ((item) => boundedBytes(textOf(item))),
    );
    return true;
  } catch (error) {
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.event_send_failed",
        ...context,
        events: items.length,
        detail: String(error),
      }),
    );
    return false;
  }
}

/**
 * Delivers `rows` one by one, in order, through `deliver` (true: its sink took it); each taken row
 * is `done`, and the first not taken is `failed` (it backs off) and stops the drain, so a later
 * update never overtakes an earlier one of the same object.
 */
export async function deliverInOrder<T>(
  rows: readonly T[],
  deliver: (row: T) => Promise<boolean>,
  done: (row: T) => void,
  failed: (row: T) => void,
): Promise<void> {
  for (const row of rows) {
    if (!(await deliver(row))) return failed(row);
    done(row);
  }
}
