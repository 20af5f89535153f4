// What outlives or precedes the log. A settled operation is pruned by its own alarm after the
// retention period, leaving a tombstone (op_pruned): the same operation id then answers `pruned`,
// never a second execution. A cancel that overtakes its submit leaves an early-cancel row bound to
// the cancelling run, which that run's submit obeys (recorded cancelled, nothing sent).
import type { OperationState } from "../../domain/operation/index.ts";
import { retentionMs } from "../../config.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { FrozenRow, OperationError, Shell } from "./contracts.ts";
import { everLeased, releaseLock } from "./lease-client.ts";
import { proposedHash, toolName } from "./log.ts";
import { outboxPending } from "./notices.ts";
import { dropFromIndex } from "../index/drop.ts";

/**
 * A cancel by `runId` that overtook its operation's dispatch (the run closes a call whose submit is
 * still in flight): the operation, when that run's submit arrives, is recorded cancelled without
 * sending anything. Another run's submit does not obey it. To the cancelling run it is not found.
 */
export function cancelEarly(
  store: SqlStore,
  tenantId: string,
  runId: string,
  by: string,
  nowMs: number,
): OperationError {
  store.ensureTable("op_early_cancel");
  store.run(
    "INSERT OR IGNORE INTO op_early_cancel (run_id, tenant_id, by, at_ms) VALUES (?, ?, ?, ?)",
    runId,
    tenantId,
    by,
    nowMs,
  );
  return { code: "not_found" };
}

/**
 * Who cancelled this operation before it existed, if that was the submitting run. A tombstone
 * from before tombstones named their run (`op_tombstone`) is obeyed by any run of the tenant.
 */
export function cancelledEarly(store: SqlStore, tenantId: string, runId: string): string | null {
  const early = store.exists("op_early_cancel")
    ? store.one<{ by: string }>(
        "SELECT by FROM op_early_cancel WHERE run_id = ? AND tenant_id = ?",
        runId,
        tenantId,
      )
    : null;
  if (early) return early.by;
  const legacy = store.exists("op_tombstone")
    ? store.one<{ tenant_id: string; by: string }>(
        "SELECT tenant_id, by FROM op_tombstone WHERE k = 1",
      )
    : null;
  return legacy?.tenant_id === tenantId ? legacy.by : null;
}

/**
 * A recorded operation's alarm: prune once the retention period has passed, unless it still
 * holds its resource lock (the release is retried first). Unsettled operations never get here.
 */
export async function retire(
  shell: Shell,
  frozen: FrozenRow,
  state: Extract<OperationState, { phase: "recorded" }>,
): Promise<void> {
  const store = shell.log.store;
  const dueAtMs = state.recordedAtMs + retentionMs(shell.env);
  const nowMs = Date.now();
  // Not before the tenant has every outbox row: then the alarm is the next redelivery's.
  if (outboxPending(shell.log)) return shell.alarms.armAt(null);
  if (nowMs < dueAtMs) return shell.alarms.armAt(dueAtMs);
  // Ever granted a lease: release it (again) before the log goes; until the lock confirms, keep it.
  if (everLeased(store, frozen) && !(await releaseLock(shell.env, frozen)))
    return shell.alarms.armAt(nowMs + 3_600_000);
  // The tenant index drops its row (issue 20): told first, so a pruned operation is never listed
  // for long; if the queue does not take it, pruning waits a minute for the next try.
  if (!(await dropFromIndex(shell.env, frozen.tenant_id, { operations: [frozen.id], runs: [] })))
    return shell.alarms.armAt(nowMs + 60_000);
  const outcome = state.outcome;
  // Its signed receipts outlive the log (issue 37): the tombstone keeps them.
  const receipts = store.hasColumn("op_log", "receipts")
    ? (store.one<{ receipts: string | null }>("SELECT receipts FROM op_log WHERE seq = 1")
        ?.receipts ?? null)
    : null;
  store.transaction(() => {
    for (const table of [
      "op_log",
      "op_lease",
      "op_tombstone",
      "op_early_cancel",
      "op_compensated_by",
    ])
      if (store.exists(table)) store.run(`DELETE FROM ${table}`);
    store.ensureTable("op_pruned");
    store.run(
      "INSERT OR REPLACE INTO op_pruned (k, id, tenant_id, input_hash, status, recorded_at_ms, pruned_at_ms, receipts) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
      frozen.id,
      frozen.tenant_id,
      proposedHash(frozen),
      outcome.status,
      state.recordedAtMs,
      nowMs,
      receipts,
    );
  });
  shell.log.forget();
  console.log(
    JSON.stringify({
      level: "info",
      event: "toolgate.pruned",
      at: nowMs,
      run_id: frozen.run_id,
      call_id: frozen.call_id,
      operation_id: frozen.id,
      tool: toolName(frozen),
      status: outcome.status,
    }),
  );
}
