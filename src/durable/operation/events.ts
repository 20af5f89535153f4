// Tenant-plane events of an operation (DESIGN "The tenant plane", issue 18): built inside the
// transition's transaction from the committed step and written to `op_outbox` as `event:<type>` rows
// of the same log row `seq`; after the commit they go to the EVENTS queue in the background (a turn
// never waits for the send), and the outbox alarm resends what the queue did not take. The id is
// stable over (operation, seq, type), so a resend carries the same id. `data` is what the console
// shows, redacted: redacted fields absent, hidden values scrubbed, never a secret or a result body.
import type { Effect, OperationEvent, OperationState } from "../../domain/operation/index.ts";
import { eventId, omitPaths, type EventMessage, type ToolgateEvent } from "../../domain/events.ts";
import { scrub } from "../../domain/redact.ts";
import type { SqlStore } from "../store/sql-store.ts";
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
    data: { ...fields, created_at_ms: frozen.created_at },
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
  // outcome_unknown: reported when the operation enters it (a lookup that sends it back from
  // reconciling is the same episode) and again when it comes to need a person.
  const needsPerson = effects.some((effect) => effect.kind === "needs_person" && effect.open);
  const entered = prior !== "outcome_unknown" && prior !== "reconciling";
  if (state.phase === "outcome_unknown" && (entered || needsPerson))
    out.push(
      make("operation.outcome_unknown", {
        status: "outcome_unknown",
        code: state.code,
        reconcile: state.reconcile,
        needs_person: needsPerson || state.reconcile === "human",
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
        attempts: state.attempts,
        latency_ms: latencyMs(before, state.recordedAtMs),
        via: state.via,
        arguments: args,
      }),
    );
  return out;
}

/** Written inside the transition's transaction, beside its log row `seq`. */
export function writeEvents(
  store: SqlStore,
  seq: number,
  events: readonly ToolgateEvent[],
  nowMs: number,
): void {
  if (events.length === 0) return;
  store.ensureTable("op_outbox");
  for (const event of events)
    store.run(
      "INSERT INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, ?, ?, 0, ?, ?)",
      seq,
      EVENT_KIND_PREFIX + event.type,
      JSON.stringify(event),
      nowMs + OUTBOX_RETRY_MS,
      nowMs,
    );
}

type EventRow = { seq: number; kind: string; payload: string; attempts: number };

/**
 * Hands the unsent event rows to the EVENTS queue in one batch; deletes them once `sendBatch`
 * resolved, else backs them off (the alarm resends them). Never throws.
 */
export async function sendEvents(shell: Shell): Promise<void> {
  const store = shell.log.store;
  if (!store.exists("op_outbox")) return;
  const rows = store.all<EventRow>(
    "SELECT seq, kind, payload, attempts FROM op_outbox WHERE kind LIKE 'event:%' ORDER BY seq, kind",
  );
  if (rows.length === 0) return;
  try {
    await shell.env.EVENTS.sendBatch(
      rows.map((row) => ({
        body: { kind: "event", event: JSON.parse(row.payload) } satisfies EventMessage,
        contentType: "json" as const,
      })),
    );
    for (const row of rows)
      store.run("DELETE FROM op_outbox WHERE seq = ? AND kind = ?", row.seq, row.kind);
  } catch (error) {
    for (const row of rows) backOffRow(store, row);
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.event_send_failed",
        operation_id: shell.log.head()?.frozen.id ?? null,
        events: rows.length,
        detail: String(error),
      }),
    );
  }
  shell.alarms.rearm();
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
