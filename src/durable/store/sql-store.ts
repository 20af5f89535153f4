// SqlStore: one object's SQLite, with the row counters the benchmark reads. Each object creates its
// tables on its first write (read paths never create storage, so probing a random id leaves nothing
// behind); tables may be lazy (created only where first needed), so any of them may be missing.
// No AUTOINCREMENT and no secondary indexes: each would add rows written on the hot path. Columns
// added since a table's first schema are added to older objects' tables on their next write
// (`ensureColumn`).

/**
 * Rows read and written by every object in this isolate since it started (cursor.rowsRead /
 * rowsWritten). The benchmark divides the growth over a scenario by its operations: rows per op for
 * every path, background work (lock releases, inbox writes) included. Local wrangler dev runs all of
 * a worker's objects in one isolate; in production each isolate counts only its own objects.
 */
export const SQL_ROWS = { read: 0, written: 0 };

/** The table a write statement changes (anything else run() is given drops every memo). */
const WRITTEN_TABLE =
  /^\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)\s+(\w+)[\s(]/i;

/** Tracks rows written by this object instance (cursor.rowsWritten), reported for the benchmark. */
export class SqlStore {
  rowsWritten = 0;
  private ready = false;
  private readonly seen = new Set<string>();
  /** Whether `seen` holds every table there is (read once, in one statement, by `exists`). */
  private listed = false;
  /** memo()'s reads by key, with the table each came from. */
  private readonly memos = new Map<string, { table: string; value: unknown }>();
  /** Called when a transaction rolls back: caches of what it wrote must be dropped too. */
  private readonly rollbackHooks: Array<() => void> = [];
  /** The schema's statements by table name: its CREATE TABLE, then its CREATE INDEXes, each run on its own. */
  private readonly tables: Map<string, string[]>;
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
    this.tables = new Map();
    for (const statement of schema.split(";").map((text) => text.trim())) {
      if (statement === "") continue;
      const table = /^CREATE TABLE IF NOT EXISTS (\w+)/.exec(statement)?.[1];
      const indexed = /^CREATE INDEX IF NOT EXISTS \w+ ON (\w+)/.exec(statement)?.[1];
      if (table) this.tables.set(table, [statement]);
      else if (indexed && this.tables.has(indexed)) this.tables.get(indexed)!.push(statement);
      else
        throw new Error(`not a CREATE TABLE (or a later table's INDEX): ${statement.slice(0, 60)}`);
    }
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
      this.listed = false;
      this.columns.clear();
      this.memos.clear();
      for (const hook of this.rollbackHooks) hook();
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
    const statements = this.tables.get(name);
    if (!statements) throw new Error(`no table ${name} in this schema`);
    // Known absent (the table list was read and lacks it): created now, with the schema's columns,
    // so hasColumn need not ask SQLite (a new object's first row skipped one statement per table).
    const absent = this.listed && !this.seen.has(name);
    this.memos.clear();
    for (const statement of statements) this.count(this.sql.exec(statement));
    this.seen.add(name);
    if (absent) this.columns.set(name, columnsOf(statements[0]!));
  }

  /** `hook` runs when a transaction rolls back (a cache of rows it wrote must forget them). */
  onRollback(hook: () => void): void {
    this.rollbackHooks.push(hook);
  }

  /**
   * True once `table` exists. Per table, not "any table": an object created by an older schema
   * lacks the newer tables until its next write. Cheap: the first call lists every table in one
   * read of sqlite_schema (a new object's five probes were five reads); only this object writes
   * its database, and only through ensureTable, so the list holds until then (or a rollback).
   */
  exists(table: string): boolean {
    if ((this.ready && !this.lazy.has(table)) || this.seen.has(table)) return true;
    if (this.listed) return false;
    const cursor = this.sql.exec<{ name: string }>(
      "SELECT name FROM sqlite_schema WHERE type = 'table'",
    );
    for (const row of cursor) this.seen.add(row.name);
    SQL_ROWS.read += cursor.rowsRead;
    this.listed = true;
    return this.seen.has(table);
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
    this.memos.clear();
    this.count(this.sql.exec(`ALTER TABLE ${table} ADD COLUMN ${definition}`));
    this.columns.get(table)!.add(column);
    return true;
  }

  /**
   * `read()`'s result (rows read from `table` and decoded), kept until a write to `table` through
   * this store, a schema change or a rollback. Only this object writes its database, and only
   * through run(): a row it wrote need not be read back and decoded on every call (the run row
   * was read three times per turn, the usage row three times).
   */
  memo<T>(table: string, key: string, read: () => T): T {
    const hit = this.memos.get(key);
    if (hit) return hit.value as T;
    const value = read();
    this.memos.set(key, { table, value });
    return value;
  }

  /**
   * Sets memo `key` of `table` to what the caller just wrote there (call it after the write, whose
   * run() dropped the old memo): the next read is answered without reading back the row. Only for a
   * value the caller knows exactly, column for column; a rollback drops it like any memo.
   */
  remember<T>(table: string, key: string, value: T): void {
    this.memos.set(key, { table, value });
  }

  /** Runs a statement; returns the rows it wrote (a compare-and-set checks this). */
  run(query: string, ...bindings: SqlStorageValue[]): number {
    if (this.memos.size > 0) {
      const table = WRITTEN_TABLE.exec(query)?.[1];
      if (table === undefined) this.memos.clear();
      else for (const [key, memo] of this.memos) if (memo.table === table) this.memos.delete(key);
    }
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

/** The column names a CREATE TABLE statement declares (its table constraints left out). */
function columnsOf(create: string): Set<string> {
  const body = create.slice(create.indexOf("(") + 1, create.lastIndexOf(")"));
  const names = new Set<string>();
  let depth = 0;
  let start = 0;
  const take = (part: string) => {
    const word = part.trim().split(/\s+/)[0] ?? "";
    if (word && !/^(PRIMARY|UNIQUE|CHECK|FOREIGN|CONSTRAINT)$/i.test(word)) names.add(word);
  };
  for (let i = 0; i < body.length; i++) {
    if (body[i] === "(") depth++;
    else if (body[i] === ")") depth--;
    else if (body[i] === "," && depth === 0) {
      take(body.slice(start, i));
      start = i + 1;
    }
  }
  take(body.slice(start));
  return names;
}
