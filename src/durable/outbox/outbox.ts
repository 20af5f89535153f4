// The one outbox every object uses for what the world must learn of its transitions (issue 32): each
// notice is written inside the transition's own transaction (a crash after the commit delays it,
// never loses it; nothing is told of a transition that did not commit), sent after the commit, and
// sent again by the object's alarm on one schedule (5 s, doubling to 10 min) until its sink took it.
// A notice names its sink: the EVENTS queue, the tenant's inbox, or a limit's reservations.
import type { InboxUpsert, LimitRelease } from "../../domain/journal/announce.ts";
import { ToolgateEvent } from "../../domain/journal/events.ts";

/** A notice not taken is sent again after 5 s, then at doubling gaps up to 10 min. */
export const OUTBOX_RETRY_MS = 5_000;
export const OUTBOX_RETRY_MAX_MS = 600_000;

/** The wait before try `attempts + 1` of a notice whose `attempts`-th try failed. */
export function backoffMs(attempts: number): number {
  return Math.min(
    OUTBOX_RETRY_MAX_MS,
    OUTBOX_RETRY_MS * 2 ** Math.min(Math.max(attempts, 1) - 1, 20),
  );
}

export type Notice =
  | { sink: "events"; event: ToolgateEvent }
  | { sink: "inbox"; upsert: InboxUpsert }
  | { sink: "limits"; release: LimitRelease };

/**
 * A notice as an outbox row: `kind` (unique per log position) and its payload. An event's kind is
 * `event:` + its type (an inbox update of the same name may share its log position); the payloads
 * are those the rows written before issue 32 hold, so those are sent unchanged after a deploy.
 */
export function encodeNotice(notice: Notice): { kind: string; payload: string } {
  switch (notice.sink) {
    case "events":
      return { kind: `event:${notice.event.type}`, payload: JSON.stringify(notice.event) };
    case "inbox": {
      const { kind, ...payload } = notice.upsert;
      return { kind, payload: JSON.stringify(payload) };
    }
    case "limits":
      return {
        kind: notice.release.kind,
        payload: JSON.stringify({
          target: "limits",
          claims: notice.release.claims,
          ...(notice.release.kind === "tripwire.outcome" ? { failed: notice.release.failed } : {}),
        }),
      };
  }
}

/**
 * An event as an outbox stored it, checked; one that does not read as an event (written by an older
 * version) is sent as it was written, never held back: the consumer decides what it can read.
 */
export function readEvent(text: string): ToolgateEvent {
  const body: unknown = JSON.parse(text);
  const event = ToolgateEvent.safeParse(body);
  return event.success ? event.data : (body as ToolgateEvent);
}

/** An outbox row read back (null: a row no sink knows, left for a person to read). */
export function decodeNotice(kind: string, payload: string): Notice | null {
  if (kind.startsWith("event:")) return { sink: "events", event: readEvent(payload) };
  const body: unknown = JSON.parse(payload);
  const target = (body as { target?: unknown } | null)?.target;
  if (target === "limits") {
    const { claims, failed } = body as LimitRelease;
    return {
      sink: "limits",
      release:
        kind === "tripwire.outcome"
          ? { kind, claims, failed: failed === true }
          : { kind: "limits.released", claims },
    };
  }
  if (target === "approval" || target === "unknown" || target === "held" || target === "grant")
    return { sink: "inbox", upsert: { kind, ...(body as object) } as InboxUpsert };
  return null;
}
