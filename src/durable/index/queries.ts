// The index's reads (issue 20): runs and operations lists (filters, newest first, keyset cursor on
// (created_at_ms, id) so every row comes once however rows arrive meanwhile); the overview is
// overview.ts. Cost: a list reads at most `limit + 1` rows through an index on (created_at_ms, id)
// plus the filter's rows; every filter has an index (`code`: a partial one, only rows with a code;
// `q`: each of its meanings), so a filter reads the rows it matches, never the whole table.
import { decodeCursor, encodeCursor, type IndexOp } from "../../domain/index-feed.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { openStatusTerm } from "./write.ts";

export type OpQuery = {
  status?: string;
  tool?: string;
  user?: string;
  subject?: string;
  code?: string;
  run_id?: string;
  q?: string;
  since_ms?: number;
  until_ms?: number;
  cursor?: string;
  limit: number;
};
export type RunQuery = Omit<OpQuery, "code" | "run_id" | "status"> & { status?: string };

export type OpItem = {
  operation_id: string;
  run_id: string;
  tool: string;
  status: string;
  code: string | null;
  user: string | null;
  subjects: Record<string, string>;
  attempts: number | null;
  latency_ms: number | null;
  created_at: string;
  settled_at: string | null;
};
export type RunItem = {
  run_id: string;
  status: "active" | "cancelled" | "expired";
  user: string | null;
  created_at: string;
  expires_at: string | null;
  usage: { turns: number; tool_calls: number; cost: number } | null;
  operations: Record<string, number>;
};
export type Page<T> = { items: T[]; next_cursor: string | null };

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
type Sql = { where: string[]; args: SqlStorageValue[] };

/**
 * `q` matches a prefix (`cus_de` finds `cus_demo`) as a range on the column's index: every value
 * from the prefix up to the prefix followed by the highest code point SQLite's binary order knows.
 */
const PREFIX = (column: string) => `(${column} >= ? AND ${column} < ?)`;
const prefixArgs = (q: string, times: number): string[] =>
  Array.from({ length: times }, () => [q, `${q}\u{10ffff}`]).flat();

/** The subject filter: `value` or `key:value`. */
function subjectClause(sql: Sql, subject: string, column: string): void {
  const at = subject.indexOf(":");
  if (at > 0) {
    sql.where.push(
      `${column} IN (SELECT operation_id FROM idx_subjects WHERE value = ? AND key = ?)`,
    );
    sql.args.push(subject.slice(at + 1), subject.slice(0, at));
  } else {
    sql.where.push(`${column} IN (SELECT operation_id FROM idx_subjects WHERE value = ?)`);
    sql.args.push(subject);
  }
}

export function listOperations(store: SqlStore, query: OpQuery): Page<OpItem> | null {
  const sql: Sql = { where: [], args: [] };
  const eq = (column: string, value: string | undefined) => {
    if (value === undefined) return;
    sql.where.push(`o.${column} = ?`);
    sql.args.push(value);
  };
  eq("status", query.status);
  const open = query.status === undefined ? null : openStatusTerm(query.status, "o.");
  if (open) sql.where.push(open);
  eq("tool", query.tool);
  eq("code", query.code);
  eq("run_id", query.run_id);
  if (query.user !== undefined) {
    sql.where.push("o.run_id IN (SELECT run_id FROM idx_runs WHERE user_id = ?)");
    sql.args.push(query.user);
  }
  if (query.subject !== undefined) subjectClause(sql, query.subject, "o.operation_id");
  if (query.q !== undefined) {
    // The ids it names, each meaning through its own index (a union the planner drives the query
    // from), each matched as a prefix by a range on that index: a search reads what it matches,
    // never the whole table.
    sql.where.push(
      `o.operation_id IN (SELECT operation_id FROM idx_ops WHERE ${PREFIX("operation_id")} UNION SELECT operation_id FROM idx_ops WHERE ${PREFIX("run_id")} UNION SELECT operation_id FROM idx_ops WHERE run_id IN (SELECT run_id FROM idx_runs WHERE ${PREFIX("user_id")}) UNION SELECT operation_id FROM idx_subjects WHERE ${PREFIX("value")})`,
    );
    sql.args.push(...prefixArgs(query.q, 4));
  }
  if (!window(sql, query, "o.created_at_ms", "o.operation_id")) return null;
  const rows = store.all<
    Omit<IndexOp, "subjects" | "updated_at_ms" | "shadow"> & { user_id: string | null }
  >(
    `SELECT o.operation_id, o.run_id, o.tool, o.status, o.code, o.attempts, o.latency_ms, o.created_at_ms, o.settled_at_ms,
       (SELECT user_id FROM idx_runs r WHERE r.run_id = o.run_id) AS user_id
     FROM idx_ops o ${where(sql)} ORDER BY o.created_at_ms DESC, o.operation_id DESC LIMIT ?`,
    ...sql.args,
    query.limit + 1,
  );
  const page = rows.slice(0, query.limit);
  const subjects = new Map<string, Record<string, string>>();
  for (const row of page) {
    const found: Record<string, string> = {};
    for (const s of store.all<{ key: string; value: string }>(
      "SELECT key, value FROM idx_subjects WHERE operation_id = ?",
      row.operation_id,
    ))
      found[s.key] = s.value;
    subjects.set(row.operation_id, found);
  }
  const last = page.at(-1);
  return {
    items: page.map((row) => ({
      operation_id: row.operation_id,
      run_id: row.run_id,
      tool: row.tool,
      status: row.status,
      code: row.code,
      user: row.user_id,
      subjects: subjects.get(row.operation_id) ?? {},
      attempts: row.attempts,
      latency_ms: row.latency_ms,
      created_at: iso(row.created_at_ms)!,
      settled_at: iso(row.settled_at_ms),
    })),
    next_cursor:
      rows.length > query.limit && last
        ? encodeCursor(last.created_at_ms, last.operation_id)
        : null,
  };
}

export function listRuns(store: SqlStore, query: RunQuery, nowMs: number): Page<RunItem> | null {
  const sql: Sql = { where: [], args: [] };
  if (query.user !== undefined) {
    sql.where.push("r.user_id = ?");
    sql.args.push(query.user);
  }
  if (query.tool !== undefined) {
    sql.where.push("r.run_id IN (SELECT run_id FROM idx_ops WHERE tool = ?)");
    sql.args.push(query.tool);
  }
  if (query.subject !== undefined) {
    const inner: Sql = { where: [], args: [] };
    subjectClause(inner, query.subject, "operation_id");
    sql.where.push(`r.run_id IN (SELECT run_id FROM idx_ops ${where(inner)})`);
    sql.args.push(...inner.args);
  }
  if (query.q !== undefined) {
    sql.where.push(
      `r.run_id IN (SELECT run_id FROM idx_runs WHERE ${PREFIX("run_id")} UNION SELECT run_id FROM idx_runs WHERE ${PREFIX("user_id")} UNION SELECT run_id FROM idx_ops WHERE ${PREFIX("operation_id")} UNION SELECT run_id FROM idx_ops WHERE operation_id IN (SELECT operation_id FROM idx_subjects WHERE ${PREFIX("value")}))`,
    );
    sql.args.push(...prefixArgs(query.q, 4));
  }
  if (query.status === "cancelled") sql.where.push("r.cancelled_at_ms IS NOT NULL");
  else if (query.status === "expired") {
    sql.where.push("r.cancelled_at_ms IS NULL AND r.expires_at_ms <= ?");
    sql.args.push(nowMs);
  } else if (query.status === "active") {
    sql.where.push(
      "r.cancelled_at_ms IS NULL AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)",
    );
    sql.args.push(nowMs);
  }
  if (!window(sql, query, "r.created_at_ms", "r.run_id")) return null;
  const rows = store.all<{
    run_id: string;
    user_id: string | null;
    created_at_ms: number;
    expires_at_ms: number | null;
    cancelled_at_ms: number | null;
    turns: number | null;
    tool_calls: number | null;
    cost: number | null;
  }>(
    `SELECT r.run_id, r.user_id, r.created_at_ms, r.expires_at_ms, r.cancelled_at_ms, r.turns, r.tool_calls, r.cost
     FROM idx_runs r ${where(sql)} ORDER BY r.created_at_ms DESC, r.run_id DESC LIMIT ?`,
    ...sql.args,
    query.limit + 1,
  );
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  return {
    items: page.map((row) => {
      const operations: Record<string, number> = {};
      for (const count of store.all<{ status: string; n: number }>(
        "SELECT status, COUNT(*) AS n FROM idx_ops WHERE run_id = ? GROUP BY status",
        row.run_id,
      ))
        operations[count.status] = count.n;
      return {
        run_id: row.run_id,
        status:
          row.cancelled_at_ms !== null
            ? "cancelled"
            : row.expires_at_ms !== null && row.expires_at_ms <= nowMs
              ? "expired"
              : "active",
        user: row.user_id,
        created_at: iso(row.created_at_ms)!,
        expires_at: iso(row.expires_at_ms),
        usage:
          row.turns === null
            ? null
            : { turns: row.turns, tool_calls: row.tool_calls ?? 0, cost: row.cost ?? 0 },
        operations,
      };
    }),
    next_cursor:
      rows.length > query.limit && last ? encodeCursor(last.created_at_ms, last.run_id) : null,
  };
}

/** since/until and the cursor; false when the cursor is not one of ours. */
function window(sql: Sql, query: OpQuery | RunQuery, time: string, id: string): boolean {
  if (query.since_ms !== undefined) {
    sql.where.push(`${time} >= ?`);
    sql.args.push(query.since_ms);
  }
  if (query.until_ms !== undefined) {
    sql.where.push(`${time} < ?`);
    sql.args.push(query.until_ms);
  }
  if (query.cursor === undefined) return true;
  const cursor = decodeCursor(query.cursor);
  if (!cursor) return false;
  sql.where.push(`(${time} < ? OR (${time} = ? AND ${id} < ?))`);
  sql.args.push(cursor.atMs, cursor.atMs, cursor.id);
  return true;
}

const where = (sql: Sql) => (sql.where.length ? `WHERE ${sql.where.join(" AND ")}` : "");
