// A rollback undoes what its own run did (issue 31 item 3, audit N3 / probe R1): with a
// tenant-scoped operation key, a run's turns can reference another run's operation — through a
// call that conflicted with it (other arguments) or joined it (the same arguments). That operation
// belongs to its creator's rollback: it is not a step of this one, its id and tool are not in this
// run's report, and it never stops this run's own refunds. Counted at the refund upstream.
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  opStub,
  testTenant,
  unique,
  upstream,
} from "../support/api.ts";
import {
  cancelRollback,
  charged,
  newRun,
  put,
  refundTool,
  refundsOf,
  runObject,
  settleRollback,
  shop,
  UNDO,
} from "../support/undo.ts";

afterEach(() => vi.useRealTimers());

/** A charge keyed by order_id across the tenant, refunded (no approval) as its compensation. */
async function tenantShop() {
  await testTenant();
  const up = upstream();
  const refund = refundTool(up.url);
  expect((await put(refund)).status).toBe(201);
  const charge = manifest({
    url: up.url,
    name: unique("charge_order"),
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        order_id: { type: "string", minLength: 1 },
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
      },
      required: ["order_id", "amount", "currency"],
    },
    operation_scope: "tenant",
    operation_key: ["order_id"],
    compensate: { tool: refund.name, arguments: UNDO, approval: "none" },
  });
  const putCharge = await put(charge);
  expect(putCharge.status, JSON.stringify(putCharge.body)).toBe(201);
  return { up, name: charge.name as string };
}

async function chargeOrder(runId: string, name: string, orderId: string, amount: number) {
  const res = await api(
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    {
      calls: [{ id: unique("c"), name, arguments: { order_id: orderId, amount, currency: "usd" } }],
    },
    { Prefer: "wait=5" },
  );
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.results[0] as {
    operation_id: string;
    status: string;
    code?: string;
    result?: { id: string };
  };
}

const stepIds = (report: { steps: Array<{ operation_id: string }> }) =>
  report.steps.map((s) => s.operation_id);

describe("a rollback after a conflicting call on another run's operation", () => {
  it("refunds only the run's own charge, once; the other run's operation is not a step and not in the report", async () => {
    const { up, name } = await tenantShop();
    const runB = await newRun([name]);
    const runA = await newRun([name]);
    const own = await chargeOrder(runB, name, "order_B", 500);
    expect(own.status).toBe("succeeded");
    const theirs = await chargeOrder(runA, name, "order_1", 700);
    expect(theirs.status).toBe("succeeded");
    const conflict = await chargeOrder(runB, name, "order_1", 99);
    expect(conflict).toMatchObject({ status: "rejected", code: "idempotency_conflict" });
    expect(conflict.operation_id).toBe(theirs.operation_id);

    const cancelled = await cancelRollback(runB);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(stepIds(cancelled.body.rollback)).toEqual([own.operation_id]);
    const report = await settleRollback(runB);
    expect(report).toMatchObject({
      state: "completed",
      steps: [{ operation_id: own.operation_id, tool: name, state: "compensated" }],
    });
    expect(JSON.stringify(report)).not.toContain(theirs.operation_id);

    const refunds = await refundsOf(up);
    expect(refunds.map((r) => ({ charge: r.body.charge_id, amount: r.body.amount }))).toEqual([
      { charge: own.result!.id, amount: 500 },
    ]);
    // Run A's charge is A's to undo: its own rollback refunds it, once.
    await cancelRollback(runA);
    expect(await settleRollback(runA)).toMatchObject({
      state: "completed",
      steps: [{ operation_id: theirs.operation_id, state: "compensated" }],
    });
    expect((await refundsOf(up)).map((r) => r.body.charge_id)).toEqual([
      own.result!.id,
      theirs.result!.id,
    ]);
  });
});

describe("a rollback after a call that joined another run's operation", () => {
  it("the joining run's rollback refunds nothing of it; the creator's rollback refunds it once", async () => {
    const { up, name } = await tenantShop();
    const runA = await newRun([name]);
    const runB = await newRun([name]);
    const created = await chargeOrder(runA, name, "order_1", 700);
    expect(created.status).toBe("succeeded");
    const joined = await chargeOrder(runB, name, "order_1", 700);
    expect(joined).toMatchObject({ status: "succeeded", operation_id: created.operation_id });
    expect((await up.state()).effects.filter((e) => e.path.endsWith("/charges"))).toHaveLength(1);

    const cancelB = await cancelRollback(runB);
    expect(cancelB.status, JSON.stringify(cancelB.body)).toBe(200);
    expect(await settleRollback(runB)).toEqual({ state: "completed", steps: [] });
    expect(await refundsOf(up)).toHaveLength(0);

    await cancelRollback(runA);
    expect(await settleRollback(runA)).toMatchObject({
      state: "completed",
      steps: [{ operation_id: created.operation_id, state: "compensated" }],
    });
    const refunds = await refundsOf(up);
    expect(refunds.map((r) => ({ charge: r.body.charge_id, amount: r.body.amount }))).toEqual([
      { charge: created.result!.id, amount: 700 },
    ]);
  });
});

/** Runs `edit` on an object's SQL storage, then restarts it so it reads the rows anew. */
async function editStorage(stub: any, edit: (sql: SqlStorage) => void) {
  await runInDurableObject(stub, (_i: unknown, state: DurableObjectState) => {
    edit(state.storage.sql);
  });
  await runInDurableObject(stub, (_i: unknown, state: DurableObjectState) =>
    state.abort("reload"),
  ).catch(() => {});
}

describe("a rollback planned before it was per run (stored with another run's step)", () => {
  it("cancelled with rollback again: the other run's step leaves the report, the run's own charge is refunded once", async () => {
    const { up, name } = await tenantShop();
    const runB = await newRun([name]);
    const runA = await newRun([name]);
    const own = await chargeOrder(runB, name, "order_B", 500);
    const theirs = await chargeOrder(runA, name, "order_1", 700);
    expect((await chargeOrder(runB, name, "order_1", 99)).code).toBe("idempotency_conflict");
    expect((await api("POST", `/v1/runs/${runB}/cancel`, {})).status).toBe(200);
    // What the audit's probe R1 left behind: stopped at A's operation, B's own charge pending.
    await editStorage(runObject(runB), (sql) => {
      sql.exec(
        "CREATE TABLE IF NOT EXISTS rollback (k INTEGER PRIMARY KEY CHECK (k = 1), state TEXT NOT NULL, by TEXT NOT NULL, started_at_ms INTEGER NOT NULL, next_at_ms INTEGER)",
      );
      sql.exec(
        "CREATE TABLE IF NOT EXISTS rollback_steps (seq INTEGER PRIMARY KEY, operation_id TEXT NOT NULL, tool TEXT NOT NULL, compensation_id TEXT, state TEXT NOT NULL, detail TEXT)",
      );
      sql.exec("INSERT INTO rollback VALUES (1, 'stopped', 'key', ?, NULL)", Date.now());
      sql.exec(
        "INSERT INTO rollback_steps VALUES (0, ?, ?, NULL, 'failed', 'the compensation could not be asked for: no such operation')",
        theirs.operation_id,
        name,
      );
      sql.exec(
        "INSERT INTO rollback_steps VALUES (1, ?, ?, NULL, 'pending', NULL)",
        own.operation_id,
        name,
      );
    });
    expect((await api("GET", `/v1/runs/${runB}`)).body.rollback.state).toBe("stopped");

    expect((await cancelRollback(runB)).status).toBe(200);
    const report = await settleRollback(runB);
    expect(report).toMatchObject({
      state: "completed",
      steps: [{ operation_id: own.operation_id, state: "compensated" }],
    });
    expect(report.steps).toHaveLength(1);
    expect((await refundsOf(up)).map((r) => r.body.charge_id)).toEqual([own.result!.id]);
  });
});

describe("a rollback whose own step cannot go on", () => {
  it("an operation that does not answer while it is planned: 503, nothing planned (never a rollback 'completed' without it); asked again, it refunds once", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const name = s.charge.name as string;
    const first = await charged(s.runId, name, 100);
    const second = await charged(s.runId, name, 200);
    let frozen = "";
    await editStorage(opStub(first.operation_id), (sql) => {
      frozen = sql.exec<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1").one().frozen;
      sql.exec("UPDATE op_log SET frozen = '{damaged' WHERE seq = 1");
    });

    const refused = await cancelRollback(s.runId);
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body).toMatchObject({ code: "unavailable" });
    expect(refused.body.detail).toMatch(/rollback could not be planned/);
    const run = (await api("GET", `/v1/runs/${s.runId}`)).body;
    expect(run.status).toBe("cancelled");
    expect(run.rollback).toBeUndefined();
    expect(await refundsOf(s.up)).toHaveLength(0);

    await editStorage(opStub(first.operation_id), (sql) =>
      sql.exec("UPDATE op_log SET frozen = ? WHERE seq = 1", frozen),
    );
    expect((await cancelRollback(s.runId)).status).toBe(200);
    expect(await settleRollback(s.runId)).toMatchObject({
      state: "completed",
      steps: [
        { operation_id: second.operation_id, state: "compensated" },
        { operation_id: first.operation_id, state: "compensated" },
      ],
    });
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([200, 100]);
  });

  it("an own write pruned while an earlier step waited for a person: that step fails saying why and the rollback stops (not 'running' for ever)", async () => {
    const s = await shop();
    const name = s.charge.name as string;
    const older = await charged(s.runId, name, 100);
    const newer = await charged(s.runId, name, 200);
    const cancelled = await cancelRollback(s.runId);
    const waiting = cancelled.body.rollback.steps[0];
    expect(waiting).toMatchObject({ operation_id: newer.operation_id, state: "submitted" });
    expect(
      (await api("POST", `/v1/operations/${waiting.compensation_id}/approve`, {})).status,
    ).toBe(200);
    expect((await operation(waiting.compensation_id, 5)).body.phase).toBe("recorded");

    // Past the test deployment's retention (two days): the older charge is pruned.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
    expect(await fireAlarm(older.operation_id)).toBe(true);
    expect((await operation(older.operation_id)).status).toBe(410);

    const report = await settleRollback(s.runId);
    expect(report).toMatchObject({
      state: "stopped",
      steps: [
        { operation_id: newer.operation_id, state: "compensated" },
        {
          operation_id: older.operation_id,
          state: "failed",
          detail: expect.stringMatching(/could not be read \(pruned\)/),
        },
      ],
    });
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([200]);
  });
});
