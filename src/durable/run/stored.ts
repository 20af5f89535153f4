// What the run stores, counted (domain/run-limits.ts) on the usage row, and the `turn_ops` index
// (operation → the first turn naming it). Both are derived from the turns and built lazily for a
// run created before them, inside the caller's transaction.
import { NO_STORED, type StoredCounts } from "../../domain/run-limits.ts";
import type { TurnRecord } from "../../domain/turn/turn.ts";
import { decodeStoredCounts, USAGE_STORAGE_COLUMNS } from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { indexTurn, usageRow } from "./rows.ts";

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
