// Signed receipts (issue 37), from the side of an auditor holding only public data: every settled
// operation — recorded, rejected, unknown then reconciled, compensated — has a receipt that verifies
// offline against the tenant's published JWKS (scripts/lib/receipts.mjs, the verifier the CLI runs),
// chained per operation; receipts signed before a rotation still verify; another tenant sees none.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { RECEIPT_KEY_CACHE_MS, SignedReceiptSchema } from "../../src/domain/receipt.ts";
import { verifyReceipts } from "../../scripts/lib/receipts.mjs";
import {
  ALL_SCOPES,
  api,
  manifest,
  fireAlarm,
  newTenant,
  opStub,
  setup,
  testTenant,
  turn,
  unique,
  until,
  upstream,
} from "../support/api.ts";
import { REFUND_SCHEMA, UNDO } from "../support/undo.ts";

const charge = { amount: 700, currency: "usd" };

/** The tenant's keys as a third party fetches them: the public URL, no credential. */
async function publicJwks() {
  const { tenantId } = await testTenant();
  const res = await api("GET", `/public/${tenantId}/receipts/jwks.json`, undefined, {
    Authorization: "",
  });
  expect(res.status).toBe(200);
  return res.body as { keys: Array<Record<string, string>> };
}

async function receiptOf(operationId: string) {
  const res = await api("GET", `/v1/operations/${operationId}/receipt`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  // Every receipt served is the published format (docs/receipt.schema.json), strictly.
  for (const receipt of res.body.chain) SignedReceiptSchema.parse(receipt);
  return res.body as { receipt: any; chain: any[] };
}

/** What the operation has stored (its row 1), read from SQLite: nothing produced by the reading. */
const storedReceipts = (operationId: string): Promise<any[] | null> =>
  runInDurableObject(opStub(operationId), async (_: unknown, state: DurableObjectState) => {
    const row = state.storage.sql
      .exec<{ receipts: string | null }>("SELECT receipts FROM op_log WHERE seq = 1")
      .toArray()[0];
    return row?.receipts ? (JSON.parse(row.receipts) as any[]) : null;
  });

/** `tool` registered by another tenant (its key in `as`), and a run of that tenant offering it. */
async function runOf(tool: Record<string, unknown>, as: { Authorization: string }) {
  expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool, as)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    { user: { id: "u1", scopes: [] }, tools: [tool.name] },
    as,
  );
  expect(run.status).toBe(201);
  return run.body.run_id as string;
}

async function call(runId: string, name: string, args: unknown = charge) {
  const res = await turn(runId, [{ id: unique("c"), name, arguments: args }]);
  return res.body.results[0] as { operation_id: string; status: string };
}

describe("receipts", { timeout: 30_000 }, () => {
  it("a recorded call: one receipt naming what ran, verifying offline against the public JWKS", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const done = await call(runId, name);
    expect(done.status).toBe("succeeded");
    // Signed in the background after the commit, before anyone asks for it.
    const signed = await until(
      () => storedReceipts(done.operation_id),
      (stored) => stored !== null,
    );
    const { receipt, chain } = await receiptOf(done.operation_id);
    expect(chain).toEqual(signed);
    const { tenantId } = await testTenant();
    expect(chain).toHaveLength(1);
    expect(receipt.payload).toMatchObject({
      type: "toolgate.receipt/v1",
      kind: "settled",
      seq: 1,
      operation_id: done.operation_id,
      tenant: tenantId,
      run: runId,
      tool: name,
      attempts: { count: 1 },
      outcome: { status: "succeeded", code: null, via: "attempt", unknown: null },
      previous_receipt_hash: null,
      compensation: { compensates: null, compensated_by: null },
    });
    expect(receipt.payload.attempts.started_at_ms).toHaveLength(1);
    expect(receipt.payload.upstream_response_hash).toMatch(/^[0-9a-f]{64}$/);
    // What the operation says of itself is what the receipt says.
    const view = await api("GET", `/v1/operations/${done.operation_id}`);
    expect(receipt.payload.input_hash).toBe(view.body.input_hash);
    expect(await verifyReceipts({ tenant: tenantId, receipts: chain }, await publicJwks())).toEqual(
      [],
    );
    // Read again: the same receipt (stored once, not signed anew).
    expect((await receiptOf(done.operation_id)).receipt).toEqual(receipt);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a rejected call (a person said no): its receipt names the decision, nothing was sent", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, approval: { mode: "always", expires_in_ms: 60_000 } }),
    );
    const waiting = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const operationId = waiting.body.results[0].operation_id as string;
    // Not settled yet: no receipt, a typed answer saying so.
    const early = await api("GET", `/v1/operations/${operationId}/receipt`);
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ code: "receipt_not_ready", state: "awaiting_approval" });
    const rejected = await api("POST", `/v1/operations/${operationId}/reject`, {
      reason: "not this customer",
    });
    expect(rejected.status).toBe(200);
    const { receipt } = await receiptOf(operationId);
    expect(receipt.payload.outcome).toMatchObject({
      status: "rejected",
      code: "approval_rejected",
    });
    expect(receipt.payload.attempts).toEqual({ count: 0, started_at_ms: [] });
    expect(receipt.payload.approvals).toHaveLength(1);
    expect(receipt.payload.approvals[0]).toMatchObject({ verdict: "reject", via: "api_key" });
    expect(receipt.payload.approvals[0].decider_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(receipt)).not.toContain('"test"'); // the decider's name is only hashed
    expect(receipt.payload.upstream_response_hash).toBeNull();
    expect(await verifyReceipts([receipt], await publicJwks())).toEqual([]);
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("unknown, then reconciled by the status lookup: the receipt says how it settled, one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({
        url: up.url,
        timeout_ms: 300,
        idempotency: { mode: "none" },
        request: {
          method: "POST",
          url: `${up.url}/charges`,
          headers: { "X-Client-Reference": "{idempotency_key}" },
        },
        reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}` },
      }),
    );
    await up.script({ kind: "commit_then_hang" });
    const done = await call(runId, name);
    expect(done.status).toBe("succeeded");
    const { receipt } = await receiptOf(done.operation_id);
    expect(receipt.payload.outcome).toEqual({
      status: "succeeded",
      code: null,
      via: "reconcile",
      late: false,
      unknown: { code: "timeout_unknown", settled_by: "lookup" },
    });
    expect(receipt.payload.attempts.count).toBe(1);
    expect(await verifyReceipts([receipt], await publicJwks())).toEqual([]);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a compensated charge: the original's chain gains a second receipt naming the refund, linked by hash", async () => {
    await testTenant();
    const up = upstream();
    const refund = manifest({
      url: up.url,
      name: unique("refund"),
      description: "Refund a charge.",
      input_schema: REFUND_SCHEMA,
      request: { method: "POST", url: `${up.url}/refunds` },
    });
    expect((await api("PUT", `/v1/tools/${refund.name}`, refund)).status).toBe(201);
    const chargeTool = manifest({
      url: up.url,
      compensate: { tool: refund.name, arguments: UNDO, approval: "none" },
    });
    expect((await api("PUT", `/v1/tools/${chargeTool.name}`, chargeTool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [chargeTool.name],
    });
    const original = await call(run.body.run_id, chargeTool.name as string, {
      amount: 900,
      currency: "usd",
    });
    const undone = await api("POST", `/v1/operations/${original.operation_id}/compensate?wait=5`, {
      reason: "duplicate",
    });
    expect(undone.status).toBe(201);
    expect(undone.body.result.status).toBe("succeeded");
    const { chain } = await receiptOf(original.operation_id);
    expect(chain.map((r) => r.payload.kind)).toEqual(["settled", "compensation_linked"]);
    expect(chain[1].payload).toMatchObject({
      seq: 2,
      previous_receipt_hash: chain[0].hash,
      compensation: { compensates: null, compensated_by: undone.body.operation_id },
    });
    const refundReceipt = (await receiptOf(undone.body.operation_id)).receipt;
    expect(refundReceipt.payload.compensation).toEqual({
      compensates: original.operation_id,
      compensated_by: null,
    });
    const { tenantId } = await testTenant();
    const all = { tenant: tenantId, receipts: [...chain, refundReceipt] };
    expect(await verifyReceipts(all, await publicJwks())).toEqual([]);
    // The chain checked: a bundle without the first link is refused.
    const skipped = await verifyReceipts(
      { tenant: tenantId, receipts: [chain[1]] },
      await publicJwks(),
    );
    expect(skipped.map((p: { reason: string }) => p.reason)).toEqual([
      expect.stringMatching(/skips a link/),
    ]);
    const state = await up.state();
    expect(state.effects.map((e) => e.path)).toEqual([
      expect.stringMatching(/\/charges$/),
      expect.stringMatching(/\/refunds$/),
    ]);
  });

  it("a run's bundle, a rotation: receipts signed before it verify with the old key, later ones with the new", async () => {
    const rotator = await newTenant([...ALL_SCOPES, "receipts:admin"]);
    const as = { Authorization: `Bearer ${rotator.key}` };
    const up = upstream();
    const tool = manifest({ url: up.url });
    const runId = await runOf(tool, as);
    const post = (id: string, amount: number) =>
      api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [{ id, name: tool.name, arguments: { amount, currency: "usd" } }] },
        { ...as, Prefer: "wait=5" },
      );
    const before = (await post("a", 1)).body.results[0].operation_id as string;
    const first = await api("GET", `/v1/operations/${before}/receipt`, undefined, as);
    const oldKid = first.body.receipt.payload.kid as string;
    // Only a key holding receipts:admin rotates.
    const refused = await api("POST", "/v1/receipts/keys/rotate", {});
    expect(refused.status).toBe(403);
    const rotated = await api("POST", "/v1/receipts/keys/rotate", {}, as);
    expect(rotated.status).toBe(200);
    expect(rotated.body.keys).toHaveLength(2);
    const old = rotated.body.keys.find((k: any) => k.kid === oldKid);
    // The old key ends once no operation may still hold it (RECEIPT_KEY_CACHE_MS after the rotation).
    expect(Date.parse(old.not_after)).toBeLessThanOrEqual(Date.now() + RECEIPT_KEY_CACHE_MS);
    let after: string;
    let second: Awaited<ReturnType<typeof api>>;
    try {
      // Past that bound, as the next calls come: they are signed with the new key.
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(Date.now() + RECEIPT_KEY_CACHE_MS + 1_000);
      after = (await post("b", 2)).body.results[0].operation_id as string;
      second = await api("GET", `/v1/operations/${after}/receipt`, undefined, as);
    } finally {
      vi.useRealTimers();
    }
    expect(second.status).toBe(200);
    const newKid = rotated.body.keys.find((k: any) => k.kid !== oldKid).kid;
    expect(second.body.receipt.payload.kid).toBe(newKid);
    // The jwks the API lists is the public one.
    const jwks = (await api("GET", "/v1/receipts/jwks", undefined, as)).body;
    const pub = await api("GET", `/public/${rotator.tenantId}/receipts/jwks.json`, undefined, {
      Authorization: "",
    });
    expect(pub.body).toEqual(jwks);
    // The run's bundle (through the tenant index, fed in the background).
    const bundle = await until(
      () => api("GET", `/v1/receipts?run_id=${runId}`, undefined, as),
      (res) => res.body.receipts?.length === 2,
    );
    expect(bundle.body).toMatchObject({
      type: "toolgate.receipt-bundle/v1",
      tenant: rotator.tenantId,
    });
    expect(await verifyReceipts(bundle.body, jwks)).toEqual([]);
    expect(first.body.receipt.payload.kid).toBe(oldKid);
    // Without the old key, the receipt signed before the rotation does not verify.
    const onlyNew = { keys: jwks.keys.filter((k: any) => k.kid !== oldKid) };
    const problems = await verifyReceipts(bundle.body, onlyNew);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({
      operation_id: before,
      reason: expect.stringMatching(/does not hold/),
    });
  });

  it("a receipt lost to a crash before it was stored: the alarm signs it again, the same payload", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const done = await call(runId, name);
    const original = (await receiptOf(done.operation_id)).receipt;
    const stub = opStub(done.operation_id);
    /** The crash: the recorded row committed, the signature never stored; the object gone. */
    const crash = async () => {
      await runInDurableObject(stub, async (_: unknown, state: DurableObjectState) => {
        state.storage.sql.exec("UPDATE op_log SET receipts = NULL WHERE seq = 1");
      });
      await evictDurableObject(stub);
    };
    const alarmAt = (): Promise<number> =>
      runInDurableObject(stub, async (instance: unknown) => {
        const alarms = (instance as { alarms: { ownAlarmAtMs(): number } }).alarms;
        return alarms.ownAlarmAtMs();
      });
    await crash();
    // While it is missing, the operation's alarm comes for it an hour after it was recorded
    // (then for its pruning, days later).
    const recordedAtMs = original.payload.recorded_at_ms as number;
    expect(await alarmAt()).toBe(recordedAtMs + 3_600_000);
    expect(await fireAlarm(done.operation_id)).toBe(true);
    const again = (await storedReceipts(done.operation_id))?.[0];
    expect(again).toBeTruthy();
    const { issued_at_ms: _a, ...same } = original.payload;
    const { issued_at_ms: _b, ...signedAgain } = again.payload;
    expect(signedAgain).toEqual(same);
    expect(await alarmAt()).toBeGreaterThan(recordedAtMs + 24 * 3_600_000);
    // Read before any alarm: produced then, as deterministically.
    await crash();
    const read = (await receiptOf(done.operation_id)).receipt;
    expect({ ...read.payload, issued_at_ms: 0 }).toEqual({ ...original.payload, issued_at_ms: 0 });
    expect(await verifyReceipts([read], await publicJwks())).toEqual([]);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("pruned by retention after a crash lost its receipt: signed before the log goes, kept on the tombstone", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const done = await call(runId, name);
    const original = (await receiptOf(done.operation_id)).receipt;
    const stub = opStub(done.operation_id);
    await runInDurableObject(stub, async (_: unknown, state: DurableObjectState) => {
      state.storage.sql.exec("UPDATE op_log SET receipts = NULL WHERE seq = 1");
    });
    await evictDurableObject(stub);
    try {
      // Two days and a minute later (the test deployment's retention): its alarm prunes it.
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
      expect(await fireAlarm(done.operation_id)).toBe(true);
      expect((await api("GET", `/v1/operations/${done.operation_id}`)).status).toBe(410);
      const kept = await receiptOf(done.operation_id);
      expect(kept.chain).toHaveLength(1);
      expect({ ...kept.receipt.payload, issued_at_ms: 0 }).toEqual({
        ...original.payload,
        issued_at_ms: 0,
      });
      expect(await verifyReceipts(kept.chain, await publicJwks())).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a run through faults: every operation settled has exactly one receipt; the run's and a subject's bundles verify", async () => {
    const tenant = await newTenant(ALL_SCOPES);
    const as = { Authorization: `Bearer ${tenant.key}` };
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 2_000,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          amount: { type: "integer", exclusiveMinimum: 0 },
          currency: { enum: ["usd", "eur"] },
          customer_id: { type: "string" },
        },
        required: ["amount", "currency", "customer_id"],
      },
    });
    const runId = await runOf(tool, as);
    // Drawn in arrival order: a failure, a refusal, a retry, an answer lost after the commit.
    await up.script(
      { kind: "status", status: 403 },
      { kind: "status", status: 400 },
      { kind: "status", status: 503 },
      { kind: "commit_then_hang" },
    );
    const calls = Array.from({ length: 10 }, (_, i) => ({
      id: `c${i}`,
      name: tool.name,
      arguments: { amount: 100 + i, currency: "usd", customer_id: i % 2 ? "cus_odd" : "cus_even" },
    }));
    const posted = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      { calls },
      { ...as, Prefer: "wait=10" },
    );
    const ids = posted.body.results.map(
      (r: { operation_id: string }) => r.operation_id,
    ) as string[];
    // What waits (a retry, a resend under the same key) is driven by its alarm until it settles.
    for (const id of ids)
      for (let i = 0; i < 5; i++) {
        const view = await api("GET", `/v1/operations/${id}`, undefined, as);
        if (view.body.phase === "recorded") break;
        await fireAlarm(id);
      }
    const statuses = await Promise.all(
      ids.map(
        async (id) => (await api("GET", `/v1/operations/${id}`, undefined, as)).body.result.status,
      ),
    );
    expect(statuses.filter((s) => s === "succeeded")).toHaveLength(8);
    const bundle = await until(
      () => api("GET", `/v1/receipts?run_id=${runId}`, undefined, as),
      (res) => res.body.receipts?.length === 10,
    );
    const keys = (
      await api("GET", `/public/${tenant.tenantId}/receipts/jwks.json`, undefined, {
        Authorization: "",
      })
    ).body;
    expect(await verifyReceipts(bundle.body, keys)).toEqual([]);
    const covered = bundle.body.receipts.map((r: any) => r.payload.operation_id).sort();
    expect(covered).toEqual([...ids].sort());
    const settledBy = bundle.body.receipts
      .map((r: any) => r.payload.outcome.unknown?.settled_by)
      .filter(Boolean);
    expect(settledBy).toEqual(["resend"]);
    // A subject's bundle: the operations the tenant index lists for it, each with its receipt.
    const even = await until(
      () => api("GET", "/v1/receipts?subject=customer_id:cus_even", undefined, as),
      (res) => res.body.receipts?.length === 5,
    );
    expect(await verifyReceipts(even.body, keys)).toEqual([]);
    expect(even.body.receipts.map((r: any) => r.payload.operation_id).sort()).toEqual(
      ids.filter((_, i) => i % 2 === 0).sort(),
    );
    // One charge per operation that succeeded, whatever was retried or resent.
    expect((await up.state()).effects).toHaveLength(8);
  });

  it("another tenant cannot read a receipt: the same 404 as an unknown operation", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const done = await call(runId, name);
    await receiptOf(done.operation_id);
    const other = await newTenant(["traces:read"]);
    const as = { Authorization: `Bearer ${other.key}` };
    const theirs = await api("GET", `/v1/operations/${done.operation_id}/receipt`, undefined, as);
    const unknownId = `op_${"0".repeat(32)}`;
    const unknown = await api("GET", `/v1/operations/${unknownId}/receipt`, undefined, as);
    expect(theirs.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(theirs.body.code).toBe(unknown.body.code);
    const bundle = await api(
      "GET",
      `/v1/receipts?operation_id=${done.operation_id}`,
      undefined,
      as,
    );
    expect(bundle.status).toBe(404);
    // Exactly one selector.
    const both = await api("GET", `/v1/receipts?operation_id=${done.operation_id}&run_id=${runId}`);
    expect(both.status).toBe(400);
    expect(both.body.code).toBe("invalid_request");
  });
});
