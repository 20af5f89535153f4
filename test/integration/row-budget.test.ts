// The new write's storage budget (issue 19), counted, never timed: the isolate's SQLite row
// counters (GET /v1/admin/stats, development only: every object's cursor rowsRead/rowsWritten)
// over one new write of a warm run, background work included (the events sent, marked sent and
// stored by the tenant, the `reported` row), and the rows the reply path wrote (the turn's
// Toolgate-Rows-Written header: the run's and the operation's writes before the answer).
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { TURN_COLUMNS } from "../../src/durable/store/run-rows.ts";
import type { SqlStore } from "../../src/durable/store/sql-store.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { ADMIN, api, manifest, setup, turn, upstream } from "../support/api.ts";
import { usageAsStored } from "../support/run-usage.ts";

type Rows = { read: number; written: number };

/** The counters once nothing has moved for 1.5 s (the events queue delivers within its 1 s batch timeout). */
async function settledRows(): Promise<Rows> {
  let last: Rows | null = null;
  let still = 0;
  for (let i = 0; i < 100; i++) {
    const res = await api("GET", "/v1/admin/stats", undefined, {
      Authorization: `Bearer ${ADMIN}`,
    });
    const now = res.body.sql_rows as Rows;
    still = last && now.read === last.read && now.written === last.written ? still + 1 : 0;
    if (still >= 5) return now;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error("the row counters never settled");
}

/**
 * Per new write (the durable floor: 3 read, 4 written). Reply path, 6 written: the turn (the usage
 * after it rides in its row since issue 32: store/run-rows.ts TURN_USAGE_COLUMN), the operation's
 * log table (2), its start and recorded rows (operation.recorded rides in the latter), the run's
 * turn.settled row (no index since issue 32: a partial index on the unsent rows cost one more row
 * here and one when it was sent). Background, 7 written: the event column cleared, turn.settled
 * marked sent, the `reported` row, and the tenant storing the two events (2 each: the row and its
 * unique id, which dedupes the queue's redeliveries). Reads, 13 in all: 11 on the run and the
 * operation (one of them the tool source's check, which the warm-up's insert made the run read
 * again once; the usage, read again here once: its row and the newest turn snapshot, a scan of the
 * run's turns; the turn and usage the admission wrote and the turn.settled row are not read back:
 * SqlStore.remember, RunEvents' unsent list; the unsent run events are found by a scan of the
 * run's few rows, no index) and 2 for this deployment's OTLP push (the test deployment has a
 * collector); the tenant reads none (its record and webhooks are kept until written).
 * The tenant index (issue 20), fed by the same queue consumer in the background, adds 4 written
 * (the operation's new row with its created and run entries — the status index holds only the
 * statuses people look for, not `succeeded`; the run's counters by UPDATE, which leaves its indexed
 * columns' entries alone — a REPLACE rewrote them: 3) and 3 read.
 * Issue 37 adds 1 written in the background: the operation's signed receipt (its chain rides in
 * row 1's `receipts` column, no table of its own; the key comes from the isolate's cache, so the
 * tenant reads nothing), and one read fewer in all: a new operation's trace is kept as it appends
 * it, so the receipt and the OTLP push (2 reads before) read it without reading back the rows; the
 * receipt's own checks (is there a compensation link?) read 1.
 * Before issue 19 (commit c6e799f): 11 written on the reply path, 18 written and 54 read in all;
 * at 68c7bd7: 14 + 3 read; at 6eb8863 (before issue 32's diet): 8 on the reply path, 15 + 7 written.
 */
const BUDGET = { replyWritten: 6, totalRead: 12 + 3, totalWritten: 14 + 4 };

describe("a new write's rows", () => {
  it("one new write of a warm run stays within its row budget (reply path and background)", async () => {
    const up = upstream();
    const { runId, runToken, name } = await setup(manifest({ url: up.url }));
    // With the run's token, as an agent calls (an API key costs its tenant's key lookup).
    const post = (id: string, amount: number) =>
      api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [{ id, name, arguments: { amount, currency: "usd" } }] },
        { Authorization: `Bearer ${runToken}` },
      );
    // Warm: the run's first turn creates its event table, stores the tool source, loads the run.
    expect((await post("warm", 1)).status).toBe(200);
    const before = await settledRows();
    const res = await post("w1", 2);
    expect(res.status).toBe(200);
    expect(res.body.results[0].status).toBe("succeeded");
    const after = await settledRows();
    const total = { read: after.read - before.read, written: after.written - before.written };
    const replyWritten = Number(res.headers.get("Toolgate-Rows-Written"));
    console.log(JSON.stringify({ replyWritten, total }));
    expect(replyWritten).toBeLessThanOrEqual(BUDGET.replyWritten);
    expect(total.written).toBeLessThanOrEqual(BUDGET.totalWritten);
    expect(total.read).toBeLessThanOrEqual(BUDGET.totalRead);
    expect((await up.state()).effects).toHaveLength(2);
  }, 30_000);
});

describe("rows the run keeps instead of reading them back", () => {
  it("the admitted turn and the usage it changed are, column for column, what SQLite holds", async () => {
    const up = upstream();
    // A turn that waits for a person: admitted (turn and usage written), not settled.
    const { runId, name } = await setup(
      manifest({ url: up.url, approval: { mode: "always", expires_in_ms: 60_000 } }),
    );
    const res = await turn(
      runId,
      [{ id: "c1", name, arguments: { amount: 5, currency: "usd" } }],
      0,
    );
    expect(res.status).toBe(202);
    const turnId = res.body.turn_id as string;
    const run = placedStub(env as unknown as Env, "RUNS", runId) as any;
    await runInDurableObject(run, (instance: unknown, state: DurableObjectState) => {
      const store = (instance as unknown as { store: SqlStore }).store;
      const kept = (table: string, key: string) => store.memo(table, key, () => "not kept");
      const sql = (query: string, ...args: SqlStorageValue[]) =>
        state.storage.sql.exec(query, ...args).toArray()[0];
      expect(kept("turns", `turn:${turnId}`)).toEqual(
        sql(`SELECT ${TURN_COLUMNS} FROM turns WHERE id = ?`, turnId),
      );
      // The usage as stored: since issue 32 the turn's row carries it (its snapshot outranks the
      // usage row by version), so admitting a turn writes one row.
      expect(kept("usage", "usage")).toEqual(usageAsStored(state.storage.sql));
    });
  });
});

/**
 * One call that asks a person, then is approved and sent (the bench's case h), background work
 * included: 24 written since issue 32 (30 before: its inbox updates rode in `op_outbox`, a table of
 * 2 rows and an insert and a delete per update; now they ride in the step's log row, cleared by the
 * one UPDATE that clears its events). The proposal: the turn, the operation's log table (2) and row,
 * the inbox's request, the row cleared (6). The approval: the decided row (its events and the inbox
 * update riding), the recorded row, each cleared, the inbox's decision (5). The tenant: three events
 * (2 each) and the index: the operation's row with its created, run and status entries (4), then its
 * two updates (2 and 1: the status entry leaves). Reads: 28 (47 before). When the three events
 * arrive in one queue batch (here they usually do: it waits up to 1 s), the index writes the row
 * once as it ends (3 instead of 7: index/write.ts upsertOp, tested in index.test.ts): 20 written,
 * 24 read. The budget is the split batches' count, so the queue's timing cannot fail it.
 */
const APPROVED_BUDGET = { written: 24, read: 28 };

describe("an approved write's rows", () => {
  it("propose, approve, send: within its row budget, the inbox updates riding in the log rows", async () => {
    const up = upstream();
    const { runId, runToken, name } = await setup(
      manifest({ url: up.url, approval: { mode: "always", expires_in_ms: 60_000 } }),
    );
    const post = (id: string, amount: number) =>
      api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [{ id, name, arguments: { amount, currency: "usd" } }] },
        { Authorization: `Bearer ${runToken}`, Prefer: "wait=0" },
      );
    const approve = (operationId: string) =>
      api("POST", `/v1/operations/${operationId}/approve`, { reason: "bench" });
    // Warm, as in the bench: the run's first turn, approved.
    const warm = await post("warm", 1);
    expect((await approve(warm.body.results[0].operation_id)).status).toBe(200);
    const before = await settledRows();
    const res = await post("w1", 2);
    expect(res.body.results[0].status).toBe("awaiting_approval");
    expect((await approve(res.body.results[0].operation_id)).status).toBe(200);
    const after = await settledRows();
    const total = { read: after.read - before.read, written: after.written - before.written };
    console.log(JSON.stringify({ approved: total }));
    expect(total.written).toBeLessThanOrEqual(APPROVED_BUDGET.written);
    expect(total.read).toBeLessThanOrEqual(APPROVED_BUDGET.read);
    // Both were sent once each, and the inbox shows the decision.
    expect((await up.state()).effects).toHaveLength(2);
    const decided = (await api("GET", "/v1/approvals?state=decided&limit=100")).body.items;
    expect(decided.map((item: any) => item.operation_id)).toContain(
      res.body.results[0].operation_id,
    );
  }, 30_000);
});
