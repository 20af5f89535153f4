// SQL schema and row codecs for every Durable Object. Each object creates its tables on its first
// write (read paths never create storage, so probing a random id leaves nothing behind); an
// operation creates each table only where it is first needed, so any of them may be missing.
// No AUTOINCREMENT and no secondary indexes: each would add rows written on the hot path.
// An operation is one append-only table: row N = transition N, holding the state it produced and
// the trace events it emitted (so one transition = one row written); row 1 also holds the frozen
// call. The current state is the last row; the primary key makes a concurrent append fail (CAS).
// Pruning (retention) deletes the log and leaves one `op_pruned` row: the operation's tombstone.
// `op_outbox` holds what the tenant plane has not acknowledged yet (keyed by the log row that wrote it).
// The tenant's `unknowns` rows stay, closed, as tombstones until retention: a late, older delivery
// (`seq`) cannot reopen one. Tables from before `seq`/`open` get the columns on first use.
// A cancel that arrives before the operation exists leaves an `op_early_cancel` row per cancelling
// run (only that run's submit obeys it); `op_tombstone` is its older, unbound form, still read.
// A run is three tables: the run row, one usage row, and one row per turn; `decode*` below are
// their typed codecs (a row that does not decode is corrupt storage: a thrown error, never a guess).
// Beside them: turn groups, each tool source once by hash (a call row names its source by hash),
// and `turn_ops` (operation → the first turn holding it), built only when a run first needs it
// (toolgate_check_status), so runs that never check pay no row per call. Columns added since the
// first schema are added to older objects' tables on their next write (`ensureColumn`).
import { z } from "zod";
import type { Usage } from "../domain/turn/budget.ts";
import type { Envelope } from "../domain/envelope.ts";
import type { StoredCounts } from "../domain/run-limits.ts";
import type { TurnGroup } from "../domain/turn/admit.ts";
import type { RunState, TurnCall, TurnRecord } from "../domain/turn/turn.ts";
import { LruCache } from "../lru.ts";
import type { ToolSource } from "../tools/spec.ts";

export const OPERATION_SCHEMA = `
CREATE TABLE IF NOT EXISTS op_log (seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, state TEXT NOT NULL, events TEXT NOT NULL, frozen TEXT);
CREATE TABLE IF NOT EXISTS op_tombstone (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, by TEXT NOT NULL, at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS op_early_cancel (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, by TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS op_lease (k INTEGER PRIMARY KEY CHECK (k = 1), resource TEXT NOT NULL, fencing_token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS op_pruned (k INTEGER PRIMARY KEY CHECK (k = 1), id TEXT NOT NULL, tenant_id TEXT NOT NULL, input_hash TEXT NOT NULL, status TEXT NOT NULL, recorded_at_ms INTEGER NOT NULL, pruned_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS op_outbox (seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at_ms INTEGER NOT NULL, at_ms INTEGER NOT NULL, PRIMARY KEY (seq, kind)) WITHOUT ROWID;`;

/** What a run has stored (run-limits.ts), kept in its usage row; added to older runs' rows on their next turn. */
export const USAGE_STORAGE_COLUMNS = [
  "stored_turns INTEGER NOT NULL DEFAULT 0",
  "stored_bytes INTEGER NOT NULL DEFAULT 0",
  "stopped_turns INTEGER NOT NULL DEFAULT 0",
  "checks INTEGER NOT NULL DEFAULT 0",
];
/** Calls posted under a turn key so far (an older group starts from 0). */
export const TURN_GROUP_CALLS_COLUMN = "calls INTEGER NOT NULL DEFAULT 0";
/** Run tables ensureSchema leaves out: created where first needed. */
export const RUN_LAZY_TABLES = ["turn_ops"];

export const RUN_SCHEMA = `
CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, data TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (k INTEGER PRIMARY KEY CHECK (k = 1), turns INTEGER NOT NULL, calls INTEGER NOT NULL, cost REAL NOT NULL, ${USAGE_STORAGE_COLUMNS.join(", ")});
CREATE TABLE IF NOT EXISTS turns (
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, content_hash TEXT NOT NULL, calls TEXT NOT NULL, admitted INTEGER NOT NULL,
  reserved_cost REAL NOT NULL, settled_cost REAL, model_cost REAL NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_groups (key TEXT PRIMARY KEY, turn_stop TEXT, usage_hash TEXT, ${TURN_GROUP_CALLS_COLUMN}) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_sources (hash TEXT PRIMARY KEY, source TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_ops (operation_id TEXT PRIMARY KEY, turn_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_pruned (k INTEGER PRIMARY KEY CHECK (k = 1), run_id TEXT NOT NULL, tenant_id TEXT NOT NULL, pruned_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS run_request (k INTEGER PRIMARY KEY CHECK (k = 1), request_hash TEXT NOT NULL);`;

export const TENANT_SCHEMA = `
CREATE TABLE IF NOT EXISTS tenant (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL, secret_hash TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tools (name TEXT PRIMARY KEY, manifest TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (
  operation_id TEXT PRIMARY KEY, state TEXT NOT NULL, requested_at INTEGER NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS unknowns (operation_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, tool TEXT NOT NULL, since INTEGER NOT NULL, seq INTEGER NOT NULL DEFAULT 0, open INTEGER NOT NULL DEFAULT 1, closed_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, ciphertext TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verifications (name TEXT PRIMARY KEY, settings_hash TEXT NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;`;

// A resource lock is one row: who it belongs to (tenant + resource, checked on every call) and the
// whole lock state (holder, FIFO queue, last fencing token), so one transition writes one row.
export const LOCK_SCHEMA = `
CREATE TABLE IF NOT EXISTS lock (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, resource TEXT NOT NULL, state TEXT NOT NULL, updated_at INTEGER NOT NULL);`;

/**
 * Rows read and written by every object in this isolate since it started (cursor.rowsRead /
 * rowsWritten). The benchmark divides the growth over a scenario by its operations: rows per op for
 * every path, background work (lock releases, inbox writes) included. Local wrangler dev runs all of
 * a worker's objects in one isolate; in production each isolate counts only its own objects.
 */
export const SQL_ROWS = { read: 0, written: 0 };

/** Tracks rows written by this object instance (cursor.rowsWritten), reported for the benchmark. */
export class SqlStore {
  rowsWritten = 0;
  private ready = false;
  private readonly seen = new Set<string>();
  /** Tables found missing (the common case for the rarely needed ones), until ensureTable creates them. */
  private readonly absent = new Set<string>();
  /** The schema's CREATE TABLE statements by table name, each run on its own. */
  private readonly tables: Map<string, string>;
  /** Column names per table, as read (or added) since the last rollback. */
  private readonly columns = new Map<string, Set<string>>();
  private readonly lazy: ReadonlySet<string>;
  private readonly sql: SqlStorage;
  /** `lazy`: tables of the schema that ensureSchema does not create (ensureTable does, where needed). */
  constructor(
    private readonly storage: DurableObjectStorage,
    schema: string,
    lazy: readonly string[] = [],
  ) {
    this.sql = storage.sql;
    this.lazy = new Set(lazy);
    this.tables = new Map(
      schema
        .split(";")
        .map((statement) => statement.trim())
        .filter((statement) => statement !== "")
        .map((statement) => {
          const name = /^CREATE TABLE IF NOT EXISTS (\w+)/.exec(statement)?.[1];
          if (!name) throw new Error(`not a CREATE TABLE statement: ${statement.slice(0, 60)}`);
          return [name, statement] as const;
        }),
    );
  }

  /**
   * One synchronous transaction. If it throws, SQLite rolls it back, and with it any table it
   * created: what this store remembers about tables is forgotten, so nothing trusts a rolled-back
   * CREATE TABLE.
   */
  transaction<T>(work: () => T): T {
    try {
      return this.storage.transactionSync(work);
    } catch (error) {
      this.ready = false;
      this.seen.clear();
      this.absent.clear();
      this.columns.clear();
      throw error;
    }
  }

  /** Every table of the schema (but the lazy ones). */
  ensureSchema(): void {
    if (this.ready) return;
    for (const name of this.tables.keys()) if (!this.lazy.has(name)) this.ensureTable(name);
    this.ready = true;
  }

  /**
   * One table, where it is first needed (a CREATE TABLE writes two rows). One statement per exec:
   * a multi-statement exec's cursor counts only its last statement's rows.
   */
  ensureTable(name: string): void {
    if ((this.ready && !this.lazy.has(name)) || this.seen.has(name)) return;
    const statement = this.tables.get(name);
    if (!statement) throw new Error(`no table ${name} in this schema`);
    this.count(this.sql.exec(statement));
    this.seen.add(name);
    this.absent.delete(name);
  }

  /**
   * True once `table` exists (cheap: one read of sqlite_schema, then remembered). Per table, not
   * "any table": an object created by an older schema lacks the newer tables until its next write.
   */
  exists(table: string): boolean {
    if ((this.ready && !this.lazy.has(table)) || this.seen.has(table)) return true;
    // Only this object writes its database, and only through ensureTable: absence holds until then.
    if (this.absent.has(table)) return false;
    const cursor = this.sql.exec(
      "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?",
      table,
    );
    const found = cursor.toArray().length > 0;
    SQL_ROWS.read += cursor.rowsRead;
    if (found) this.seen.add(table);
    else this.absent.add(table);
    return found;
  }

  /** Whether `table` (which must exist) has `column`: an older object's table may lack a newer column. */
  hasColumn(table: string, column: string): boolean {
    let names = this.columns.get(table);
    if (!names) {
      // The statement's column names, without reading a row.
      names = new Set(this.sql.exec(`SELECT * FROM ${table} LIMIT 0`).columnNames);
      this.columns.set(table, names);
    }
    return names.has(column);
  }

  /**
   * Adds a column an older schema lacked (`definition`: "name TYPE …", with a default for the
   * existing rows; ALTER TABLE … ADD COLUMN changes the schema only). True if it was added now.
   */
  ensureColumn(table: string, definition: string): boolean {
    const column = definition.split(" ")[0]!;
    if (this.hasColumn(table, column)) return false;
    this.count(this.sql.exec(`ALTER TABLE ${table} ADD COLUMN ${definition}`));
    this.columns.get(table)!.add(column);
    return true;
  }

  /** Runs a statement; returns the rows it wrote (a compare-and-set checks this). */
  run(query: string, ...bindings: SqlStorageValue[]): number {
    return this.count(this.sql.exec(query, ...bindings));
  }

  one<T extends Record<string, SqlStorageValue>>(
    query: string,
    ...bindings: SqlStorageValue[]
  ): T | null {
    const cursor = this.sql.exec<T>(query, ...bindings);
    const rows = cursor.toArray();
    SQL_ROWS.read += cursor.rowsRead;
    return rows[0] ?? null;
  }

  all<T extends Record<string, SqlStorageValue>>(
    query: string,
    ...bindings: SqlStorageValue[]
  ): T[] {
    const cursor = this.sql.exec<T>(query, ...bindings);
    const rows = cursor.toArray();
    SQL_ROWS.read += cursor.rowsRead;
    return rows;
  }

  private count(cursor: SqlStorageCursor<Record<string, SqlStorageValue>>): number {
    cursor.toArray();
    this.rowsWritten += cursor.rowsWritten;
    SQL_ROWS.read += cursor.rowsRead;
    SQL_ROWS.written += cursor.rowsWritten;
    return cursor.rowsWritten;
  }
}

// ── RunObject row codecs ─────────────────────────────────────────────────────────────────────────

const ToolSourceCodec: z.ZodType<ToolSource> = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("manifest"), manifest: z.unknown() }),
  z.object({ kind: z.literal("code"), name: z.string() }),
]);
export const EnvelopeCodec: z.ZodType<Envelope> = z.union([
  z.object({ status: z.literal("succeeded"), operation_id: z.string(), result: z.unknown() }),
  z.object({
    status: z.enum([
      "rejected",
      "failed",
      "budget_exhausted",
      "cancelled",
      "outcome_unknown",
      "awaiting_approval",
      "pending",
    ]),
    operation_id: z.string(),
    code: z.string(),
    message: z.string(),
    allowed_next_actions: z.array(z.string()),
  }),
]);
const RunCodec: z.ZodType<RunState> = z.object({
  runId: z.string(),
  tenantId: z.string(),
  user: z.object({ id: z.string(), scopes: z.array(z.string()) }),
  tools: z.record(z.string(), ToolSourceCodec),
  toolsHash: z.string(),
  context: z.record(z.string(), z.unknown()),
  budgets: z
    .object({
      max_turns: z.number(),
      max_tool_calls: z.number(),
      max_duration_ms: z.number(),
      max_cost: z.number(),
    })
    .partial(),
  createdAtMs: z.number(),
  expiresAtMs: z.number(),
  cancelledAtMs: z.number().nullable(),
});
const CallRefCodec = z.object({ id: z.string(), name: z.string() });
const StoredSubmitFields = {
  operationId: z.string(),
  idempotencyKey: z.string(),
  canonical: z.string(),
  hash: z.string(),
  cost: z.number(),
};
/**
 * Stored without the input's value: it is the canonical text, parsed back (the arguments are kept
 * once). The tool source is named by its hash (`tool_sources` holds it once per run); rows written
 * before that hold the source itself, and still decode.
 */
const StoredCallCodec = z.union([
  z.object({ call: CallRefCodec, fixed: EnvelopeCodec }),
  z.object({
    call: CallRefCodec,
    submit: z.union([
      z.strictObject({ ...StoredSubmitFields, sourceHash: z.string() }),
      z.strictObject({ ...StoredSubmitFields, source: ToolSourceCodec }),
    ]),
    closed: EnvelopeCodec.nullable(),
  }),
]);
type StoredCall = z.infer<typeof StoredCallCodec>;
const StoredCallsCodec = z.array(StoredCallCodec);
const InputValueCodec = z.record(z.string(), z.unknown());
const UsageRowCodec = z.object({ turns: z.number(), calls: z.number(), cost: z.number() });
const StoredCountsRowCodec = z.object({
  stored_turns: z.number(),
  stored_bytes: z.number(),
  stopped_turns: z.number(),
  checks: z.number(),
});
const TurnGroupRowCodec = z.object({
  key: z.string(),
  turn_stop: z.enum(["max_turns", "max_tool_calls", "deadline", "max_cost"]).nullable(),
  usage_hash: z.string().nullable(),
  calls: z.number(),
});
const TurnRowCodec = z.object({
  id: z.string(),
  seq: z.number(),
  content_hash: z.string(),
  calls: z.string(),
  reserved_cost: z.number(),
  settled_cost: z.number().nullable(),
  model_cost: z.number(),
  created_at: z.number(),
});
export type TurnRow = z.infer<typeof TurnRowCodec>;
export const TURN_COLUMNS =
  "id, seq, content_hash, calls, reserved_cost, settled_cost, model_cost, created_at";

function decodeWith<T>(codec: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = codec.safeParse(value);
  if (!parsed.success) throw new Error(`corrupt ${what} row: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`corrupt ${what} row: not JSON`);
  }
}

/**
 * Decoded rows, keyed by their exact stored text: a RunObject reads its run row several times per
 * turn, and JSON.parse + the zod codec over the whole run (offered manifests included) was its
 * largest cost on the replay path (npm run profile). Content-keyed, so never stale; values are
 * deep-frozen, so a caller that mutated one would throw instead of corrupting the next read.
 */
const DECODED_ROWS = { maxEntries: 512, maxBytes: 8 * 1024 * 1024 };
// Measured on a miss only: the key (the row's text) and the decoded value, about twice the text.
const decodedRuns = new LruCache<string, RunState>(
  DECODED_ROWS,
  (run) => 2 * encodeRun(run).length,
);
const decodedTurns = new LruCache<string, TurnRecord>(
  DECODED_ROWS,
  (turn) => 2 * JSON.stringify(turn).length,
);

export const encodeRun = (run: RunState): string => JSON.stringify(run);

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}

export function decodeRun(data: string): RunState {
  const cached = decodedRuns.get(data);
  if (cached) return cached;
  const run = deepFreeze(decodeWith(RunCodec, parseJson(data, "run"), "run"));
  decodedRuns.set(data, run);
  return run;
}
export const decodeTurnGroup = (row: unknown): TurnGroup => {
  const group = decodeWith(TurnGroupRowCodec, row, "turn group");
  return {
    key: group.key,
    turnStop: group.turn_stop,
    usageHash: group.usage_hash,
    calls: group.calls,
  };
};
export const decodeUsage = (row: unknown): Usage => {
  const usage = decodeWith(UsageRowCodec, row, "usage");
  return { turns: usage.turns, toolCalls: usage.calls, cost: usage.cost };
};

export const decodeStoredCounts = (row: unknown): StoredCounts => {
  const counts = decodeWith(StoredCountsRowCodec, row, "usage");
  return {
    turns: counts.stored_turns,
    bytes: counts.stored_bytes,
    stopped: counts.stopped_turns,
    checks: counts.checks,
  };
};

/**
 * `hashOf`: the stored hash of a call's tool source (its `tool_sources` row), so the row names it;
 * a source without one (e.g. a call decoded from an older row) is kept in the row as it was.
 */
export function encodeTurnCalls(
  calls: readonly TurnCall[],
  hashOf: (source: ToolSource) => string | undefined = () => undefined,
): string {
  const stored = calls.map((call): StoredCall => {
    if ("fixed" in call) return call;
    const { input, source, ...submit } = call.submit;
    const sourceHash = hashOf(source);
    const common = { ...submit, canonical: input.canonical, hash: input.hash };
    return {
      call: call.call,
      submit: sourceHash === undefined ? { ...common, source } : { ...common, sourceHash },
      closed: call.closed,
    };
  });
  return JSON.stringify(stored);
}

/** A `tool_sources` row's text: decoded once per run object (deep-frozen, shared by its calls). */
export const decodeToolSource = (text: string): ToolSource =>
  deepFreeze(decodeWith(ToolSourceCodec, parseJson(text, "tool source"), "tool source"));

/** The stored source a call row names; unknown hashes are corrupt storage. */
export type SourceLookup = (hash: string) => ToolSource | null;

/** A turn row's columns as one cache key (only for rows whose columns have their stored types). */
function turnKey(row: unknown): string | null {
  if (typeof row !== "object" || row === null) return null;
  const r = row as Record<string, unknown>;
  const texts = [r.id, r.content_hash, r.calls];
  const numbers = [r.seq, r.reserved_cost, r.model_cost, r.created_at];
  if (!texts.every((v) => typeof v === "string") || !numbers.every((v) => typeof v === "number"))
    return null;
  if (r.settled_cost !== null && typeof r.settled_cost !== "number") return null;
  // JSON text never holds a raw NUL, so the separator cannot be forged by a column's content.
  return [...texts, ...numbers, r.settled_cost].join("\u0000");
}

/** `sourceOf`: resolves the source hashes calls name (a source is content-addressed, so the cache key stays the row). */
export function decodeTurn(row: unknown, sourceOf: SourceLookup = () => null): TurnRecord {
  const key = turnKey(row);
  const cached = key === null ? undefined : decodedTurns.get(key);
  if (cached) return cached;
  const decoded = deepFreeze(decodeTurnRow(row, sourceOf));
  if (key !== null) decodedTurns.set(key, decoded);
  return decoded;
}

function decodeTurnRow(row: unknown, sourceOf: SourceLookup): TurnRecord {
  const turn = decodeWith(TurnRowCodec, row, "turn");
  const storedSource = (hash: string): ToolSource => {
    const source = sourceOf(hash);
    if (!source) throw new Error(`corrupt turn row: no stored tool source ${hash}`);
    return source;
  };
  const calls = decodeWith(StoredCallsCodec, parseJson(turn.calls, "turn"), "turn").map(
    (stored): TurnCall => {
      if ("fixed" in stored) return stored;
      const { canonical, hash, operationId, idempotencyKey, cost } = stored.submit;
      const source =
        "source" in stored.submit ? stored.submit.source : storedSource(stored.submit.sourceHash);
      const value = decodeWith(InputValueCodec, parseJson(canonical, "turn"), "turn input");
      return {
        call: stored.call,
        submit: { operationId, idempotencyKey, input: { value, canonical, hash }, source, cost },
        closed: stored.closed,
      };
    },
  );
  return {
    id: turn.id,
    contentHash: turn.content_hash,
    seq: turn.seq,
    calls,
    reservedCost: turn.reserved_cost,
    settledCost: turn.settled_cost,
    modelCost: turn.model_cost,
    createdAtMs: turn.created_at,
  };
}
