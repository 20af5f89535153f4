// The tenant's approvals inbox and unknown-outcomes list, fed by the operations' outboxes (at least
// once, possibly out of order: `seq` orders one operation's deliveries), and their retention: closed
// rows go after the retention period, driven by the tenant's alarm. The operation's own log stays
// authoritative; these are the lists a person works from.
import { retentionMs } from "../../config.ts";
import type { Env } from "../env.ts";
import type { OperationView } from "../operation/contracts.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { decodeApproval, tenantRecord, UNKNOWNS_ADDED_COLUMNS } from "../store/tenant-rows.ts";
import { operationStub } from "../stubs.ts";

import type { ApprovalItem, UnknownItem } from "../../domain/journal/announce.ts";
/** The inbox's rows are what an operation's step announces (domain/journal/announce.ts). */
export type { ApprovalItem, UnknownItem };
export type ApprovalPage = {
  items: Array<
    Omit<ApprovalItem, "requested_at_ms" | "expires_at_ms" | "decided_at_ms" | "approval_hash"> & {
      approval_hash: string;
      requested_at: string;
      expires_at: string;
      decided_at: string | null;
    }
  >;
  next_cursor: string | null;
};

/** When a request left the inbox: decided, else (expired or cancelled) no later than its expiry. */
const closedAtMs = (item: Pick<ApprovalItem, "decided_at_ms" | "expires_at_ms">): number =>
  item.decided_at_ms ?? item.expires_at_ms;

/** An RPC's answer, or that there was none (the callee threw or could not be reached). */
async function ask<T>(
  question: () => Promise<T>,
): Promise<{ answered: true; value: T } | { answered: false }> {
  try {
    return { answered: true, value: await question() };
  } catch {
    return { answered: false };
  }
}

/** Owned by the TenantObject: its store, storage (for the alarm) and env. */
export class Inbox {
  constructor(
    private readonly store: SqlStore,
    private readonly storage: DurableObjectStorage,
    private readonly env: Env,
  ) {}

  /**
   * Delivered by operations from their outbox (at least once, possibly out of order): one row per
   * approval request, rewritten as it is decided. `seq` orders one operation's deliveries: an older
   * one than the row holds changes nothing.
   */
  async upsertApproval(item: ApprovalItem, seq: number): Promise<void> {
    this.store.ensureSchema();
    const held = this.store.one<{ data: string }>(
      "SELECT data FROM approvals WHERE operation_id = ?",
      item.operation_id,
    );
    if (held && seq < (decodeApproval(held.data).seq ?? -1)) return;
    this.store.run(
      "INSERT OR REPLACE INTO approvals (operation_id, state, requested_at, data) VALUES (?, ?, ?, ?)",
      item.operation_id,
      item.state,
      item.requested_at_ms,
      JSON.stringify({ ...item, seq }),
    );
    // A closed request leaves the inbox with retention, like its operation (pending ones never do).
    if (item.state !== "pending" && (await this.storage.getAlarm()) === null)
      await this.storage.setAlarm(closedAtMs(item) + retentionMs(this.env));
  }

  /**
   * Retention for the inbox and for the closed rows of the unknown-outcomes list: closed ones older
   * than the period go; the alarm follows the next one.
   */
  async prune(): Promise<void> {
    if (!this.store.exists("approvals")) return;
    const nowMs = Date.now();
    const keepMs = retentionMs(this.env);
    const closed = this.store
      .all<{ operation_id: string; data: string }>(
        "SELECT operation_id, data FROM approvals WHERE state != 'pending'",
      )
      .map((row) => ({
        id: row.operation_id,
        dueAtMs: closedAtMs(decodeApproval(row.data)) + keepMs,
      }));
    for (const row of closed)
      if (row.dueAtMs <= nowMs)
        this.store.run("DELETE FROM approvals WHERE operation_id = ?", row.id);
    this.unknownsTable();
    this.store.run("DELETE FROM unknowns WHERE open = 0 AND closed_at <= ?", nowMs - keepMs);
    const unknownDue = this.store.one<{ at: number | null }>(
      "SELECT MIN(closed_at) AS at FROM unknowns WHERE open = 0",
    )?.at;
    const next = Math.min(
      ...closed.filter((row) => row.dueAtMs > nowMs).map((row) => row.dueAtMs),
      ...(unknownDue == null ? [] : [unknownDue + keepMs]),
    );
    if (Number.isFinite(next)) await this.storage.setAlarm(next);
  }

  /** Newest first; `pending` = still waiting for a person, `decided` = everything else. Cursor = the last item's (time, id). */
  async listApprovals(
    state: "pending" | "decided",
    cursor: string | null,
    limit: number,
  ): Promise<ApprovalPage> {
    if (!this.store.exists("approvals")) return { items: [], next_cursor: null };
    const [beforeMs, beforeId] = cursor
      ? [Number(cursor.split(":")[0]), cursor.split(":")[1] ?? ""]
      : [Number.MAX_SAFE_INTEGER, ""];
    const rows = this.store.all<{ data: string; requested_at: number; operation_id: string }>(
      `SELECT data, requested_at, operation_id FROM approvals WHERE ${state === "pending" ? "state = 'pending'" : "state != 'pending'"}
       AND (requested_at < ? OR (requested_at = ? AND operation_id < ?)) ORDER BY requested_at DESC, operation_id DESC LIMIT ?`,
      beforeMs,
      beforeMs,
      cursor ? beforeId : "\uffff",
      limit + 1,
    );
    const items = rows.slice(0, limit).map((row) => {
      const { requested_at_ms, expires_at_ms, decided_at_ms, ...stored } = decodeApproval(row.data);
      const { seq: _seq, ...rest } = stored;
      const iso = (ms: number) => new Date(ms).toISOString();
      return {
        ...rest,
        // Rows stored before approval hashes bind as the arguments do: a payment's is then refused.
        approval_hash: rest.approval_hash ?? rest.input_hash,
        // Rows written before the inbox capped previews had no flag: they were never cut.
        preview: rest.preview
          ? { ...rest.preview, truncated: rest.preview.truncated ?? false }
          : null,
        requested_at: iso(requested_at_ms),
        expires_at: iso(expires_at_ms),
        decided_at: decided_at_ms === null ? null : iso(decided_at_ms),
      };
    });
    const last = rows[limit - 1];
    return {
      items,
      next_cursor: rows.length > limit && last ? `${last.requested_at}:${last.operation_id}` : null,
    };
  }

  /**
   * Delivered by operations from their outbox (at least once, possibly out of order): an operation
   * started or stopped waiting for a person's verdict on an unknown outcome. A closed row stays as a
   * tombstone (until retention), so an older delivery (`seq`) can never reopen it.
   */
  async markUnknown(item: UnknownItem, open: boolean, seq: number): Promise<void> {
    this.unknownsTable();
    const held = this.store.one<{ seq: number }>(
      "SELECT seq FROM unknowns WHERE operation_id = ?",
      item.operation_id,
    );
    if (held && seq < held.seq) return;
    const nowMs = Date.now();
    this.store.run(
      "INSERT OR REPLACE INTO unknowns (operation_id, run_id, tool, since, seq, open, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      item.operation_id,
      item.run_id,
      item.tool,
      item.since_ms,
      seq,
      open ? 1 : 0,
      open ? null : nowMs,
    );
    if (!open && (await this.storage.getAlarm()) === null)
      await this.storage.setAlarm(nowMs + retentionMs(this.env));
  }

  /**
   * Operations whose outcome only a person can settle, or that settle late by themselves (issue 24:
   * `settling`, from the operation), oldest first (the details live with each operation). Each
   * candidate is checked with its operation before it counts toward `limit`: a row whose operation
   * has moved on (a close not delivered yet, or lost before the outbox existed) is closed here and
   * skipped, so stale rows can never fill the page and hide one that really waits.
   * An operation that cannot be asked is listed (it may still wait).
   */
  async listUnknowns(limit: number): Promise<
    Array<{
      operation_id: string;
      run_id: string;
      tool: string;
      since: string;
      /** Settling by itself (issue 24): no person is needed yet, though one may decide. */
      settling: OperationView["settling"];
    }>
  > {
    const tenantId = tenantRecord(this.store)?.id;
    if (!tenantId || !this.store.exists("unknowns")) return [];
    this.unknownsTable();
    type Row = { operation_id: string; run_id: string; tool: string; since: number; seq: number };
    const listed: Array<Row & { settling: OperationView["settling"] }> = [];
    let after: Row | null = null;
    while (listed.length < limit) {
      const batch: Row[] = this.store.all<Row>(
        `SELECT operation_id, run_id, tool, since, seq FROM unknowns WHERE open = 1
         AND (since > ? OR (since = ? AND operation_id > ?)) ORDER BY since, operation_id LIMIT ?`,
        after?.since ?? -1,
        after?.since ?? -1,
        after?.operation_id ?? "",
        limit - listed.length,
      );
      if (batch.length === 0) break;
      const waits = await Promise.all(
        batch.map(async (row) => {
          const view = await ask(() => operationStub(this.env, row.operation_id).get(tenantId, 0));
          if (!view.answered) return { settling: null };
          // Settling by itself (issue 24) counts too, through its late tries.
          if (!view.value.ok) return null;
          const { phase, settling } = view.value.value;
          return phase === "outcome_unknown" || settling !== null ? { settling } : null;
        }),
      );
      batch.forEach((row, index) => {
        const waiting = waits[index];
        if (waiting) listed.push({ ...row, settling: waiting.settling });
        // Only if no delivery changed the row meanwhile (the questions above were awaited).
        else
          this.store.run(
            "UPDATE unknowns SET open = 0, closed_at = ? WHERE operation_id = ? AND seq = ? AND open = 1",
            Date.now(),
            row.operation_id,
            row.seq,
          );
      });
      after = batch.at(-1)!;
    }
    return listed.map(({ seq: _seq, since, ...row }) => ({
      ...row,
      since: new Date(since).toISOString(),
    }));
  }

  /** The unknowns table, with the columns added after its first version. */
  private unknownsTable(): void {
    this.store.ensureSchema();
    for (const column of UNKNOWNS_ADDED_COLUMNS) this.store.ensureColumn("unknowns", column);
  }
}
