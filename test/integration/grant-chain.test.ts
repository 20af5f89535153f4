// A standing grant's life in the tenant's hash chain (issue 35 item 1): made and revoked, and each
// call it let through, delivered by the operation's outbox at least once — a redelivery (the tenant
// took it, the operation never learned) makes no second entry, and the chain still verifies.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { encodeNotice } from "../../src/durable/outbox/outbox.ts";
import { OP_OUTBOX_TABLE } from "../../src/durable/store/operation-rows.ts";
import { api, fireAlarm, opOutboxCount, opStub, unique, upstream } from "../support/api.ts";
import { call, grant, newRun, one, refundGrant, registered, shown } from "../support/grants.ts";

/** The operation's outbox gets the use notice again (as if the tenant's ack was lost), then its alarm runs. */
async function redeliver(operationId: string, item: Record<string, unknown>) {
  const { kind, payload } = encodeNotice({
    sink: "inbox",
    upsert: { kind: "grant.used", target: "grant", item: item as any },
  });
  await runInDurableObject(
    opStub(operationId),
    async (_instance: unknown, state: DurableObjectState) => {
      state.storage.sql.exec(OP_OUTBOX_TABLE);
      state.storage.sql.exec(
        "INSERT INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (1, ?, ?, 0, ?, ?)",
        kind,
        payload,
        Date.now(),
        Date.now(),
      );
      // Ahead, so that it runs only when the test fires it (an alarm due now may run by itself).
      await state.storage.setAlarm(Date.now() + 60_000);
    },
  );
  // A new instance: it reads the table this test wrote behind the object's back (since issue 32 a
  // delivered notice never created `op_outbox`, and the object keeps its table list).
  await evictDurableObject(opStub(operationId));
  expect(await fireAlarm(operationId)).toBe(true);
  const left = await runInDurableObject(
    opStub(operationId),
    (_instance: unknown, state: DurableObjectState) => opOutboxCount(state.storage.sql),
  );
  expect(left).toBe(0);
}

describe("a grant in the tenant's chain", { timeout: 30_000 }, () => {
  it("made, each use once however often its notice is delivered, revoked; the chain verifies", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const customer = unique("cus");
    const id = await grant(refundGrant(tool, customer));
    const runId = await newRun(tool, customer);
    const used = await one(runId, call(tool, 30));
    expect(used).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);

    const item = { grant_id: id, operation_id: used.operation_id, amount: 30 };
    // Delivered with the call (before its reply): chained already.
    expect((await shown(id)).chain.entries.map((e: any) => e.type)).toEqual([
      "grant_created",
      "grant_use",
    ]);
    await redeliver(used.operation_id, item);
    await redeliver(used.operation_id, item);

    const view = await shown(id);
    expect(view.chain.check).toMatchObject({ ok: true });
    const kinds = view.chain.entries.map((e: any) => e.type);
    expect(kinds).toEqual(["grant_created", "grant_use"]);
    expect(view.chain.entries[1]).toMatchObject(item);
    expect(view.chain.entries[0]).toMatchObject({ grant_id: id, total_max: 100, by: "test" });

    expect((await api("DELETE", `/v1/grants/${id}`)).status).toBe(200);
    // A revoke already made changes nothing and chains nothing.
    expect((await api("DELETE", `/v1/grants/${id}`)).status).toBe(200);
    const after = await shown(id);
    expect(after.chain.entries.map((e: any) => e.type)).toEqual([
      "grant_created",
      "grant_use",
      "grant_revoked",
    ]);
    expect(after.chain.check).toMatchObject({ ok: true });
    // The whole tenant chain (freezes' entries too) is one sealed sequence.
    const freezes = (await api("GET", "/v1/freezes")).body;
    expect(freezes.chain).toMatchObject({ ok: true, events: after.chain.check.events });
    expect((await up.state()).effects).toHaveLength(1);
  });
});
