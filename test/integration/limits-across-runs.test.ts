// Limits across runs (issue 21), from the side of an agent that opens a new run per message: a
// per-customer daily refund limit holds across runs, concurrency, re-posts, re-proposals, upstream
// timeouts and crashed objects; nothing reserved is leaked; the window rolls.
import { afterEach, describe, expect, it, vi } from "vitest";
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import * as stubs from "../../src/durable/stubs.ts";
import type { Env } from "../../src/durable/env.ts";
import {
  api,
  automaticWork,
  fireAlarm,
  manifest,
  operation,
  opStub,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { refundTool } from "../support/limits.ts";

const DAY = 24 * 60 * 60_000;

async function register(tool: Record<string, unknown>) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  expect(put.status).toBe(201);
}
async function newRun(tool: string, customer: string) {
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool],
    context: { customer_id: customer },
  });
  expect(run.status).toBe(201);
  return run.body.run_id as string;
}
const refund = (runId: string, tool: string, amount: number, id = unique("call"), wait = 3) =>
  turn(runId, [{ id, name: tool, arguments: { amount } }], wait);
/** A customer's bucket, as subjects are named (kind first, audit N7). */
const perCustomer = (customer: string) => `context.customer_id:${customer}`;
const usage = async (limit: string, customer: string) =>
  (await api("GET", `/v1/limits/${limit}/${perCustomer(customer)}`)).body;
const limitStub = (tenantId: string, name: string, customer: string) =>
  stubs.limitStub(env as unknown as Env, tenantId, name, perCustomer(customer)) as any;
const NOTHING_APPLIED = ["rejected", "failed", "cancelled"];

afterEach(() => vi.useRealTimers());

describe("limits across runs", () => {
  it("50 concurrent refunds for one customer, re-posted, re-proposed, timed out and crashed: effects never exceed 1,000; usage = applied + unknown", async () => {
    const up = upstream();
    const { tool, limitName } = refundTool(up.url, {}, { timeout_ms: 2_000 });
    const name = tool.name as string;
    await register(tool);
    const customer = unique("cus");
    // Timeouts (a third after the effect committed) and refusals, drawn in arrival order.
    await up.script(
      ...Array.from({ length: 12 }, (_, i) =>
        i % 3 === 0
          ? { kind: "hang" }
          : i % 3 === 1
            ? { kind: "commit_then_hang" }
            : { kind: "status", status: 400 },
      ),
    );
    const runs = await Promise.all(Array.from({ length: 25 }, () => newRun(name, customer)));
    const calls = (r: number, suffix = "") =>
      [0, 1].map((k) => ({
        id: `c${r}_${k}${suffix}`,
        name,
        arguments: { amount: 30 + r * 2 + k },
      }));
    // Every run posts its turn; every other run posts it again at once (a re-post) and proposes the
    // same calls again in a new turn (a re-proposal): the same two operations each time.
    const firsts = runs.map((runId, r) => turn(runId, calls(r), 3));
    const repeats = runs.flatMap((runId, r) =>
      r % 2 === 0 ? [turn(runId, calls(r), 3), turn(runId, calls(r, "_again"), 3)] : [],
    );
    const [first] = await Promise.all([Promise.all(firsts), Promise.all(repeats)]);
    const amountOf = new Map<string, number>();
    first.forEach((res, r) =>
      res.body.results.forEach((x: { operation_id: string }, k: number) =>
        amountOf.set(x.operation_id, calls(r)[k]!.arguments.amount),
      ),
    );
    const ids = [...amountOf.keys()];
    expect(ids).toHaveLength(50);
    // Crash a few operations mid-flight: storage alone must carry their reservations.
    for (const id of ids.slice(0, 8))
      await runInDurableObject(opStub(id), (_i: unknown, state: DurableObjectState) =>
        state.abort("simulated crash"),
      ).catch(() => {});

    const statuses = async () =>
      new Map(
        await Promise.all(ids.map(async (id) => [id, (await operation(id)).body.result] as const)),
      );
    /** Every operation not recorded with nothing applied: succeeded, unknown, or still retrying. */
    const mayHaveApplied = (results: Map<string, any>) =>
      ids
        .filter((id) => !NOTHING_APPLIED.includes(results.get(id).status))
        .reduce((sum, id) => sum + amountOf.get(id)!, 0);

    let results = await statuses();
    expect((await usage(limitName, customer)).used).toBe(mayHaveApplied(results));

    // The upstream recovers; every retry, resend and crash recovery runs until nothing is left.
    await up.clear();
    for (let round = 0; round < 8; round++) {
      const due = [];
      for (const id of ids) if (await automaticWork(id)) due.push(id);
      if (due.length === 0) break;
      await Promise.all(due.map((id) => fireAlarm(id)));
    }
    results = await statuses();
    const state = await up.state();
    const applied = state.effects.reduce((sum, e) => sum + (e.body.amount as number), 0);
    expect(applied).toBeLessThanOrEqual(1000);
    // One effect per operation at most, and only for ones that may have applied.
    expect(Object.values(state.effectsByKey).every((n) => n === 1)).toBe(true);
    const unknown = ids.filter((id) => results.get(id).status === "outcome_unknown");
    const succeeded = ids.filter((id) => results.get(id).status === "succeeded");
    const held = (await usage(limitName, customer)).used;
    expect(held).toBe([...succeeded, ...unknown].reduce((sum, id) => sum + amountOf.get(id)!, 0));
    expect(held).toBe(mayHaveApplied(results));
    // Every success reached the upstream; nothing refused by the limit did.
    expect(applied).toBeGreaterThanOrEqual(
      succeeded.reduce((sum, id) => sum + amountOf.get(id)!, 0),
    );
    const refusedAmounts = new Set(
      ids.filter((id) => results.get(id).code === "policy_denied").map((id) => amountOf.get(id)),
    );
    expect(state.requests.filter((q) => refusedAmounts.has(q.body?.amount))).toHaveLength(0);
    // The refused were told what remains and when the window frees it.
    const refused = [...results.values()].filter((r) => r.code === "policy_denied");
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0].message).toMatch(
      /remains; this call needs \d+\. Enough of the window frees at 20\S+ at the earliest\./,
    );
  }, 60_000);

  it("two runs for the same customer: the second is refused once the first used the allowance; another customer is unaffected; the window rolls", async () => {
    const up = upstream();
    const { tool, limitName } = refundTool(up.url);
    const name = tool.name as string;
    await register(tool);
    const [alice, bob] = [unique("cus"), unique("cus")];

    const first = await refund(await newRun(name, alice), name, 800);
    expect(first.body.results[0].status).toBe("succeeded");
    const second = await refund(await newRun(name, alice), name, 300);
    expect(second.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(second.body.results[0].message).toContain(
      "800 is already used or reserved and 200 remains",
    );
    const other = await refund(await newRun(name, bob), name, 300);
    expect(other.body.results[0].status).toBe("succeeded");
    expect(await usage(limitName, alice)).toMatchObject({
      used: 800,
      remaining: 200,
      held: 1,
      max: 1000,
    });
    expect(await usage(limitName, bob)).toMatchObject({ used: 300, remaining: 700 });
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([800, 300]);

    // A day later the first refund has left the window (one day after it was recorded, which the
    // limit's sweep asked its operation).
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + DAY + 1_000);
    const { tenantId } = await testTenant();
    expect(await runDurableObjectAlarm(limitStub(tenantId, limitName, alice))).toBe(true);
    expect(await usage(limitName, alice)).toMatchObject({ used: 0, remaining: 1000 });
    const later = await refund(await newRun(name, alice), name, 300);
    expect(later.body.results[0].status).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([800, 300, 300]);
  });

  it("a refund that took effect with an unreadable answer (failed/invalid_output) keeps its reservation: the next one past the limit is refused, never sent", async () => {
    const up = upstream();
    const { tool, limitName } = refundTool(up.url);
    const name = tool.name as string;
    await register(tool);
    const customer = unique("cus");
    await up.script({ kind: "invalid_json" });
    const first = await refund(await newRun(name, customer), name, 800);
    expect(first.body.results[0]).toMatchObject({ status: "failed", code: "invalid_output" });
    expect(await usage(limitName, customer)).toMatchObject({ used: 800, remaining: 200 });
    const second = await refund(await newRun(name, customer), name, 300);
    expect(second.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });
    // The limit's sweep asks the operation how it stands: "held", so nothing is released.
    const { tenantId } = await testTenant();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3 * 60_000);
    await runDurableObjectAlarm(limitStub(tenantId, limitName, customer));
    expect(await usage(limitName, customer)).toMatchObject({ used: 800, remaining: 200 });
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([800]);
  });

  it("over a limit with over: approve → a person decides; a rejection releases the reservation", async () => {
    const up = upstream();
    const { tool, limitName } = refundTool(up.url, { over: "approve" });
    const name = tool.name as string;
    await register(tool);
    const customer = unique("cus");
    expect((await refund(await newRun(name, customer), name, 900)).body.results[0].status).toBe(
      "succeeded",
    );
    const waiting = (await refund(await newRun(name, customer), name, 200, unique("c"), 0)).body
      .results[0];
    expect(waiting.status).toBe("awaiting_approval");
    expect((await usage(limitName, customer)).used).toBe(1100);
    // The approver sees the limit as it stands, this call counted.
    const asked = await api("GET", `/v1/approvals/${waiting.operation_id}`);
    expect(asked.body.limits).toEqual([
      expect.objectContaining({
        name: limitName,
        subject: perCustomer(customer),
        amount: 200,
        usage: expect.objectContaining({ used: 1100, max: 1000, remaining: 0 }),
      }),
    ]);
    const rejected = await api("POST", `/v1/operations/${waiting.operation_id}/reject`, {
      reason: "over the daily limit",
    });
    expect(rejected.status).toBe(200);
    expect((await usage(limitName, customer)).used).toBe(900);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a crash between reserve and the start's commit: a re-post counts once; never re-posted, the sweep releases it", async () => {
    const up = upstream();
    const { tool, limitName } = refundTool(up.url);
    const name = tool.name as string;
    await register(tool);
    const customer = unique("cus");
    const runId = await newRun(name, customer);
    const { tenantId } = await testTenant();
    // The operation id a call of 400 gets (asked of the run without creating anything: a cancel-free peek).
    const posted = await refund(runId, name, 400, "c1");
    const operationId = posted.body.results[0].operation_id as string;
    expect((await usage(limitName, customer)).used).toBe(400);
    // As if it had reserved and crashed before its first row: reserving again is a no-op.
    const claim = {
      name: limitName,
      subject: perCustomer(customer),
      amount: 400,
      max: 1000,
      windowMs: DAY,
      over: "refuse",
    };
    const again = await limitStub(tenantId, limitName, customer).reserve({
      ...claim,
      tenantId,
      operationId,
    });
    expect(again).toMatchObject({ ok: true, value: { kind: "reserved", already: true } });
    const repost = await refund(runId, name, 400, "c1");
    expect(repost.body.results[0].status).toBe("succeeded");
    expect((await usage(limitName, customer)).used).toBe(400);
    expect((await up.state()).effects).toHaveLength(1);

    // A reservation whose operation never started (crashed, never re-posted): held until the sweep asks.
    const orphan = `op_${"0".repeat(31)}1`;
    await limitStub(tenantId, limitName, customer).reserve({
      ...claim,
      amount: 500,
      tenantId,
      operationId: orphan,
    });
    expect((await usage(limitName, customer)).used).toBe(900);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3 * 60_000);
    expect(await runDurableObjectAlarm(limitStub(tenantId, limitName, customer))).toBe(true);
    expect((await usage(limitName, customer)).used).toBe(400);
  });

  it("refused at PUT: a summed field the schema does not have, or an unknown field", async () => {
    const { tool } = refundTool("http://127.0.0.1:1", { sum: "amout" });
    const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
    expect(put.status).toBe(422);
    expect(put.body.code).toBe("invalid_manifest");
    expect(put.body.detail).toContain("amout");
    const { tool: extra } = refundTool("http://127.0.0.1:1", { per: "customer" });
    const refused = await api("PUT", `/v1/tools/${extra.name as string}`, extra);
    expect([refused.status, refused.body.code]).toEqual([422, "invalid_manifest"]);
  });
});
