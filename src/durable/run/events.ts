// The run's tenant-plane events (issue 18): `turn.settled` when a turn first settles and
// `run.budget_exhausted` the first time a budget refuses a call. Each is written to `run_events`
// in the transaction that admits or settles the turn (or on its own, one statement, where the
// settlement writes nothing); its stable id is the primary key, so a second write of the same
// event does nothing, and a sent row stays (`sent = 1`) as that marker until the run is pruned.
// After the commit the rows go to the EVENTS queue in the background through the one outbox
// (durable/outbox/: its sender, batches and schedule); the run's alarm, armed with the write, resends
// what the queue did not take, then goes back to retention (retention.ts).
import {
  eventId,
  makeEvent,
  ToolgateEvent,
  type BudgetExhaustedData,
  type TurnSettledData,
} from "../../domain/journal/events.ts";
import type { RunState } from "../../domain/turn/turn.ts";
import { retentionMs } from "../../config.ts";
import type { Env } from "../env.ts";
import { sendEvents } from "../outbox/drain.ts";
import { backoffMs, OUTBOX_RETRY_MS, readEvent } from "../outbox/outbox.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { runSummary } from "./index-entry.ts";
import type { RunRows } from "./rows.ts";
import { rollbackDueAtMs } from "./rollback.ts";

/** One of the run's two events; `seq`: the log position its id derives from (the turn's; budget: 0, once per run). */
export type RunEventInput = { seq: number; operationId: string | null; tool: string | null } & (
  | { type: "turn.settled"; data: Omit<TurnSettledData, "run"> }
  | { type: "run.budget_exhausted"; data: Omit<BudgetExhaustedData, "run"> }
);

/** `event`: the event itself, when this instance wrote the row (not parsed back from `payload`). */
type UnsentRow = { id: string; payload: string; attempts: number; event?: ToolgateEvent };

export class RunEvents {
  private sending: Promise<void> = Promise.resolve();
  /** Events this instance wrote (a send that took every row written so far leaves nothing due). */
  private writes = 0;
  /**
   * The unsent rows, when this instance knows them all (null: read the table): a send that took
   * every row leaves none, and each new event is added as it is written, so the send after a
   * commit does not read back what the transaction just wrote. A rollback forgets them.
   */
  private unsent: UnsentRow[] | null = null;

  constructor(
    private readonly env: Env,
    private readonly store: SqlStore,
    private readonly rows: RunRows,
    private readonly ctx: DurableObjectState,
  ) {
    store.onRollback(() => (this.unsent = null));
  }

  /** Inside the caller's transaction: true when the event is new (not written before). */
  write(run: RunState, input: RunEventInput, nowMs: number): boolean {
    const envelope = {
      id: eventId(run.runId, input.seq, input.type),
      at_ms: nowMs,
      tenant_id: run.tenantId,
      run_id: run.runId,
      operation_id: input.operationId,
      tool: input.tool,
    };
    // The run's summary rides along (the tenant index reads it, issue 20): no row of its own.
    const summary = runSummary(run, this.rows);
    const event: ToolgateEvent =
      input.type === "turn.settled"
        ? makeEvent(input.type, { ...envelope, data: { ...input.data, run: summary } })
        : makeEvent(input.type, { ...envelope, data: { ...input.data, run: summary } });
    this.store.ensureTable("run_events");
    this.writes += 1;
    const payload = JSON.stringify(event);
    const fresh =
      this.store.run(
        "INSERT INTO run_events (id, payload, sent, attempts, next_at_ms) VALUES (?, ?, 0, 0, ?) ON CONFLICT (id) DO NOTHING",
        event.id,
        payload,
        nowMs + OUTBOX_RETRY_MS,
      ) > 0;
    if (fresh) this.unsent?.push({ id: event.id, payload, attempts: 0, event });
    return fresh;
  }

  /** Whether this event was already written (a settled turn polled again costs no write). */
  written(run: RunState, type: RunEventInput["type"], seq: number): boolean {
    return (
      this.store.exists("run_events") &&
      this.store.one(
        "SELECT 1 AS x FROM run_events WHERE id = ?",
        eventId(run.runId, seq, type),
      ) !== null
    );
  }

  /**
   * After the commit of a new event: the alarm is armed for its resend first (a crash before the
   * send then delays it, never loses it), then the send runs in the background.
   */
  afterCommit(nowMs: number): void {
    void this.ctx.storage.setAlarm(nowMs + OUTBOX_RETRY_MS);
    this.ctx.waitUntil(this.send());
  }

  /** Sends the unsent rows in order, one batch at a time; never throws. */
  send(): Promise<void> {
    this.sending = this.sending.then(() => this.sendNow());
    return this.sending;
  }

  private async sendNow(): Promise<void> {
    if (!this.store.exists("run_events")) return;
    const writesBefore = this.writes;
    const rows: UnsentRow[] = [
      ...(this.unsent ??
        this.store.all<{ id: string; payload: string; attempts: number }>(
          "SELECT id, payload, attempts FROM run_events WHERE sent = 0",
        )),
    ];
    this.unsent = rows.slice();
    if (rows.length === 0) return;
    // Each batch marked sent once the queue took it: a run that settled more than 100 turns while
    // the queue was down still gets them all out.
    const sent = new Set<string>();
    const taken = await sendEvents(
      this.env,
      rows,
      (row) => row.event ?? readEvent(row.payload),
      (batch) => {
        for (const row of batch) {
          this.store.run("UPDATE run_events SET sent = 1 WHERE id = ?", row.id);
          sent.add(row.id);
        }
      },
      {},
      (row) => row.payload,
    );
    if (taken) {
      // Left: whatever was written while the batch was on its way.
      this.unsent = this.unsent?.filter((row) => !sent.has(row.id)) ?? null;
      // Nothing left to resend: the alarm is retention's again (retention.ts re-checks when it fires).
      // Nothing written since the rows were read: they were all there was (no read to ask).
      const run = this.rows.load();
      // …or a running rollback's next look (undo, rollback.ts), if sooner.
      if (run && (this.writes === writesBefore || this.dueAtMs() === null))
        await this.ctx.storage.setAlarm(
          Math.min(
            run.expiresAtMs + retentionMs(this.env),
            rollbackDueAtMs(this.store) ?? Infinity,
          ),
        );
      return;
    }
    this.unsent = null; // their attempts and due times change: the table says
    const left = rows.filter((row) => !sent.has(row.id));
    const attempts = Math.max(...left.map((row) => row.attempts)) + 1;
    const delayMs = backoffMs(attempts);
    for (const row of left)
      this.store.run(
        "UPDATE run_events SET attempts = ?, next_at_ms = ? WHERE id = ?",
        attempts,
        Date.now() + delayMs,
        row.id,
      );
    const armed = await this.ctx.storage.getAlarm();
    if (armed === null || armed > Date.now() + delayMs)
      await this.ctx.storage.setAlarm(Date.now() + delayMs);
  }

  /** For the alarm: the earliest resend still due (null: none). */
  dueAtMs(): number | null {
    if (!this.store.exists("run_events")) return null;
    return (
      this.store.one<{ at: number | null }>(
        "SELECT MIN(next_at_ms) AS at FROM run_events WHERE sent = 0",
      )?.at ?? null
    );
  }
}
