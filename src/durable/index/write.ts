// The index's tables and its writes (issue 20). One IndexObject per tenant: its volume is its own
// SQLite, so one tenant's load never slows another's queries. Rows: one per run (`idx_runs`), one
// per operation (`idx_ops`), its subjects (`idx_subjects`), the runs ever seen (`idx_known`: a
// rebuild walks them, with the tenant's own list), the ids retention pruned (`idx_dropped`, so an
// event delivered after its operation was pruned does not bring the row back; themselves pruned
// once no such event can arrive, TOMBSTONE_KEEP), and a rebuild's progress (`idx_rebuild`,
// `rb_todo`: rebuild.ts).
import type { IndexOp, IndexRun } from "../../domain/index-feed.ts";
import { replaces } from "../../domain/index-feed.ts";
import type { SqlStore } from "../store/sql-store.ts";

/**
 * The statuses a person looks for (the queues, what is still under way): the only ones the status
 * index holds, so a settled operation (most rows) writes no entry there. A query for one of them
 * names this term (openStatusTerm), the condition SQLite needs to use a partial index; any other
 * status is found through the creation-order index. Indexes made before keep every status.
 */
const OPEN_STATUSES = ["awaiting_approval", "outcome_unknown", "pending"] as const;
const OPEN_STATUS_TERM = `status IN (${OPEN_STATUSES.map((status) => `'${status}'`).join(", ")})`;

/** The partial index's own condition for a query on `status` (column prefixed `alias.`), or null. */
export function openStatusTerm(status: string, alias = ""): string | null {
  return (OPEN_STATUSES as readonly string[]).includes(status)
    ? `${alias}${OPEN_STATUS_TERM}`
    : null;
}

export const INDEX_SCHEMA = `
CREATE TABLE IF NOT EXISTS idx_runs (run_id TEXT PRIMARY KEY, user_id TEXT, created_at_ms INTEGER NOT NULL, expires_at_ms INTEGER,
  cancelled_at_ms INTEGER, turns INTEGER, tool_calls INTEGER, cost REAL, updated_at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_runs_created ON idx_runs (created_at_ms, run_id);
CREATE INDEX IF NOT EXISTS idx_runs_user ON idx_runs (user_id);
CREATE TABLE IF NOT EXISTS idx_ops (operation_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL,
  code TEXT, attempts INTEGER, latency_ms INTEGER, created_at_ms INTEGER NOT NULL, settled_at_ms INTEGER,
  updated_at_ms INTEGER NOT NULL, rank INTEGER NOT NULL, shadow INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_ops_created ON idx_ops (created_at_ms, operation_id);
CREATE INDEX IF NOT EXISTS idx_ops_run ON idx_ops (run_id);
CREATE INDEX IF NOT EXISTS idx_ops_status ON idx_ops (status) WHERE ${OPEN_STATUS_TERM};
CREATE INDEX IF NOT EXISTS idx_ops_code ON idx_ops (code) WHERE code IS NOT NULL;
CREATE TABLE IF NOT EXISTS idx_subjects (value TEXT NOT NULL, key TEXT NOT NULL, operation_id TEXT NOT NULL,
  PRIMARY KEY (value, key, operation_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_subjects_op ON idx_subjects (operation_id);
CREATE TABLE IF NOT EXISTS idx_known (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idx_dropped (id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_dropped_at ON idx_dropped (at_ms);
CREATE TABLE IF NOT EXISTS idx_rebuild (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, started_at_ms INTEGER NOT NULL,
  listing INTEGER NOT NULL, listed_after TEXT, list_tries INTEGER NOT NULL DEFAULT 0, runs INTEGER NOT NULL, operations INTEGER NOT NULL,
  missing INTEGER NOT NULL, failed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rb_todo (run_id TEXT PRIMARY KEY, tries INTEGER NOT NULL, next_at_ms INTEGER NOT NULL,
  listed_at_ms INTEGER) WITHOUT ROWID;`;

/**
 * How long a pruned id's tombstone outlives its prune: the retention period plus 2 days. An event
 * is at most as old as its object's prune; the dead-letter consumer drops events older than the
 * retention period (parking at most 12 h between tries), and the main queue hands a message to the
 * dead letters after its 10 tries. `ingest` ignores any event older than this (one that still came
 * could name a row whose tombstone is gone), so the table stays bounded by what retention keeps.
 */
/** Columns added after the first index schema (an older index gets them on its next write or read). */
export const INDEX_ADDED_COLUMNS: ReadonlyArray<[string, string]> = [
  ["idx_ops", "shadow INTEGER NOT NULL DEFAULT 0"],
];

export function ensureIndexColumns(store: SqlStore): void {
  for (const [table, column] of INDEX_ADDED_COLUMNS) store.ensureColumn(table, column);
}

export const tombstoneKeepMs = (retentionMs: number) => retentionMs + 2 * 24 * 60 * 60_000;

const dropped = (store: SqlStore, id: string) =>
  store.one("SELECT 1 AS x FROM idx_dropped WHERE id = ?", id) !== null;

/** A run's row: created when first named, its fields replaced by a newer summary. */
export function upsertRun(store: SqlStore, tenantId: string, run: IndexRun): void {
  if (dropped(store, run.run_id)) return;
  store.run(
    "INSERT OR IGNORE INTO idx_known (run_id, tenant_id) VALUES (?, ?)",
    run.run_id,
    tenantId,
  );
  const held = store.one<{ updated_at_ms: number; created_at_ms: number; user_id: string | null }>(
    "SELECT updated_at_ms, created_at_ms, user_id FROM idx_runs WHERE run_id = ?",
    run.run_id,
  );
  if (held && (run.usage === null || held.updated_at_ms > run.updated_at_ms)) {
    // Named again without a summary: an earlier sighting moves its provisional creation time, and
    // a user is filled in where none was known — only when that changes something (an UPDATE
    // naming the indexed columns rewrites their entries, 3 rows, and every event names the run).
    const earlier = run.created_at_ms < held.created_at_ms;
    const user = held.user_id === null && run.user_id !== null;
    if (held.updated_at_ms === 0 && (earlier || user))
      store.run(
        "UPDATE idx_runs SET created_at_ms = MIN(created_at_ms, ?), user_id = COALESCE(user_id, ?) WHERE run_id = ?",
        run.created_at_ms,
        run.user_id,
        run.run_id,
      );
    return;
  }
  // expires_at_ms, cancelled_at_ms, turns, tool_calls, cost, updated_at_ms: what a summary updates.
  const counters = [
    run.expires_at_ms,
    run.cancelled_at_ms,
    run.usage?.turns ?? null,
    run.usage?.tool_calls ?? null,
    run.usage?.cost ?? null,
    run.updated_at_ms,
  ];
  // The usual case, a newer summary of a known run: an UPDATE that does not name the indexed
  // columns leaves their index entries alone (a REPLACE rewrote the row and both: 3 rows).
  if (held && held.created_at_ms === run.created_at_ms && held.user_id === run.user_id)
    store.run(
      `UPDATE idx_runs SET expires_at_ms = ?, cancelled_at_ms = ?, turns = ?, tool_calls = ?, cost = ?, updated_at_ms = ?
       WHERE run_id = ?`,
      ...counters,
      run.run_id,
    );
  else
    store.run(
      `INSERT OR REPLACE INTO idx_runs (run_id, user_id, created_at_ms, expires_at_ms, cancelled_at_ms, turns, tool_calls, cost, updated_at_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      run.run_id,
      run.user_id,
      run.created_at_ms,
      ...counters,
    );
}

/**
 * An operation's row (and its subjects), unless the stored one is settled or newer. `steps`: one
 * operation's patches in the order they arrived (a queue batch often holds several: requested,
 * decided, recorded), folded in memory exactly as one write each would apply them, then written
 * once: the steps between cost no row (each UPDATE moving the status entry was 1–2 rows).
 */
export function upsertOp(store: SqlStore, ...steps: IndexOp[]): void {
  const first = steps[0];
  if (!first || dropped(store, first.operation_id)) return;
  const held = store.one<{
    rank: number;
    updated_at_ms: number;
    attempts: number | null;
    run_id: string;
    created_at_ms: number;
  }>(
    "SELECT rank, updated_at_ms, attempts, run_id, created_at_ms FROM idx_ops WHERE operation_id = ?",
    first.operation_id,
  );
  let row: { rank: number; updated_at_ms: number; attempts: number | null } | null = held;
  let op: IndexOp | null = null;
  // The subjects the last step that wrote them wrote (null: none did): a new row's, or a step's own.
  let subjects: IndexOp["subjects"] | null = null;
  for (const step of steps) {
    if (!replaces(row, step)) continue;
    if (!row || step.subjects.length > 0) subjects = step.subjects;
    op = { ...step, attempts: step.attempts ?? row?.attempts ?? null };
    row = op;
  }
  if (!op) return;
  if (held && held.run_id === op.run_id && held.created_at_ms === op.created_at_ms)
    // A later step of a known operation: an UPDATE leaves the index entries of the columns it does
    // not name (created, run) alone; a REPLACE rewrote the row and all three.
    store.run(
      `UPDATE idx_ops SET tool = ?, status = ?, code = ?, attempts = ?, latency_ms = ?, settled_at_ms = ?, updated_at_ms = ?, rank = ?, shadow = ?
       WHERE operation_id = ?`,
      op.tool,
      op.status,
      op.code,
      op.attempts,
      op.latency_ms,
      op.settled_at_ms,
      op.updated_at_ms,
      op.rank,
      op.shadow ? 1 : 0,
      op.operation_id,
    );
  else
    store.run(
      `INSERT OR REPLACE INTO idx_ops (operation_id, run_id, tool, status, code, attempts, latency_ms, created_at_ms, settled_at_ms, updated_at_ms, rank, shadow)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      op.operation_id,
      op.run_id,
      op.tool,
      op.status,
      op.code,
      op.attempts,
      op.latency_ms,
      op.created_at_ms,
      op.settled_at_ms,
      op.updated_at_ms,
      op.rank,
      op.shadow ? 1 : 0,
    );
  if (subjects === null) return;
  store.run("DELETE FROM idx_subjects WHERE operation_id = ?", op.operation_id);
  for (const [key, value] of subjects)
    store.run(
      "INSERT OR IGNORE INTO idx_subjects (value, key, operation_id) VALUES (?, ?, ?)",
      value,
      key,
      op.operation_id,
    );
}

/**
 * Retention pruned these: their rows go, and a late event for them is ignored. Tombstones older
 * than `keepMs` go too, at least as many as this call writes (oldest first, by `idx_dropped_at`).
 */
export function dropRows(
  store: SqlStore,
  ids: { operations: readonly string[]; runs: readonly string[] },
  nowMs: number,
  keepMs: number,
): void {
  store.run(
    "DELETE FROM idx_dropped WHERE id IN (SELECT id FROM idx_dropped WHERE at_ms < ? ORDER BY at_ms LIMIT ?)",
    nowMs - keepMs,
    Math.max(100, 2 * (ids.operations.length + ids.runs.length)),
  );
  for (const id of ids.operations) {
    store.run("DELETE FROM idx_ops WHERE operation_id = ?", id);
    store.run("DELETE FROM idx_subjects WHERE operation_id = ?", id);
    store.run("INSERT OR REPLACE INTO idx_dropped (id, at_ms) VALUES (?, ?)", id, nowMs);
  }
  for (const id of ids.runs) {
    store.run("DELETE FROM idx_runs WHERE run_id = ?", id);
    store.run("DELETE FROM idx_known WHERE run_id = ?", id);
    store.run("INSERT OR REPLACE INTO idx_dropped (id, at_ms) VALUES (?, ?)", id, nowMs);
  }
}

/** A run that is gone (a rebuild read nothing for it): its rows and its operations' rows go. */
export function forgetRun(store: SqlStore, runId: string): void {
  store.run(
    "DELETE FROM idx_subjects WHERE operation_id IN (SELECT operation_id FROM idx_ops WHERE run_id = ?)",
    runId,
  );
  store.run("DELETE FROM idx_ops WHERE run_id = ?", runId);
  store.run("DELETE FROM idx_runs WHERE run_id = ?", runId);
  store.run("DELETE FROM idx_known WHERE run_id = ?", runId);
}
