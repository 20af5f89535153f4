// The tenant plane (approvals inbox, unknown-outcomes list) is fed from each operation's outbox:
// a row written in the transition's own transaction, delivered after the commit and again by the
// operation's alarm until the tenant acknowledges it. Here the tenant's storage refuses the write
// once (a trigger in its database, the way an overloaded or failing object would answer), and the
// approval or the unknown outcome must still appear; stale rows must never hide a real one.
import { env } from "cloudflare:workers";
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { encodeNotice } from "../../src/durable/outbox/outbox.ts";
import { describe, expect, it, onTestFinished } from "vitest";
import { TENANT_SCHEMA } from "../../src/durable/store/tenant-rows.ts";
import {
  api,
  automaticWork,
  fireAlarm,
  manifest,
  operation,
  opOutboxCount,
  opStub,
  setup,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

const charge = { amount: 700, currency: "usd" };
const tenantObject = async () =>
  (env as any).TENANTS.get((env as any).TENANTS.idFromName((await testTenant()).tenantId));

/** The tenant's `table` refuses every insert until the returned function lifts it. */
async function refuseWrites(table: "approvals" | "unknowns"): Promise<() => Promise<void>> {
  const trigger = `refuse_${table}`;
  const tenant = await tenantObject();
  await runInDurableObject(tenant, (_instance: unknown, state: DurableObjectState) => {
    const create = TENANT_SCHEMA.split(";").find((s) => s.includes(`EXISTS ${table} (`))!;
    state.storage.sql.exec(create);
    state.storage.sql.exec(
      `CREATE TRIGGER ${trigger} BEFORE INSERT ON ${table} BEGIN SELECT RAISE(ABORT, 'tenant storage refused the write'); END`,
    );
  });
  const lift = async () =>
    void (await runInDurableObject(tenant, (_instance: unknown, state: DurableObjectState) => {
      state.storage.sql.exec(`DROP TRIGGER IF EXISTS ${trigger}`);
    }));
  // Lifted even when the test fails before it does (the tenant is shared by this file's tests).
  onTestFinished(lift);
  return lift;
}

const pendingIds = async () =>
  (await api("GET", "/v1/approvals?state=pending&limit=100")).body.items.map(
    (i: any) => i.operation_id,
  );
const unknownIds = async (limit = 100) =>
  (await api("GET", `/v1/unknown-outcomes?limit=${limit}`)).body.operations.map(
    (o: any) => o.operation_id,
  );
const outboxRows = (operationId: string) =>
  runInDurableObject(opStub(operationId), (_instance: unknown, state: DurableObjectState) =>
    opOutboxCount(state.storage.sql),
  );

describe("approvals inbox from the outbox", () => {
  it("an approval request whose inbox write failed is redelivered by the operation's alarm, then approved once", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, risk: "irreversible_write", approval: "always" }),
    );
    const lift = await refuseWrites("approvals");
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = res.body.results[0].operation_id as string;
    expect(res.body.results[0].status).toBe("awaiting_approval");
    // The tenant refused it: not in the inbox yet, but the operation still owes the delivery.
    expect(await pendingIds()).not.toContain(operationId);
    expect(await automaticWork(operationId)).toBe(true);

    await lift();
    expect(await fireAlarm(operationId)).toBe(true);
    const inbox = (await api("GET", "/v1/approvals?state=pending&limit=100")).body.items;
    expect(inbox.find((i: any) => i.operation_id === operationId)).toMatchObject({
      run_id: runId,
      tool: name,
      arguments: charge,
      state: "pending",
    });
    expect(await outboxRows(operationId)).toBe(0);
    // The redelivery came early for the outbox: the request did not expire and nothing was sent.
    expect((await operation(operationId)).body.phase).toBe("awaiting_approval");
    expect((await up.state()).requests).toHaveLength(0);

    expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    const decided = (await api("GET", "/v1/approvals?state=decided&limit=100")).body.items;
    expect(decided.find((i: any) => i.operation_id === operationId)).toMatchObject({
      state: "approved",
    });
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("an approval request still riding in its log row when the object died is delivered by the alarm after the restart, once", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, risk: "irreversible_write", approval: "always" }),
    );
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = res.body.results[0].operation_id as string;
    expect(await pendingIds()).toContain(operationId);
    // The crash, as storage shows it: the commit wrote row 1 with its inbox update riding in it
    // (issue 32: no op_outbox row), the delivery never happened, so the tenant has no request.
    const tenant = await tenantObject();
    const data = await runInDurableObject(tenant, (_i: unknown, state: DurableObjectState) => {
      const row = state.storage.sql
        .exec<{ data: string }>("SELECT data FROM approvals WHERE operation_id = ?", operationId)
        .one();
      state.storage.sql.exec("DELETE FROM approvals WHERE operation_id = ?", operationId);
      return row.data;
    });
    const { seq: _seq, ...item } = JSON.parse(data);
    const notice = encodeNotice({
      sink: "inbox",
      upsert: { kind: "approval.requested", target: "approval", item },
    });
    await runInDurableObject(
      opStub(operationId),
      async (_i: unknown, state: DurableObjectState) => {
        state.storage.sql.exec(
          "UPDATE op_log SET unsent_notices = ? WHERE seq = 1",
          JSON.stringify([notice]),
        );
        await state.storage.setAlarm(Date.now() + 60_000);
      },
    );
    await evictDurableObject(opStub(operationId));
    expect(await pendingIds()).not.toContain(operationId);

    expect(await fireAlarm(operationId)).toBe(true);
    expect(await pendingIds()).toContain(operationId);
    // Taken: the row is cleared, nothing moved to op_outbox, nothing left for the alarm.
    const left = await runInDurableObject(
      opStub(operationId),
      (_i: unknown, state: DurableObjectState) =>
        state.storage.sql
          .exec<{ n: number }>("SELECT COUNT(*) AS n FROM op_log WHERE unsent_notices IS NOT NULL")
          .one().n + opOutboxCount(state.storage.sql),
    );
    expect(left).toBe(0);
    expect((await operation(operationId)).body.phase).toBe("awaiting_approval");
    expect((await up.state()).requests).toHaveLength(0);
    expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
    expect((await operation(operationId, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a delivery older than what the inbox holds changes nothing (at least once, in any order)", async () => {
    const tenant = await tenantObject();
    const operationId = `op_${unique("x")}`;
    const item = (state: string) => ({
      operation_id: operationId,
      run_id: "run_x",
      call_id: "c1",
      tool: "t",
      target: "POST https://api.example.test/charges",
      arguments: {},
      state,
      requested_by: "u1",
      requested_at_ms: Date.now(),
      expires_at_ms: Date.now() + 60_000,
      input_hash: "h",
      policy_version: "v",
      preview: null,
      decided_by: state === "pending" ? null : "someone",
      decided_at_ms: state === "pending" ? null : Date.now(),
      reason: null,
    });
    await tenant.upsertApproval(item("approved"), 4);
    await tenant.upsertApproval(item("pending"), 1); // the request, redelivered late
    expect(await pendingIds()).not.toContain(operationId);
    await tenant.markUnknown(
      { operation_id: operationId, run_id: "run_x", tool: "t", since_ms: 1 },
      false,
      9,
    );
    await tenant.markUnknown(
      { operation_id: operationId, run_id: "run_x", tool: "t", since_ms: 1 },
      true,
      7,
    );
    expect(await unknownIds()).not.toContain(operationId);
  });

  it("the inbox keeps at most 16 KiB of a preview (flagged truncated); the operation keeps all of it", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({
        url: up.url,
        risk: "irreversible_write",
        approval: "always",
        preview: { url: `${up.url}/quotes/{currency}` },
      }),
    );
    await up.script({ kind: "huge", bytes: 200_000 });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = res.body.results[0].operation_id as string;
    const full = (await operation(operationId)).body.approval.preview;
    expect(full.body.padding).toHaveLength(200_000);
    const listed = (await api("GET", "/v1/approvals?state=pending&limit=100")).body.items.find(
      (i: any) => i.operation_id === operationId,
    );
    expect(listed.preview).toMatchObject({ status: 200, truncated: true });
    expect(typeof listed.preview.body).toBe("string");
    expect(new TextEncoder().encode(listed.preview.body).length).toBeLessThanOrEqual(16 * 1024);
    expect(JSON.stringify(full.body).startsWith(listed.preview.body)).toBe(true);
  });
});

describe("unknown outcomes from the outbox", () => {
  /** A write with no idempotency and no lookup whose response never arrives: only a person can settle it. */
  async function waitingForPerson() {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } }),
    );
    await up.script({ kind: "commit_then_hang" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.body.results[0]).toMatchObject({ status: "outcome_unknown" });
    return { up, runId, operationId: res.body.results[0].operation_id as string };
  }

  it("an unknown outcome whose list write failed is redelivered by the alarm; the alarm goes once it is acknowledged", async () => {
    const lift = await refuseWrites("unknowns");
    const { up, operationId } = await waitingForPerson();
    expect(await unknownIds()).not.toContain(operationId);
    expect(await automaticWork(operationId)).toBe(true);

    await lift();
    expect(await fireAlarm(operationId)).toBe(true);
    expect(await unknownIds()).toContain(operationId);
    expect(await outboxRows(operationId)).toBe(0);
    // Waiting for a person: nothing more happens by itself, and nothing was sent again.
    expect(await automaticWork(operationId)).toBe(false);
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("more than a page of stale rows (operations settled or gone) never hides one that really waits", async () => {
    const tenant = await tenantObject();
    const stale = Array.from({ length: 60 }, (_, i) => `op_stale_${i}_${unique("s")}`);
    await runInDurableObject(tenant, (_instance: unknown, state: DurableObjectState) => {
      const create = TENANT_SCHEMA.split(";").find((s) => s.includes("EXISTS unknowns ("))!;
      state.storage.sql.exec(create);
      // Rows an earlier best-effort copy left open: their operations are not waiting any more.
      stale.forEach((id, i) =>
        state.storage.sql.exec(
          "INSERT INTO unknowns (operation_id, run_id, tool, since) VALUES (?, 'run_gone', 'old_tool', ?)",
          id,
          1_000 + i,
        ),
      );
    });
    const { operationId } = await waitingForPerson();
    const listed = await unknownIds(50);
    expect(listed).toContain(operationId);
    expect(listed.filter((id: string) => stale.includes(id))).toEqual([]);
  });
});
