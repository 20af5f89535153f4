// Tenant-plane events of an operation (DESIGN "The tenant plane", issue 18): built inside the
// transition's transaction from the committed step and written in its own log row
// (`unsent_events`, log.ts append); after the commit they go to the EVENTS queue in the background
// (a turn never waits for the send), and the alarm resends what the queue did not take (a send that
// fails moves them to `op_outbox` as `event:<type>` rows of the same `seq`, with their backoff). The
// id is stable over (operation, seq, type), so a resend carries the same id. `data` is what the
// console shows, redacted: redacted fields absent, hidden values scrubbed, never a secret or a
// result body.
import {
  tookEffect,
  type Effect,
  type OperationEvent,
  type OperationState,
} from "../../domain/operation/index.ts";
import { eventId, omitPaths, type EventMessage, type ToolgateEvent } from "../../domain/events.ts";
import { scrub } from "../../domain/redact.ts";
import { eventsQueue } from "../placement.ts";
import { sendInBatches } from "../../events/queue-batches.ts";
import type { FrozenRow, Shell } from "./contracts.ts";
import { toolName, type OperationLog } from "./log.ts";
import { backOffRow, OUTBOX_RETRY_MS } from "./outbox.ts";
import { approvalItem } from "./views.ts";

/** The outbox kind of an event row (beside the tenant-inbox rows of outbox.ts). */
export const EVENT_KIND_PREFIX = "event:";

/** The call's arguments as events show them: redacted fields absent, hidden values scrubbed. */
export function eventArguments(log: OperationLog, frozen: FrozenRow): unknown {
  const redaction = log.redaction(frozen);
  return omitPaths(scrub(JSON.parse(frozen.input), redaction), redaction.paths);
}

/**
 * First attempt sent → recorded (retry waits included; approval and lock waits not); null when
 * nothing was sent. `before`: the state the recording step left.
 */
export function latencyMs(before: OperationState | null, recordedAtMs: number): number | null {
  return before && "firstAttemptAtMs" in before ? recordedAtMs - before.firstAttemptAtMs : null;
}

/**
 * The events one committed step reports (inside the transaction; `before`: the state before it).
 * Every one carries the operation's `created_at_ms` (the tenant index reads it, issue 20).
 */
export function operationEvents(
  log: OperationLog,
  seq: number,
  effects: readonly Effect[],
  event: OperationEvent,
  before: OperationState | null,
  state: OperationState,
  nowMs: number,
): ToolgateEvent[] {
  const prior = before?.phase ?? null;
  const frozen = log.head()!.frozen;
  const redaction = log.redaction(frozen);
  const args = eventArguments(log, frozen);
  const make = (type: ToolgateEvent["type"], fields: Record<string, unknown>): ToolgateEvent => ({
    id: eventId(frozen.id, seq, type),
    type,
    at_ms: nowMs,
    tenant_id: frozen.tenant_id,
    run_id: frozen.run_id,
    operation_id: frozen.id,
    tool: toolName(frozen),
    // A shadow run's write (issue 22): a consumer must not take its "succeeded" for a real effect.
    data: {
      ...fields,
      created_at_ms: frozen.created_at,
      ...(frozen.plan.shadow ? { shadow: true } : {}),
      // Undo (issue 22): the compensation of this operation (an approval of it reverses that one).
      ...(frozen.plan.compensates ? { compensates: frozen.plan.compensates } : {}),
    },
  });
  const out: ToolgateEvent[] = [];
  for (const effect of effects) {
    if (effect.kind === "inbox") {
      // A preview's arrival refreshes the inbox row; the request itself was already reported.
      if (effect.state === "pending" && event.type === "preview_finished") continue;
      if (effect.state === "cancelled") continue;
      const item = approvalItem(log, effect.state);
      if (!item) continue;
      const type =
        effect.state === "pending"
          ? "approval.requested"
          : effect.state === "expired"
            ? "approval.expired"
            : "approval.decided";
      out.push(
        make(type, {
          state: item.state,
          target: item.target,
          arguments: args,
          requested_by: item.requested_by,
          expires_at_ms: item.expires_at_ms,
          decided_by: item.decided_by,
          reason: item.reason === null ? null : scrub(item.reason, redaction),
        }),
      );
    }
  }
  // outcome_unknown: reported once it needs a person (issue 24), never while toolgate still settles
  // it by itself (a resend with the same key, a lookup, the late schedule): nobody is paged for
  // what settles itself. The id is (operation, seq, type): stable however often it is resent.
  const needsPerson = effects.some(
    (effect) => effect.kind === "needs_person" && effect.open && effect.person,
  );
  if (state.phase === "outcome_unknown" && needsPerson)
    out.push(
      make("operation.outcome_unknown", {
        status: "outcome_unknown",
        code: state.code,
        reconcile: state.reconcile,
        needs_person: true,
        arguments: args,
      }),
    );
  // A write queued behind its lock past LOCK_WAITING_LONG_MS: the one recheck that marked it (a
  // recheck after that changes nothing, so writes no row and no event).
  if (event.type === "alarm" && state.phase === "awaiting_lock" && state.waitedLong)
    out.push(
      make("lock.waiting_long", {
        resource: log.head()!.frozen.plan.resource,
        blocked_by: state.blockedBy,
        waited_ms: nowMs - state.requestedAtMs,
      }),
    );
  // Every operation that reaches `recorded` reports it once: the step that entered it.
  if (state.phase === "recorded" && prior !== "recorded")
    out.push(
      make("operation.recorded", {
        status: state.outcome.status,
        code: state.outcome.status === "succeeded" ? null : state.outcome.code,
        // failed/invalid_output took effect: a consumer must not read "failed" as "not done".
        took_effect: tookEffect(
          state.outcome.status,
          state.outcome.status === "succeeded" ? null : state.outcome.code,
        ),
        attempts: state.attempts,
        latency_ms: latencyMs(before, state.recordedAtMs),
        via: state.via,
        arguments: args,
      }),
    );
  return out;
}

type EventRow = { seq: number; kind: string; payload: string; attempts: number };

/**
 * Hands the unsent events to the EVENTS queue, oldest first, in batches within the queue's limits:
 * those riding in their log rows (`unsent_events`) and those in the outbox (a failed send moved them
 * there). Once every batch was taken the rows are cleared; if it fails, the log rows' events move to the outbox with their
 * first backoff and the outbox rows back off (the alarm resends them). Never throws.
 */
export async function sendEvents(shell: Shell): Promise<void> {
  const { store } = shell.log;
  const inLog = [...shell.log.unsentEvents()];
  const rows = store.exists("op_outbox")
    ? store.all<EventRow>(
        "SELECT seq, kind, payload, attempts FROM op_outbox WHERE kind LIKE 'event:%' ORDER BY seq, kind",
      )
    : [];
  if (rows.length === 0 && inLog.length === 0) return;
  const events = [
    ...rows.map((row) => ({ seq: row.seq, event: JSON.parse(row.payload) as ToolgateEvent })),
    ...inLog.flatMap(([seq, unsent]) =>
      (JSON.parse(unsent.events) as ToolgateEvent[]).map((event) => ({ seq, event })),
    ),
  ].sort((a, b) => a.seq - b.seq);
  try {
    // Within the queue's limits (100 messages, 256 KB) per batch, on the queue of the tenant's
    // jurisdiction (placement.ts: an EU tenant's events stay in the EU); a refusal sends them all again.
    await sendInBatches(
      eventsQueue(shell.env, events[0]!.event.tenant_id),
      events,
      ({ event }) => ({
        body: { kind: "event", event } satisfies EventMessage,
        contentType: "json" as const,
      }),
    );
    for (const row of rows)
      store.run("DELETE FROM op_outbox WHERE seq = ? AND kind = ?", row.seq, row.kind);
    shell.log.clearUnsent(inLog.map(([seq]) => seq));
  } catch (error) {
    for (const row of rows) backOffRow(store, row);
    if (inLog.length > 0) moveToOutbox(shell, inLog, Date.now());
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.event_send_failed",
        operation_id: shell.log.head()?.frozen.id ?? null,
        events: events.length,
        detail: String(error),
      }),
    );
  }
  shell.alarms.rearm();
}

/** A failed first send: the log rows' events go to the outbox (created now) with their backoff. */
function moveToOutbox(
  shell: Shell,
  inLog: ReadonlyArray<readonly [number, { events: string }]>,
  nowMs: number,
): void {
  const { store } = shell.log;
  store.transaction(() => {
    store.ensureTable("op_outbox");
    for (const [seq, unsent] of inLog)
      for (const event of JSON.parse(unsent.events) as ToolgateEvent[])
        store.run(
          "INSERT OR IGNORE INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, ?, ?, 1, ?, ?)",
          seq,
          EVENT_KIND_PREFIX + event.type,
          JSON.stringify(event),
          nowMs + OUTBOX_RETRY_MS,
          nowMs,
        );
    shell.log.clearUnsent(inLog.map(([seq]) => seq));
  });
}

/** Event sends to the EVENTS queue, one after another, in the background: no reply waits for them. */
export class EventSends {
  private chain: Promise<void> = Promise.resolve();
  constructor(private readonly waitUntil: (promise: Promise<unknown>) => void) {}

  queue(shell: Shell): Promise<void> {
    this.chain = this.chain.then(() => sendEvents(shell));
    this.waitUntil(this.chain);
    return this.chain;
  }
}
