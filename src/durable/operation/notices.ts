// The operation's side of the outbox (durable/outbox/): what it gathers for `announce` (the pure
// decision of what a committed step tells the world, domain/journal/announce.ts), where it keeps it
// and how it hands it on. All of it rides in the step's own log row (`unsent_events`,
// `unsent_notices`: no extra row on the hot path; one UPDATE clears the row once both are taken).
// Events go to the EVENTS queue in the background after the commit (no reply waits); inbox updates
// and limit releases are delivered before replies return (a listing right after sees the change).
// What a sink did not take moves to `op_outbox` with its backoff until the alarm resends it, with
// the same id.
import {
  announce,
  needsApproval,
  type Announcement,
  type CallData,
} from "../../domain/journal/announce.ts";
import { omitPaths, type ToolgateEvent } from "../../domain/journal/events.ts";
import type {
  Effect,
  OperationEvent,
  OperationState,
  TraceEvent,
} from "../../domain/operation/index.ts";
import { scrub } from "../../domain/redact.ts";
import { deliverInOrder, sendEvents } from "../outbox/drain.ts";
import {
  backoffMs,
  decodeNotice,
  encodeNotice,
  OUTBOX_RETRY_MS,
  type Notice,
} from "../outbox/outbox.ts";
import { decodeUnsentEvents, decodeUnsentNotices } from "../store/operation-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantStub } from "../stubs.ts";
import type { FrozenRow, Shell } from "./contracts.ts";
import { ask } from "./gather.ts";
import { releaseClaims, reportOutcome } from "./limits.ts";
import { toolName, type OperationLog } from "./log.ts";
import { approvalItem } from "./views.ts";

/** The call's arguments as events show them: redacted fields absent, hidden values scrubbed. */
export function eventArguments(log: OperationLog, frozen: FrozenRow): unknown {
  const redaction = log.redaction(frozen);
  return omitPaths(scrub(JSON.parse(frozen.input), redaction), redaction.paths);
}

/** What `announce` is told of the operation (inside the transaction, once head() is row `seq`). */
function callData(
  log: OperationLog,
  seq: number,
  effects: readonly Effect[],
  nowMs: number,
): CallData {
  const frozen = log.head()!.frozen;
  const redaction = log.redaction(frozen);
  // The approval request only for a step that touches the inbox (it reads the tool and the view).
  const item = needsApproval(effects) ? approvalItem(log, "pending") : null;
  const { state: _, ...approval } = item ?? { state: null };
  return {
    tenantId: frozen.tenant_id,
    runId: frozen.run_id,
    operationId: frozen.id,
    tool: toolName(frozen),
    createdAtMs: frozen.created_at,
    seq,
    nowMs,
    arguments: eventArguments(log, frozen),
    resource: frozen.plan.resource ?? null,
    limits: frozen.plan.limits ?? [],
    shadow: Boolean(frozen.plan.shadow),
    compensates: frozen.plan.compensates ?? null,
    ...(frozen.plan.credential ? { user: frozen.plan.credential.user } : {}),
    approval: item ? (approval as CallData["approval"]) : null,
    approvalReason: item?.reason == null ? null : scrub(item.reason, redaction),
    edited: frozen.edit
      ? {
          proposed_input_hash: frozen.edit.proposed_hash,
          input_hash: frozen.input_hash,
          by: frozen.edit.by,
          via: frozen.edit.via,
        }
      : null,
  };
}

type StepFacts = {
  seq: number;
  before: OperationState | null;
  step: { state: OperationState; effects: readonly Effect[]; trace: readonly TraceEvent[] };
  event: OperationEvent;
  nowMs: number;
};

/** The step's notices, decided inside its transaction (its events ride in its own log row). */
export function announceStep(log: OperationLog, facts: StepFacts): Announcement {
  const { seq, before, step, event, nowMs } = facts;
  return announce(before, step, event, callData(log, seq, step.effects, nowMs));
}

/** A step's inbox updates and limit releases as the rows its log row carries (outbox.ts encodeNotice). */
export function noticeRows(said: Announcement): Array<{ kind: string; payload: string }> {
  return [
    ...said.inbox.map((upsert) => encodeNotice({ sink: "inbox", upsert })),
    ...said.limits.map((release) => encodeNotice({ sink: "limits", release })),
  ];
}

function writeRow(
  store: SqlStore,
  seq: number,
  { kind, payload }: { kind: string; payload: string },
  attempts: number,
  nextAtMs: number,
  nowMs: number,
): void {
  store.run(
    "INSERT OR IGNORE INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, ?, ?, ?, ?, ?)",
    seq,
    kind,
    payload,
    attempts,
    nextAtMs,
    nowMs,
  );
}

type Row = { seq: number; kind: string; payload: string; attempts: number };
type Pending = Row & { notice: Notice | null };

function outboxRows(store: SqlStore): Pending[] {
  if (!store.exists("op_outbox")) return [];
  return store
    .all<Row>("SELECT seq, kind, payload, attempts FROM op_outbox ORDER BY seq, kind")
    .map((row) => ({ ...row, notice: decodeNotice(row.kind, row.payload) }));
}

function backOff(store: SqlStore, row: Row): { attempts: number; delayMs: number } {
  const attempts = row.attempts + 1;
  const delayMs = backoffMs(attempts);
  store.run(
    "UPDATE op_outbox SET attempts = ?, next_at_ms = ? WHERE seq = ? AND kind = ?",
    attempts,
    Date.now() + delayMs,
    row.seq,
    row.kind,
  );
  return { attempts, delayMs };
}

const remove = (store: SqlStore, row: Row) =>
  store.run("DELETE FROM op_outbox WHERE seq = ? AND kind = ?", row.seq, row.kind);

/** The operation's outbox: its sends, one after another, and what the alarm must know of them. */
export class OperationOutbox {
  private inbox: Promise<void> = Promise.resolve();
  private events: Promise<void> = Promise.resolve();

  constructor(
    private readonly shell: () => Shell,
    private readonly waitUntil: (promise: Promise<unknown>) => void,
  ) {}

  /** Both sends, queued after the ones queued; resolves when both are done. */
  drain(): Promise<void> {
    return Promise.all([this.deliverInbox(), this.sendEvents()]).then(() => undefined);
  }

  /** The inbox updates and limit releases queued so far, delivered (replies wait for them). */
  settled(): Promise<void> {
    return this.inbox;
  }

  deliverInbox(): Promise<void> {
    return (this.inbox = this.inbox.then(() => deliverNotices(this.shell())));
  }

  /** Events go in the background: no reply waits for them. */
  sendEvents(): Promise<void> {
    this.events = this.events.then(() => sendOperationEvents(this.shell()));
    this.waitUntil(this.events);
    return this.events;
  }
}

/** A notice to deliver: an `op_outbox` row, or one riding in its log row (`riding`). */
type Delivery = Pending & { riding: boolean };

/** The riding notices of the log rows not yet delivered, in log order, as outbox rows read them. */
function ridingNotices(log: OperationLog): Delivery[] {
  return [...log.unsentNotices()].flatMap(([seq, unsent]) =>
    unsent.notices === null
      ? []
      : decodeUnsentNotices(unsent.notices).map(({ kind, payload }) => ({
          seq,
          kind,
          payload,
          attempts: 0,
          notice: decodeNotice(kind, payload),
          riding: true,
        })),
  );
}

/**
 * Delivers the inbox updates and limit releases to the tenant plane, oldest first: a taken outbox
 * row is deleted, a log row whose riding notices were all taken is cleared (log.taken); the first
 * that fails stops the drain: an outbox row backs off, riding notices not delivered move to
 * `op_outbox` with their first backoff. The tenant applies each as an upsert keyed by operation id
 * and ignores one older than what it holds (`seq`), so a repeated or overtaken delivery changes
 * nothing.
 */
async function deliverNotices(shell: Shell): Promise<void> {
  const { store } = shell.log;
  const head = shell.log.head();
  if (!head) return;
  const rows: Delivery[] = [
    ...outboxRows(store)
      .filter((row) => row.notice && row.notice.sink !== "events")
      .map((row) => ({ ...row, riding: false })),
    ...ridingNotices(shell.log),
  ].sort((a, b) => a.seq - b.seq);
  if (rows.length === 0) return;
  const tenant = head.frozen.tenant_id;
  let detail: string | undefined;
  // Riding rows left to deliver per log row: its notices are taken when none is left.
  const left = new Map<number, number>();
  for (const row of rows) if (row.riding) left.set(row.seq, (left.get(row.seq) ?? 0) + 1);
  const delivered = new Set<Delivery>();
  await deliverInOrder(
    rows,
    async ({ notice, seq }) => {
      const answer = await ask(async () => {
        if (notice?.sink === "limits" && notice.release.kind === "tripwire.outcome")
          return reportOutcome(
            shell.env,
            tenant,
            head.frozen.id,
            notice.release.claims,
            notice.release.failed,
          );
        if (notice?.sink === "limits")
          return releaseClaims(shell.env, tenant, head.frozen.id, notice.release.claims);
        if (notice?.sink !== "inbox") throw new Error("an outbox row no sink knows");
        const stub = tenantStub(shell.env, tenant);
        const { upsert } = notice;
        if (upsert.target === "approval") await stub.upsertApproval(upsert.item, seq);
        else if (upsert.target === "held") await stub.markHeld(upsert.item, upsert.open, seq);
        else if (upsert.target === "grant") await stub.recordGrantUse(upsert.item);
        else await stub.markUnknown(upsert.item, upsert.open, seq);
      });
      if (!answer.answered) detail = answer.detail;
      return answer.answered;
    },
    (row) => {
      delivered.add(row);
      if (!row.riding) return void remove(store, row);
      const rest = left.get(row.seq)! - 1;
      left.set(row.seq, rest);
      if (rest === 0) shell.log.taken([row.seq], "notices");
    },
    (row) => {
      const { attempts, delayMs } = row.riding
        ? moveRiding(
            shell.log,
            rows.filter((other) => other.riding && !delivered.has(other)),
          )
        : backOff(store, row);
      console.error(
        JSON.stringify({
          level: "warn",
          event: "toolgate.outbox_delivery_failed",
          operation_id: head.frozen.id,
          kind: row.kind,
          attempts,
          retry_in_ms: delayMs,
          detail,
        }),
      );
    },
  );
  // Back to the state's own alarm, or the next redelivery if that comes first.
  shell.alarms.rearm();
}

/** Riding notices not delivered go to `op_outbox` with their first backoff; their rows are cleared. */
function moveRiding(
  log: OperationLog,
  rows: readonly Delivery[],
): { attempts: number; delayMs: number } {
  const nowMs = Date.now();
  const delayMs = backoffMs(1);
  log.store.transaction(() => {
    log.store.ensureTable("op_outbox");
    for (const row of rows) writeRow(log.store, row.seq, row, 1, nowMs + delayMs, nowMs);
    log.taken([...new Set(rows.map((row) => row.seq))], "notices", true);
  });
  return { attempts: 1, delayMs };
}

/**
 * Hands the unsent events to the EVENTS queue, oldest first: those riding in their log rows and
 * those a failed send left in `op_outbox`. Once taken they are cleared (log.taken); if a send fails,
 * the log rows' events move to `op_outbox` with their first backoff and the outbox's back off.
 */
async function sendOperationEvents(shell: Shell): Promise<void> {
  const { store } = shell.log;
  const inLog = [...shell.log.unsentNotices()].flatMap(([seq, unsent]) =>
    unsent.events === null ? [] : [{ seq, events: unsent.events }],
  );
  const rows = outboxRows(store).filter((row) => row.notice?.sink === "events");
  if (rows.length === 0 && inLog.length === 0) return;
  // `text`: the stored JSON the event came from (its outbox row's, or its log row's array).
  type Item = { seq: number; event: ToolgateEvent; row: Row | null; text: string };
  const items: Item[] = [
    ...rows.map((row) => ({
      seq: row.seq,
      event: (row.notice as { event: ToolgateEvent }).event,
      row: row as Row | null,
      text: row.payload,
    })),
    ...inLog.flatMap(({ seq, events }) =>
      decodeUnsentEvents(events).map((event) => ({ seq, event, row: null, text: events })),
    ),
  ].sort((a, b) => a.seq - b.seq);
  // A refusal sends them all again (the same ids): the consumer keeps each id once.
  const sent = await sendEvents(
    shell.env,
    items,
    (item) => item.event,
    () => {},
    {
      operation_id: shell.log.head()?.frozen.id ?? null,
    },
    (item) => item.text,
  );
  const seqs = inLog.map(({ seq }) => seq);
  if (sent) {
    for (const row of rows) remove(store, row);
    shell.log.taken(seqs, "events");
  } else {
    for (const row of rows) backOff(store, row);
    if (inLog.length > 0) {
      const nowMs = Date.now();
      store.transaction(() => {
        store.ensureTable("op_outbox");
        for (const item of items)
          if (!item.row)
            writeRow(
              store,
              item.seq,
              encodeNotice({ sink: "events", event: item.event }),
              1,
              nowMs + OUTBOX_RETRY_MS,
              nowMs,
            );
        shell.log.taken(seqs, "events", true);
      });
    }
  }
  shell.alarms.rearm();
}

/** Whether anything is still to go: an outbox row, or events riding in a log row. */
export function outboxPending(log: OperationLog): boolean {
  const store = log.store;
  if (log.unsentNotices().size > 0) return true;
  return store.exists("op_outbox") && store.one("SELECT seq FROM op_outbox LIMIT 1") !== null;
}

/** When the earliest row is due for redelivery (null: none); a log row's events OUTBOX_RETRY_MS after it. */
export function outboxDueAtMs(log: OperationLog): number | null {
  const store = log.store;
  let at = store.exists("op_outbox")
    ? (store.one<{ at: number | null }>("SELECT MIN(next_at_ms) AS at FROM op_outbox")?.at ?? null)
    : null;
  for (const unsent of log.unsentNotices().values())
    at = Math.min(at ?? Infinity, unsent.atMs + OUTBOX_RETRY_MS);
  return at;
}
