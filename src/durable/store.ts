// SQL schema and row codecs for every Durable Object. Each object creates its tables once, on its
// first write (read paths never create storage, so probing a random id leaves nothing behind).
// No AUTOINCREMENT and no secondary indexes: each would add rows written on the hot path.
// An operation is one append-only table: row N = transition N, holding the state it produced and
// the trace events it emitted (so one transition = one row written); row 1 also holds the frozen
// call. The current state is the last row; the primary key makes a concurrent append fail (CAS).
export const OPERATION_SCHEMA = `
CREATE TABLE IF NOT EXISTS op_log (seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, state TEXT NOT NULL, events TEXT NOT NULL, frozen TEXT);
CREATE TABLE IF NOT EXISTS op_lease (k INTEGER PRIMARY KEY CHECK (k = 1), resource TEXT NOT NULL, fencing_token INTEGER NOT NULL);`;

export const RUN_SCHEMA = `
CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, data TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (k INTEGER PRIMARY KEY CHECK (k = 1), turns INTEGER NOT NULL, calls INTEGER NOT NULL, cost REAL NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, calls TEXT NOT NULL, admitted INTEGER NOT NULL,
  reserved_cost REAL NOT NULL, settled_cost REAL, model_cost REAL NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;`;

export const TENANT_SCHEMA = `
CREATE TABLE IF NOT EXISTS tenant (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL, secret_hash TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tools (name TEXT PRIMARY KEY, manifest TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (
  operation_id TEXT PRIMARY KEY, state TEXT NOT NULL, requested_at INTEGER NOT NULL, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, ciphertext TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;`;

// A resource lock is one row: who it belongs to (tenant + resource, checked on every call) and the
// whole lock state (holder, FIFO queue, last fencing token), so one transition writes one row.
export const LOCK_SCHEMA = `
CREATE TABLE IF NOT EXISTS lock (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, resource TEXT NOT NULL, state TEXT NOT NULL, updated_at INTEGER NOT NULL);`;

/** Tracks rows written by this object instance (cursor.rowsWritten), reported for the benchmark. */
export class SqlStore {
  rowsWritten = 0;
  private ready = false;
  private readonly seen = new Set<string>();
  constructor(
    private readonly sql: SqlStorage,
    private readonly schema: string,
  ) {}

  ensureSchema(): void {
    if (this.ready) return;
    this.count(this.sql.exec(this.schema));
    this.ready = true;
  }

  /**
   * True once `table` exists (cheap: one read of sqlite_schema, then remembered). Per table, not
   * "any table": an object created by an older schema lacks the newer tables until its next write.
   */
  exists(table: string): boolean {
    if (this.ready || this.seen.has(table)) return true;
    const found = this.sql.exec("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", table).toArray().length > 0;
    if (found) this.seen.add(table);
    return found;
  }

  run(query: string, ...bindings: SqlStorageValue[]): void {
    this.count(this.sql.exec(query, ...bindings));
  }

  one<T extends Record<string, SqlStorageValue>>(query: string, ...bindings: SqlStorageValue[]): T | null {
    const rows = this.sql.exec<T>(query, ...bindings).toArray();
    return rows[0] ?? null;
  }

  all<T extends Record<string, SqlStorageValue>>(query: string, ...bindings: SqlStorageValue[]): T[] {
    return this.sql.exec<T>(query, ...bindings).toArray();
  }

  private count(cursor: SqlStorageCursor<Record<string, SqlStorageValue>>): void {
    cursor.toArray();
    this.rowsWritten += cursor.rowsWritten;
  }
}
