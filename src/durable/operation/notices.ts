// The operation's side of the outbox (durable/outbox/): what it gathers for `announce` (the pure
// decision of what a committed step tells the world, domain/journal/announce.ts), where it keeps it
// and how it hands it on. Events ride in the step's own log row (`unsent_events`: no extra row on
// the hot path) and go to the EVENTS queue in the background after the commit (no reply waits);
// inbox updates and limit releases are `op_outbox` rows of the same transaction, delivered before
// replies return (a listing right after sees the change). What a sink did not take waits in
// `op_outbox` with its backoff until the alarm resends it, with the same id.
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
import { decodeUnsentEvents } from "../store/operation-rows.ts";
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

/**
 * After its log row is appended (same transaction): the step's inbox updates and limit releases as
 * `op_outbox` rows. An inbox update carries the request as it stands with this row (a preview that
 * just arrived included), so it is decided again once the row is there. True: it wrote some.
 */
export function writeNotices(log: OperationLog, facts: StepFacts, said: Announcement): boolean {
  if (said.inbox.length + said.limits.length === 0) return false;
  const now = needsApproval(facts.step.effects) ? announceStep(log, facts) : said;
  const rows: Notice[] = [
    ...now.inbox.map((upsert) => ({ sink: "inbox" as const, upsert })),
    ...now.limits.map((release) => ({ sink: "limits" as const, release })),
  ];
  log.store.ensureTable("op_outbox");
  for (const notice of rows)
    writeRow(log.store, facts.seq, notice, 0, facts.nowMs + OUTBOX_RETRY_MS, facts.nowMs);
  return rows.length > 0;
}

function writeRow(
  store: SqlStore,
  seq: number,
  notice: Notice,
  attempts: number,
  nextAtMs: number,
  nowMs: number,
): void {
  const { kind, payload } = encodeNotice(notice);
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

/**
 * Delivers the inbox updates and limit releases to the tenant plane, oldest first: a taken row is
 * deleted; the first that fails backs off and stops the drain. The tenant applies each as an upsert
 * keyed by operation id and ignores one older than what it holds (`seq`), so a repeated or
 * overtaken delivery changes nothing.
 */
async function deliverNotices(shell: Shell): Promise<void> {
  const { store } = shell.log;
  const head = shell.log.head();
  if (!head) return;
  const rows = outboxRows(store).filter((row) => row.notice && row.notice.sink !== "events");
  if (rows.length === 0) return;
  const tenant = head.frozen.tenant_id;
  let detail: string | undefined;
  await deliverInOrder(
    rows,
    async ({ notice, seq }) => {
      const delivered = await ask(async () => {
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
      if (!delivered.answered) detail = delivered.detail;
      return delivered.answered;
    },
    (row) => remove(store, row),
    (row) => {
      const { attempts, delayMs } = backOff(store, row);
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

/**
 * Hands the unsent events to the EVENTS queue, oldest first: those riding in their log rows and
 * those a failed send left in `op_outbox`. Once taken they are cleared; if a send fails, the log
 * rows' events move to `op_outbox` with their first backoff and the outbox's back off.
 */
async function sendOperationEvents(shell: Shell): Promise<void> {
  const { store } = shell.log;
  const inLog = [...shell.log.unsentEvents()];
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
    ...inLog.flatMap(([seq, unsent]) =>
      decodeUnsentEvents(unsent.events).map((event) => ({
        seq,
        event,
        row: null,
        text: unsent.events,
      })),
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
  if (sent) {
    for (const row of rows) remove(store, row);
    shell.log.clearUnsent(inLog.map(([seq]) => seq));
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
              { sink: "events", event: item.event },
              1,
              nowMs + OUTBOX_RETRY_MS,
              nowMs,
            );
        shell.log.clearUnsent(inLog.map(([seq]) => seq));
      });
    }
  }
  shell.alarms.rearm();
}

/** Whether anything is still to go: an outbox row, or events riding in a log row. */
export function outboxPending(log: OperationLog): boolean {
  const store = log.store;
  if (log.unsentEvents().size > 0) return true;
  return store.exists("op_outbox") && store.one("SELECT seq FROM op_outbox LIMIT 1") !== null;
}

/** When the earliest row is due for redelivery (null: none); a log row's events OUTBOX_RETRY_MS after it. */
export function outboxDueAtMs(log: OperationLog): number | null {
  const store = log.store;
  let at = store.exists("op_outbox")
    ? (store.one<{ at: number | null }>("SELECT MIN(next_at_ms) AS at FROM op_outbox")?.at ?? null)
    : null;
  for (const unsent of log.unsentEvents().values())
    at = Math.min(at ?? Infinity, unsent.atMs + OUTBOX_RETRY_MS);
  return at;
}
