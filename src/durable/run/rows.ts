// The run's rows read through their codecs (store/run-rows.ts): the run, its usage, turn groups and turns,
// and why a tenant finds no run here (never created, or pruned: 410); and `writeTurn`, an admitted
// turn's rows with their memo mirror; the storage counts and the `turn_ops` index (below). Every
// write runs inside the caller's one transaction.
import { jurisdictionOf } from "../../domain/jurisdiction.ts";
import { redactContext } from "../../domain/redact.ts";
import { err, type Result } from "../../domain/result.ts";
import { NO_STORED, type StoredCounts } from "../../domain/run-limits.ts";
import type { TurnGroup, TurnPlan } from "../../domain/turn/admit.ts";
import { operationIds, type RunState, type TurnRecord } from "../../domain/turn/turn.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import {
  decodeRun,
  decodeStoredCounts,
  decodeTurn,
  decodeTurnGroup,
  decodeUsage,
  decodeUsageSnapshot,
  TURN_COLUMNS,
  TURN_USAGE_COLUMN,
  USAGE_STORAGE_COLUMNS,
  USAGE_VERSION_COLUMN,
} from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { notFound, type RunError, type RunView } from "./contracts.ts";

/**
 * The usage as it stands (every column of the usage row): the row, or the newest turn's snapshot
 * when its version is higher (store/run-rows.ts TURN_USAGE_COLUMN). Read once, then kept: each
 * writer remembers what it wrote (a cold read scans the run's turns for the newest snapshot).
 */
export function usageRow(store: SqlStore): Record<string, SqlStorageValue> | null {
  return store.memo("usage", "usage", () => {
    const row = store.one("SELECT * FROM usage");
    if (!row || !store.exists("turns") || !store.hasColumn("turns", "usage")) return row;
    const newer = store.one<{ usage: string }>(
      `SELECT usage FROM turns WHERE json_extract(usage, '$.version') > ?
       ORDER BY json_extract(usage, '$.version') DESC LIMIT 1`,
      Number(row.version ?? 0),
    );
    return newer ? { ...row, ...decodeUsageSnapshot(newer.usage) } : row;
  });
}

/** Writes the whole usage row as `next` (every column it read, `version` one higher), in the caller's transaction. */
function writeUsage(store: SqlStore, next: Record<string, SqlStorageValue>): void {
  const { k: _, ...columns } = next;
  store.run(
    `UPDATE usage SET ${Object.keys(columns)
      .map((column) => `${column} = ?`)
      .join(", ")}`,
    ...Object.values(columns),
  );
  store.remember("usage", "usage", next);
}

/** `turn_ops` rows for the turn's operations (the first turn naming an operation keeps it). */
export function indexTurn(store: SqlStore, turn: TurnRecord): void {
  for (const id of new Set(operationIds(turn)))
    store.run("INSERT OR IGNORE INTO turn_ops (operation_id, turn_id) VALUES (?, ?)", id, turn.id);
}

export class RunRows {
  constructor(
    private readonly store: SqlStore,
    private readonly sourceOf: (hash: string) => ToolSource | null,
  ) {}

  load(): RunState | null {
    if (!this.store.exists("run")) return null;
    return this.store.memo("run", "run", () => {
      const row = this.store.one<{ data: string }>("SELECT data FROM run");
      return row ? decodeRun(row.data) : null;
    });
  }

  /** Why this tenant finds no run here: retention removed it (410), or there never was one. */
  missing(tenantId: string): Result<never, RunError> {
    const pruned = this.store.exists("run_pruned")
      ? this.store.one<{ run_id: string; tenant_id: string; pruned_at_ms: number }>(
          "SELECT run_id, tenant_id, pruned_at_ms FROM run_pruned WHERE k = 1",
        )
      : null;
    return pruned && pruned.tenant_id === tenantId
      ? err({ code: "run_pruned", run_id: pruned.run_id, pruned_at_ms: pruned.pruned_at_ms })
      : notFound("run");
  }

  loadFor(tenantId: string): RunState | null {
    const run = this.load();
    return run && run.tenantId === tenantId ? run : null;
  }

  /** Kept as one row, updated in the same transaction as each turn (O(1), not a scan). */
  usage() {
    return decodeUsage(usageRow(this.store));
  }

  group(key: string): TurnGroup | null {
    const row = this.store.one(
      "SELECT key, turn_stop, usage_hash, calls FROM turn_groups WHERE key = ?",
      key,
    );
    return row ? decodeTurnGroup(row) : null;
  }

  turn(turnId: string): TurnRecord | null {
    // Any write to `turns` drops the memo (SqlStore.run): only the row as last written is kept.
    const row = this.store.memo("turns", `turn:${turnId}`, () =>
      this.store.one(`SELECT ${TURN_COLUMNS} FROM turns WHERE id = ?`, turnId),
    );
    return row ? decodeTurn(row, this.sourceOf) : null;
  }

  /**
   * An admitted turn's rows, in the caller's transaction: its group row (with a turn key), the
   * turn (`calls`: its calls encoded, `encodeTurnCalls`), its `turn_ops` index (once built), and the
   * usage row with the turn counted (`stored`: the storage counts after it). The turn and usage
   * rows are remembered as written: its settlement reads both next, and never reads them back.
   */
  writeTurn(plan: TurnPlan, calls: string, stored: StoredCounts): void {
    const { record, usage, group } = plan;
    // Before reading the usage: adding a column forgets what the store kept.
    this.store.ensureColumn("usage", USAGE_VERSION_COLUMN);
    this.store.ensureColumn("turns", TURN_USAGE_COLUMN);
    const before = usageRow(this.store)!;
    const counted = {
      turns: usage.turns,
      calls: usage.toolCalls,
      cost: usage.cost,
      stored_turns: stored.turns,
      stored_bytes: stored.bytes,
      stopped_turns: stored.stopped,
      checks: stored.checks,
      version: Number(before.version ?? 0) + 1,
    };
    if (group)
      this.store.run(
        "INSERT OR REPLACE INTO turn_groups (key, turn_stop, usage_hash, calls) VALUES (?, ?, ?, ?)",
        group.key,
        group.turnStop,
        group.usageHash,
        group.calls,
      );
    this.store.run(
      `INSERT INTO turns (${TURN_COLUMNS}, admitted, usage) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)`,
      record.id,
      record.seq,
      record.contentHash,
      calls,
      record.reservedCost,
      record.modelCost,
      record.createdAtMs,
      plan.dispatch.length,
      JSON.stringify(counted),
    );
    this.store.remember("turns", `turn:${record.id}`, {
      id: record.id,
      seq: record.seq,
      content_hash: record.contentHash,
      calls,
      reserved_cost: record.reservedCost,
      settled_cost: null,
      model_cost: record.modelCost,
      created_at: record.createdAtMs,
    });
    if (this.store.exists("turn_ops")) indexTurn(this.store, record);
    // The usage rides in the turn's row (its snapshot outranks the usage row by version): kept as
    // it now stands, every other column unchanged, not read back.
    this.store.remember("usage", "usage", { ...before, ...counted });
  }

  /** A settled turn's refund, in the caller's transaction (the one write of the usage row on a turn's path). */
  refund(amount: number): void {
    this.store.ensureColumn("usage", USAGE_VERSION_COLUMN);
    const current = usageRow(this.store)!;
    writeUsage(this.store, {
      ...current,
      cost: Number(current.cost) - amount,
      version: Number(current.version ?? 0) + 1,
    });
  }

  turns(): TurnRecord[] {
    return this.store
      .all(`SELECT ${TURN_COLUMNS} FROM turns ORDER BY seq`)
      .map((row) => decodeTurn(row, this.sourceOf));
  }

  /** The run as the API shows it: its context redacted by the offered tools' rules. */
  view(run: RunState, offered: ReadonlyMap<string, ToolSpec>): RunView {
    const usage = this.usage();
    return {
      run_id: run.runId,
      status: run.cancelledAtMs === null ? "active" : "cancelled",
      user: run.user,
      tools: Object.keys(run.tools),
      context: redactContext(run.context, [...offered.values()]),
      budgets: run.budgets,
      usage: { turns: usage.turns, tool_calls: usage.toolCalls, cost: usage.cost },
      created_at: new Date(run.createdAtMs).toISOString(),
      expires_at: new Date(run.expiresAtMs).toISOString(),
      mode: run.mode ?? "live",
      // Where its objects live (from its id's tag; null: no jurisdiction) and its own notify endpoint.
      jurisdiction: jurisdictionOf(run.runId),
      notify_webhook_id: run.notifyWebhookId ?? null,
    };
  }
}

// What the run stores, counted (domain/run-limits.ts) on the usage row, and the `turn_ops` index
// (operation → the first turn naming it): both derived from the turns and built lazily for a run
// created before them, inside the caller's transaction.

/** The usage row's storage counts (zero for a run created before them, until its next turn). */
export function storedCounts(store: SqlStore): StoredCounts {
  if (!store.exists("usage") || !store.hasColumn("usage", "checks")) return NO_STORED;
  return decodeStoredCounts(usageRow(store));
}

/**
 * The storage counts, in a turn's transaction: a run created before them gets their columns,
 * its turns counted once. Their bytes are not (those rows held every call's tool source, and
 * counting them would refuse runs the older layout made large); its checks start from zero.
 */
export function migrateStored(store: SqlStore): StoredCounts {
  const [turns, ...others] = USAGE_STORAGE_COLUMNS;
  if (store.ensureColumn("usage", turns!))
    store.run("UPDATE usage SET stored_turns = (SELECT COUNT(*) FROM turns)");
  for (const column of others) store.ensureColumn("usage", column);
  store.ensureTable("tool_sources");
  return storedCounts(store);
}

/**
 * Whether a call of this run's turns names the operation: one read of `turn_ops`, which the
 * first check builds from the stored turns (once; every later turn adds its own operations).
 */
export function holdsOperation(
  store: SqlStore,
  turns: () => TurnRecord[],
  operationId: string,
): boolean {
  if (!store.exists("turn_ops"))
    store.transaction(() => {
      store.ensureTable("turn_ops");
      for (const turn of turns()) indexTurn(store, turn);
    });
  return store.one("SELECT 1 AS x FROM turn_ops WHERE operation_id = ?", operationId) !== null;
}
