// Rebuilding the tenant index from the objects (issue 20; issue 38, audit I1): `POST
// /v1/admin/tenants/{id}/reindex` and `npm run reindex`. The runs to read are the tenant's own list
// (TenantObject.runPage, recorded at each run's creation: an index that lost its rows or its
// storage still finds them) and every run the index was told of (`idx_known`). Each run answers its
// row and its operations' ids, each operation its row (the shapes the feed writes), and they are
// written in place by the feed's rules (newest wins), run by run, in one transaction each: nothing
// is emptied first, so the index is never less whole than before. A run that answers "gone" loses
// its rows; one whose read keeps failing keeps the rows it had. Resumable: the runs still to read
// are rows (`rb_todo`) and the progress one row (`idx_rebuild`), so each call, or the object's
// alarm, takes the next step (at most STEP_READS reads, under one invocation's subrequest limit),
// and a read that failed is tried again a few steps later before it counts as failed.
import type { IndexOp } from "../../domain/index-feed.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub, runStub, tenantStub } from "../stubs.ts";
import { ORPHAN_AFTER_MS } from "../tenant/runs.ts";
import { forgetRun, upsertOp, upsertRun } from "./write.ts";

export type RebuildReport = {
  /** `running`: runs are left to read (the object's alarm goes on; another call takes a step too). */
  state: "running" | "done";
  /** Runs and operations written from the objects so far. */
  runs: number;
  operations: number;
  /** Runs that answered nothing (pruned, or never made): their rows went. */
  missing: number;
  /** Runs whose reads failed every time: they keep the rows they had (a warn log names each). */
  failed: number;
};

const PARALLEL = 8;
/** Reads (RPCs) one step makes, at most (a run's operations are read whole: it may go over). */
const STEP_READS = 400;
/** A failed read is tried this many times at once… */
const TRIES_NOW = 3;
/** …in this many steps in all, RETRY_MS apart, before the run counts as failed. */
const LATER_STEPS = 4;
const RETRY_MS = 5_000;
const PAGE = 500;
const OPS_AT_ONCE = 16;

type State = Omit<RebuildReport, "state"> & {
  started_at_ms: number;
  /** 1 while the tenant's list is still being read, after `listed_after`; failed pages so far. */
  listing: number;
  listed_after: string | null;
  list_tries: number;
};
type Todo = { run_id: string; tries: number; listed_at_ms: number | null };
type Read =
  | { kind: "read"; run: NonNullable<Entry>["run"]; ops: IndexOp[]; complete: boolean }
  | { kind: "gone" }
  | { kind: "failed"; detail: string };
type Entry = Awaited<ReturnType<ReturnType<typeof runStub>["indexEntry"]>>;

/** `fn` tried up to TRIES_NOW times; the last error when none answered. */
async function tried<T>(
  fn: () => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; detail: string }> {
  let detail = "";
  for (let i = 0; i < TRIES_NOW; i++) {
    try {
      return { ok: true, value: await fn() };
    } catch (error) {
      detail = String(error);
    }
  }
  return { ok: false, detail };
}

/** One step of the tenant's rebuild (a new one when none is running); its report after the step. */
export async function rebuildStep(
  env: Env,
  store: SqlStore,
  storage: DurableObjectStorage,
  tenantId: string,
  nowMs: number,
): Promise<RebuildReport> {
  let state = store.one<State>("SELECT * FROM idx_rebuild WHERE k = 1");
  if (!state) {
    store.transaction(() => {
      store.run(
        "INSERT INTO idx_rebuild (k, tenant_id, started_at_ms, listing, listed_after, runs, operations, missing, failed) VALUES (1, ?, ?, 1, NULL, 0, 0, 0, 0)",
        tenantId,
        nowMs,
      );
      store.run(
        "INSERT OR IGNORE INTO rb_todo (run_id, tries, next_at_ms, listed_at_ms) SELECT run_id, 0, 0, NULL FROM idx_known WHERE tenant_id = ?",
        tenantId,
      );
    });
    state = store.one<State>("SELECT * FROM idx_rebuild WHERE k = 1")!;
  }
  let reads = 0;
  // The tenant's list, a page at a time. A page that does not come is asked for again RETRY_MS
  // later; after LATER_STEPS such steps the rebuild goes on without the rest (counted failed).
  let listAgainAtMs: number | null = null;
  while (state.listing && reads < STEP_READS) {
    reads++;
    const page = await tried(() => tenantStub(env, tenantId).runPage(state!.listed_after, PAGE));
    if (!page.ok) {
      const giveUp = state.list_tries + 1 >= LATER_STEPS;
      store.run(
        "UPDATE idx_rebuild SET list_tries = list_tries + 1, listing = ?, failed = failed + ? WHERE k = 1",
        giveUp ? 0 : 1,
        giveUp ? 1 : 0,
      );
      state = { ...state, list_tries: state.list_tries + 1, listing: giveUp ? 0 : 1 };
      if (giveUp) warn(tenantId, null, page.detail);
      else listAgainAtMs = nowMs + RETRY_MS;
      break;
    }
    const last: string | null = page.value.at(-1)?.run_id ?? state.listed_after;
    const done = page.value.length < PAGE;
    store.transaction(() => {
      for (const row of page.value)
        store.run(
          "INSERT INTO rb_todo (run_id, tries, next_at_ms, listed_at_ms) VALUES (?, 0, 0, ?) ON CONFLICT (run_id) DO UPDATE SET listed_at_ms = excluded.listed_at_ms",
          row.run_id,
          row.at_ms,
        );
      store.run(
        "UPDATE idx_rebuild SET listing = ?, listed_after = ? WHERE k = 1",
        done ? 0 : 1,
        last,
      );
    });
    state = { ...state, listing: done ? 0 : 1, listed_after: last };
  }
  // The runs, PARALLEL at a time, each written in its own transaction.
  const orphans: string[] = [];
  while (!state.listing && reads < STEP_READS) {
    const batch = store.all<Todo>(
      "SELECT run_id, tries, listed_at_ms FROM rb_todo WHERE next_at_ms <= ? ORDER BY run_id LIMIT ?",
      nowMs,
      PARALLEL,
    );
    if (batch.length === 0) break;
    const results = await Promise.all(batch.map((todo) => readRun(env, tenantId, todo.run_id)));
    reads += results.reduce((n, r) => n + 1 + (r.kind === "read" ? r.ops.length : 0), 0);
    store.transaction(() => {
      batch.forEach((todo, i) => {
        const result = results[i]!;
        if (result.kind === "read") {
          // A run never named by an event (no turn, no operation) is not listed by the feed either.
          const listed = result.ops.length > 0 || (result.run.usage?.turns ?? 0) > 0;
          if (listed) {
            upsertRun(store, tenantId, result.run);
            for (const op of result.ops) upsertOp(store, op);
          }
          // Incomplete (an operation did not answer): what was read is written, and the run is
          // read again later (counted once, when whole).
          if (result.complete) {
            if (listed) count(store, "runs", 1);
            count(store, "operations", listed ? result.ops.length : 0);
            return done(store, todo.run_id);
          }
        } else if (result.kind === "gone") {
          forgetRun(store, todo.run_id);
          count(store, "missing", 1);
          if (todo.listed_at_ms !== null && nowMs - todo.listed_at_ms > ORPHAN_AFTER_MS)
            orphans.push(todo.run_id);
          return done(store, todo.run_id);
        }
        failedOnce(
          store,
          tenantId,
          todo,
          result.kind === "failed" ? result.detail : "an operation's read failed",
          nowMs,
        );
      });
    });
  }
  // Runs listed at the tenant that were never made (their request died): the list forgets them.
  if (orphans.length > 0)
    await tenantStub(env, tenantId)
      .forgetRuns(orphans)
      .catch(() => {});
  const left = store.one<{ n: number; at: number | null }>(
    "SELECT COUNT(*) AS n, MIN(next_at_ms) AS at FROM rb_todo",
  )!;
  const now = store.one<State>("SELECT * FROM idx_rebuild WHERE k = 1")!;
  const report = {
    runs: now.runs,
    operations: now.operations,
    missing: now.missing,
    failed: now.failed,
  };
  if (!now.listing && left.n === 0) {
    store.run("DELETE FROM idx_rebuild WHERE k = 1");
    return { state: "done", ...report };
  }
  await storage.setAlarm(
    now.listing ? (listAgainAtMs ?? nowMs) : Math.max(nowMs, left.at ?? nowMs),
  );
  return { state: "running", ...report };
}

/** The tenant of the rebuild under way (null: none; the object's alarm then has nothing to do). */
export const rebuilding = (store: SqlStore): string | null =>
  (store.exists("idx_rebuild") &&
    store.one<{ tenant_id: string }>("SELECT tenant_id FROM idx_rebuild WHERE k = 1")?.tenant_id) ||
  null;

/** One run from its object: its row and its operations' rows (`complete`: every one answered). */
async function readRun(env: Env, tenantId: string, runId: string): Promise<Read> {
  const entry = await tried(() => runStub(env, runId).indexEntry(tenantId));
  if (!entry.ok) return { kind: "failed", detail: entry.detail };
  if (!entry.value) return { kind: "gone" };
  const ops: IndexOp[] = [];
  let complete = true;
  const ids = entry.value.operation_ids;
  for (let i = 0; i < ids.length; i += OPS_AT_ONCE)
    for (const op of await Promise.all(
      ids
        .slice(i, i + OPS_AT_ONCE)
        .map((id) => tried(() => operationStub(env, id).indexEntry(tenantId))),
    )) {
      if (!op.ok) complete = false;
      else if (op.value) ops.push(op.value);
    }
  return { kind: "read", run: entry.value.run, ops, complete };
}

const count = (store: SqlStore, column: "runs" | "operations" | "missing", n: number) =>
  store.run(`UPDATE idx_rebuild SET ${column} = ${column} + ? WHERE k = 1`, n);

const done = (store: SqlStore, runId: string) =>
  void store.run("DELETE FROM rb_todo WHERE run_id = ?", runId);

/** A run whose read failed: tried again RETRY_MS later, or, after LATER_STEPS, counted failed. */
function failedOnce(store: SqlStore, tenantId: string, todo: Todo, detail: string, nowMs: number) {
  if (todo.tries + 1 < LATER_STEPS) {
    store.run(
      "UPDATE rb_todo SET tries = ?, next_at_ms = ? WHERE run_id = ?",
      todo.tries + 1,
      nowMs + RETRY_MS,
      todo.run_id,
    );
    return;
  }
  done(store, todo.run_id);
  store.run("UPDATE idx_rebuild SET failed = failed + 1 WHERE k = 1");
  warn(tenantId, todo.run_id, detail);
}

/** A run (null: the tenant's list) the rebuild gave up reading; its rows, if any, stay as they were. */
function warn(tenantId: string, runId: string | null, detail: string): void {
  console.error(
    JSON.stringify({
      level: "warn",
      event: "toolgate.reindex_read_failed",
      tenant_id: tenantId,
      run_id: runId,
      detail,
    }),
  );
}
