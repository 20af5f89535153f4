// Settling a turn: submit or replay each open call (a no-op replay for operations that exist; the
// first dispatch for new ones), settle the reservation once (compare-and-set on `settled_cost`),
// and report delivered outcomes to their operations. Owns the bounded caches of recorded replies
// and of reports already made; both are derived (the operation dedupes deliveries too).
import { retentionMs } from "../../config.ts";
import type { Env } from "../env.ts";
import { LruCache } from "../../lru.ts";
import { reportedOperations, settleTurn, type CallObservation } from "../../domain/turn/settle.ts";
import type { RunState, Submission, TurnCall, TurnRecord } from "../../domain/turn/turn.ts";
import type { Wait } from "../../domain/wait.ts";
import type { OperationReply } from "../operation/contracts.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub } from "../stubs.ts";
import type { TurnReply } from "./contracts.ts";
import type { RunEvents } from "./events.ts";
import type { RunFacts } from "./facts.ts";
import type { RunRows } from "./rows.ts";

/** Recorded outcomes are immutable, so replays are answered from memory: bounded by count and bytes. */
const RECORDED_CACHE = { maxEntries: 256, maxBytes: 4 * 1024 * 1024 };

export class TurnSettler {
  /** `${operation} ${turn} ${format}` already reported (a bounded cache; the operation dedupes too). */
  private readonly reportedHere = new Set<string>();
  /** Operations whose trace keeps no more deliveries (MAX_REPORTED_EVENTS): no report RPC for them. */
  private readonly reportsFull = new Set<string>();
  /** Reports sent and not yet acknowledged: the run's own trace reads wait for them. */
  reporting: Promise<void> = Promise.resolve();
  private readonly recorded = new LruCache<string, OperationReply>(
    RECORDED_CACHE,
    (reply) => JSON.stringify(reply.envelope).length + 200,
  );

  constructor(
    private readonly env: Env,
    private readonly store: SqlStore,
    private readonly rows: RunRows,
    private readonly events: RunEvents,
    private readonly facts: RunFacts,
  ) {}
  /** Turns whose `turn.settled` is written (memory: a settled turn polled again costs no read). */
  private readonly settledHere = new Set<string>();

  /**
   * Submits every open call (a no-op replay for operations that exist; the first dispatch for new
   * ones), then answers from the turn as stored *after* the waits, so a call closed meanwhile says
   * cancelled. The refund is a compare-and-set on `settled_cost`: it applies once, however many
   * settles race (issue 7: three concurrent polls each refunded).
   */
  async settle(
    record: TurnRecord,
    wait: Wait,
    rowsHere: number,
    format: string,
  ): Promise<TurnReply> {
    let rowsWritten = rowsHere;
    const run = this.rows.load()!;
    const observed = await Promise.all(
      record.calls.map(async (stored): Promise<CallObservation | null> => {
        if (!("submit" in stored) || stored.closed) return null;
        const seen = await this.observe(run, stored.call, stored.submit, wait);
        rowsWritten += seen.rowsWritten;
        return seen.observation;
      }),
    );
    const current = this.rows.turn(record.id) ?? record;
    const settlement = settleTurn(current, observed);
    // A settled turn's accounting is final: stored (refund or not) unless settleTurn shows a later
    // poll can only count the same (a poll after pruning must never refund what was spent).
    // turn.settled, once per turn (issue 18): in the settlement's transaction, or on its own where
    // the settlement writes nothing (the common new write).
    const nowMs = Date.now();
    const announce =
      settlement.status === "settled" &&
      !this.settledHere.has(record.id) &&
      !this.events.written(run, "turn.settled", current.seq);
    const settledEvent = {
      type: "turn.settled",
      seq: current.seq,
      operationId: null,
      tool: null,
      data: {
        turn_id: record.id,
        ...(run.notifyWebhookId ? { notify_webhook_id: run.notifyWebhookId } : {}),
        results: settlement.results.map(({ call, envelope }) => ({
          call_id: call.id,
          tool: call.name,
          operation_id: envelope.operation_id,
          status: envelope.status,
          code: envelope.status === "succeeded" ? null : envelope.code,
        })),
      },
    } as const;
    let announced = false;
    if (settlement.finalize) {
      const before = this.store.rowsWritten;
      this.store.transaction(() => {
        if (
          this.store.run(
            "UPDATE turns SET settled_cost = ? WHERE id = ? AND settled_cost IS NULL",
            settlement.spent,
            record.id,
          ) === 1 &&
          settlement.refund !== 0
        ) {
          this.rows.refund(settlement.refund);
        }
        // After the refund: the event's run summary shows the usage as settled.
        if (announce) announced = this.events.write(run, settledEvent, nowMs);
      });
      rowsWritten += this.store.rowsWritten - before;
    } else if (announce) {
      const before = this.store.rowsWritten;
      announced = this.events.write(run, settledEvent, nowMs);
      rowsWritten += this.store.rowsWritten - before;
    }
    if (settlement.status === "settled") {
      if (this.settledHere.size >= 4096) this.settledHere.clear();
      this.settledHere.add(record.id);
    }
    if (announced) this.events.afterCommit(nowMs);
    // Not awaited: the answer does not wait for the trace (a round trip and a commit per operation).
    const report = this.report(run.tenantId, current, observed, format);
    // Resolved to nothing: a chain of resolved values would keep every earlier one alive.
    this.reporting = Promise.all([this.reporting, report]).then(() => undefined);
    return {
      turn_id: record.id,
      status: settlement.status,
      results: settlement.results,
      pruned: current.calls.flatMap((stored, index) => {
        const seen = observed[index];
        return "submit" in stored && seen?.kind === "pruned"
          ? [
              {
                call_id: stored.call.id,
                operation_id: stored.submit.operationId,
                pruned_at: seen.prunedAt,
                settled_as: seen.status,
              },
            ]
          : [];
      }),
      rowsWritten,
    };
  }

  /**
   * Tells each operation whose recorded result this response delivers that it was reported (once
   * per turn and format; remembered here so replays cost no RPC). Sent as the answer leaves, not
   * waited for (it cost a round trip and a commit on every new write's answer: 5.5 → 1 ms from
   * recorded to the response leaving the Worker, c=1). Best effort: a missed report leaves
   * "recorded, not reported" in the trace, which is what it then looks like to the caller.
   */
  private async report(
    tenantId: string,
    turn: TurnRecord,
    observed: ReadonlyArray<CallObservation | null>,
    format: string,
  ): Promise<void> {
    const due = reportedOperations(turn, observed).filter(
      (id) => !this.reportedHere.has(`${id} ${turn.id} ${format}`) && !this.reportsFull.has(id),
    );
    await Promise.all(
      due.map(async (id) => {
        const done = await operationStub(this.env, id)
          .reported(tenantId, turn.id, format)
          .catch(() => null);
        if (done?.ok) {
          if (this.reportedHere.size >= 4096) this.reportedHere.clear();
          this.reportedHere.add(`${id} ${turn.id} ${format}`);
          if (done.value.full) {
            if (this.reportsFull.size >= 4096) this.reportsFull.clear();
            this.reportsFull.add(id);
          }
        }
      }),
    );
  }

  private async observe(
    run: RunState,
    { id: callId, name: tool }: { id: string; name: string },
    submit: Submission,
    wait: Wait,
  ): Promise<{ observation: CallObservation; rowsWritten: number }> {
    const known = this.recordedReply(submit);
    if (known) return { observation: { kind: "reply", ...known }, rowsWritten: 0 };
    const { operationId, idempotencyKey, input, source } = submit;
    try {
      const reply = await operationStub(this.env, operationId).submit({
        tenantId: run.tenantId,
        runId: run.runId,
        callId,
        source,
        input,
        operationId,
        idempotencyKey,
        userId: run.user.id,
        waitMs: wait.ms,
        holdForPeople: wait.holdForPeople,
        ...(submit.claims ? { limitClaims: submit.claims } : {}),
        ...(run.mode === "shadow" ? { shadow: true as const } : {}),
        principal: { user: run.user, context: run.context },
        deadlineAtMs:
          run.budgets.max_duration_ms === undefined
            ? null
            : run.createdAtMs + run.budgets.max_duration_ms,
        // Sealed secrets and verdict from the run's snapshot: the operation's start asks no tenant.
        facts: this.facts.forCall(run, tool, Date.now()),
      });
      if (!reply.ok)
        return {
          observation:
            reply.error.code === "pruned"
              ? {
                  kind: "pruned",
                  prunedAt: new Date(reply.error.pruned_at_ms).toISOString(),
                  status: reply.error.status,
                }
              : { kind: reply.error.code === "invalid_tool" ? "invalid_tool" : "unavailable" },
          rowsWritten: 0,
        };
      if (reply.value.terminal) this.recorded.set(operationId, reply.value);
      // The upstream refused the credentials: the next calls must not use the snapshot's copy of
      // them before it is read again (RunFacts.invalidate; once per operation: then it is cached).
      const { envelope } = reply.value;
      if (envelope.status !== "succeeded" && envelope.code === "upstream_forbidden")
        this.facts.invalidate(run);
      return {
        observation: { kind: "reply", ...reply.value },
        rowsWritten: reply.value.rowsWritten,
      };
    } catch (error) {
      console.error("operation unreachable", operationId, error);
      return { observation: { kind: "unavailable" }, rowsWritten: 0 };
    }
  }

  /** The remembered recorded outcome of this very submission, while retention still keeps it. */
  private recordedReply(submit: Submission): OperationReply | null {
    const known = this.recorded.get(submit.operationId);
    // A remembered outcome is good until retention prunes the operation (then it must say so).
    const fresh =
      known?.recordedAtMs != null && Date.now() < known.recordedAtMs + retentionMs(this.env);
    return known && fresh && known.inputHash === submit.input.hash ? known : null;
  }

  /** Operations of `calls` known recorded with the same input: their calls reserve no cost (planTurn). */
  knownRecorded(calls: readonly TurnCall[]): Set<string> {
    return new Set(
      calls.flatMap((stored) =>
        "submit" in stored && this.recordedReply(stored.submit) ? [stored.submit.operationId] : [],
      ),
    );
  }

  /** Whether this operation's recorded outcome is remembered here (a cancel need not ask it). */
  isRecorded(operationId: string): boolean {
    return this.recorded.get(operationId) !== undefined;
  }

  clear(): void {
    this.recorded.clear();
    this.reportedHere.clear();
    this.reportsFull.clear();
    this.settledHere.clear();
  }
}
