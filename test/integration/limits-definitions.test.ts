// Limits across runs where they meet other features (issue 31 item 4; audit N4, N5, N7), from the
// side of an operator and of an agent: a limit name has one definition per tenant (a contradicting
// PUT is refused, nothing stored; a window shortened by re-PUT never lets the longer one overshoot);
// a write held for approval counts until it is done, so six emails held past a 1 h window of 3 send
// at most 3 in the hour; subjects are named with their kind, and a deploy adopts live reservations.
import { afterEach, describe, expect, it, vi } from "vitest";
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import * as stubs from "../../src/durable/stubs.ts";
import type { Env } from "../../src/durable/env.ts";
import { api, manifest, operation, testTenant, turn, unique, upstream } from "../support/api.ts";
import { refundTool } from "../support/limits.ts";

const MIN = 60_000;
const H = 60 * MIN;

/** The refund tool of limits-across-runs.test.ts with this one limit. */
const limitedTool = (url: string, limit: Record<string, unknown>) => refundTool(url, limit).tool;
/** A limit `name`: 1,000 per customer per 24 h on the sum of `amount`, unless `over` says otherwise. */
const spend = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  subject: "context.customer_id",
  window: "24h",
  sum: "amount",
  max: 1000,
  ...over,
});
const put = (tool: Record<string, unknown>) => api("PUT", `/v1/tools/${tool.name as string}`, tool);
async function newRun(tool: string, context: Record<string, unknown>, user = "u1") {
  const run = await api("POST", "/v1/runs", {
    user: { id: user, scopes: [] },
    tools: [tool],
    context,
  });
  expect(run.status).toBe(201);
  return run.body.run_id as string;
}
const call = (runId: string, tool: string, args: Record<string, unknown>, wait = 3) =>
  turn(runId, [{ id: unique("c"), name: tool, arguments: args }], wait);
const resultOf = async (runId: string, tool: string, args: Record<string, unknown>) =>
  (await call(runId, tool, args)).body.results[0];
/** The limit's sweep, as its alarm runs it: asks each operation not yet known recorded how it stands. */
async function sweep(name: string, subject: string) {
  const { tenantId } = await testTenant();
  const stub = stubs.limitStub(env as unknown as Env, tenantId, name, subject) as any;
  await runDurableObjectAlarm(stub);
}
function clockAt(ms: number) {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(ms);
}

afterEach(() => vi.useRealTimers());

describe("a limit name has one definition per tenant (audit N4)", () => {
  it("a tenant whose other tools declare no limit across runs registers one that does (the check reads every stored manifest)", async () => {
    // A plain tool first: its stored manifest has no limits_across_runs (the bench found the
    // check refusing every later limited tool with a 500 here).
    expect((await put(manifest({ url: "http://127.0.0.1:1" }))).status).toBe(201);
    expect((await put(limitedTool("http://127.0.0.1:1", spend(unique("spend"))))).status).toBe(201);
  });

  it("the 24 h / 1 h shared name: the second tool's PUT is refused 422 naming the first, nothing stored; the only user may change it", async () => {
    const limit = unique("spend");
    const card = limitedTool("http://127.0.0.1:1", spend(limit));
    expect((await put(card)).status).toBe(201);
    const wallet = limitedTool("http://127.0.0.1:1", spend(unique("other")));
    expect((await put(wallet)).status).toBe(201);

    const hourly = { ...wallet, limits_across_runs: [spend(limit, { window: "1h" })] };
    const refused = await put(hourly);
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({
      code: "limit_conflict",
      limit,
      tool: card.name,
      fields: ["window"],
    });
    expect(refused.body.detail).toContain(`already defined by the tool ${card.name as string}`);
    expect(refused.body.detail).toContain("window 1h here, 24h there");
    // Nothing stored: the wallet is as it was.
    const stored = await api("GET", `/v1/tools/${wallet.name as string}`);
    expect(stored.body).toMatchObject({ version: 1, manifest: wallet });

    // Per user under a name counted per customer; a count under a sum; another max.
    for (const [over, fields] of [
      [{ subject: "user" }, ["subject"]],
      [{ sum: undefined, count: true }, ["measure"]],
      [{ max: 5000 }, ["max"]],
    ] as const) {
      const other = await put({ ...wallet, limits_across_runs: [spend(limit, over)] });
      expect([other.status, other.body.code, other.body.fields]).toEqual([
        422,
        "limit_conflict",
        fields,
      ]);
    }
    expect((await api("GET", `/v1/tools/${wallet.name as string}`)).body.version).toBe(1);

    // The same definition (over is each tool's own) is accepted; then neither may change it alone.
    const same = await put({ ...wallet, limits_across_runs: [spend(limit, { over: "approve" })] });
    expect(same.status).toBe(200);
    const cardHourly = await put({ ...card, limits_across_runs: [spend(limit, { window: "1h" })] });
    expect([cardHourly.status, cardHourly.body.tool]).toEqual([422, wallet.name]);
    // Once the wallet no longer uses it, the card — its only user — may change it.
    expect((await put(wallet)).status).toBe(200);
    const alone = await put({ ...card, limits_across_runs: [spend(limit, { window: "1h" })] });
    expect(alone.status).toBe(200);
  });

  it("a window shortened by re-PUT (runs made before keep 24 h): the 1 h calls never make the 24 h limit forget, so it is never overshot", async () => {
    const up = upstream();
    const limit = unique("spend");
    const daily = limitedTool(up.url, spend(limit));
    const name = daily.name as string;
    expect((await put(daily)).status).toBe(201);
    const customer = unique("cus");
    const before = await newRun(name, { customer_id: customer });
    // Its only user shortens the window; a run made now has the 1 h definition.
    expect(
      (await put({ ...daily, limits_across_runs: [spend(limit, { window: "1h" })] })).status,
    ).toBe(200);
    const after = await newRun(name, { customer_id: customer });

    const t0 = Date.now();
    expect((await resultOf(before, name, { amount: 1000 })).status).toBe("succeeded");
    clockAt(t0 + 2 * H);
    await sweep(limit, `context.customer_id:${customer}`);
    // Under 1 h, the 1,000 has left the window.
    expect((await resultOf(after, name, { amount: 10 })).status).toBe("succeeded");
    // Under 24 h, it has not: 1,000 + 10 + 900 would be 1,910 of 1,000.
    const over = await resultOf(before, name, { amount: 900 });
    expect(over).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([1000, 10]);
  });
});

describe("a held write counts until it is done (audit N5)", () => {
  it("six emails (3 per recipient per hour, approval always, expiring in 2 h): three proposed at 0, three at 61 min, all approved at 62 min → 3 sent in the hour; the others refused, told why", async () => {
    const up = upstream();
    const limit = unique("emails");
    const email = manifest({
      url: up.url,
      description: "Email the recipient.",
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { to: { type: "string" }, text: { type: "string" } },
        required: ["to", "text"],
      },
      output_schema: { type: "object" },
      request: { method: "POST", url: `${up.url}/emails` },
      bind: { to: "context.recipient" },
      approval: { mode: "always", expires_in_ms: 2 * H },
      limits_across_runs: [
        { name: limit, subject: "context.recipient", window: "1h", count: true, max: 3 },
      ],
    });
    const name = email.name as string;
    expect((await put(email)).status).toBe(201);
    const recipient = unique("ann");
    const subject = `context.recipient:${recipient}`;
    const runId = await newRun(name, { recipient });
    /** n new emails (each its own text: the same one again would be the same operation). */
    const propose = async (n: number) => {
      const calls = Array.from({ length: n }, () => ({
        id: unique("e"),
        name,
        arguments: { text: unique("hello") },
      }));
      return (await turn(runId, calls, 0)).body.results as Array<Record<string, any>>;
    };

    const t0 = Date.now();
    clockAt(t0);
    const first = await propose(3);
    expect(first.map((r) => r.status)).toEqual(Array(3).fill("awaiting_approval"));
    clockAt(t0 + 2 * MIN);
    await sweep(limit, subject); // asks the three: not sent yet

    clockAt(t0 + 61 * MIN);
    const second = await propose(3);
    expect(second.map((r) => [r.status, r.code])).toEqual(
      Array(3).fill(["rejected", "policy_denied"]),
    );
    expect(second[0]!.message).toContain("3 is already used or reserved and 0 remains");
    expect(second[0]!.message).toContain(
      "3 of the calls counted have not finished yet (waiting for approval, a lock or a retry, or their outcome is unknown); each counts until it finishes and for 1 hour after",
    );
    expect((await api("GET", `/v1/limits/${limit}/${subject}`)).body).toMatchObject({
      used: 3,
      held: 3,
      waiting: 3,
      next_free_at: null,
    });

    clockAt(t0 + 62 * MIN);
    for (const r of first)
      expect((await api("POST", `/v1/operations/${r.operation_id}/approve`, {})).status).toBe(200);
    for (const r of second)
      expect((await api("POST", `/v1/operations/${r.operation_id}/approve`, {})).status).toBe(409);
    for (const r of first)
      expect((await operation(r.operation_id, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(3);

    // Sent at 62 min: they count until 122 min, when the next one may be reserved.
    clockAt(t0 + 63 * MIN);
    await sweep(limit, subject); // learns when they were recorded
    const later = (await propose(1))[0]!;
    expect(later).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(later.message).toContain(
      `frees at ${new Date(t0 + 122 * MIN).toISOString()} at the earliest`,
    );
    clockAt(t0 + 122 * MIN + 1);
    expect((await propose(1))[0]!.status).toBe("awaiting_approval");
    expect((await up.state()).effects).toHaveLength(3);
  });
});

describe("subjects are named with their kind (audit N7)", () => {
  it("user cus_1, customer cus_1, a user named tenant and the tenant: four buckets under one name", async () => {
    const up = upstream();
    const limit = unique("calls");
    const once = (subject: string) =>
      spend(limit, { subject, sum: undefined, count: true, max: 1 });
    const tool = limitedTool(up.url, once("context.customer_id"));
    const name = tool.name as string;
    expect((await put(tool)).status).toBe(201);
    const id = unique("cus");
    // Runs keep the definition they were made with; the tool's only user changes its subject.
    const customer = await newRun(name, { customer_id: id }, "u1");
    expect((await put({ ...tool, limits_across_runs: [once("user")] })).status).toBe(200);
    const user = await newRun(name, { customer_id: unique("c") }, id);
    const userTenant = await newRun(name, { customer_id: unique("c") }, "tenant");
    expect((await put({ ...tool, limits_across_runs: [once("tenant")] })).status).toBe(200);
    const tenant = await newRun(name, { customer_id: unique("c") }, "u2");

    for (const runId of [customer, user, userTenant, tenant])
      expect((await resultOf(runId, name, { amount: 1 })).status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(4);
    for (const subject of [`context.customer_id:${id}`, `user:${id}`, "user:tenant", "tenant"])
      expect((await api("GET", `/v1/limits/${limit}/${subject}`)).body).toMatchObject({
        subject,
        used: 1,
      });
    const bare = await api("GET", `/v1/limits/${limit}/${id}`);
    expect([bare.status, bare.body.code]).toEqual([404, "not_found"]);
    expect(bare.body.detail).toContain("context.customer_id:cus_1");
  });

  it("a deploy loses no live reservation: the first reserve under the new key adopts what the bare key held, and the sweep then asks its operation", async () => {
    const up = upstream();
    const limit = unique("spend");
    const tool = limitedTool(up.url, spend(limit));
    const name = tool.name as string;
    expect((await put(tool)).status).toBe(201);
    const customer = unique("cus");
    const { tenantId } = await testTenant();
    // As before subjects were named with their kind: 900 held under the bare customer id, by an
    // operation in flight at the deploy that never started (the sweep releases it later).
    const legacy = stubs.limitStub(env as unknown as Env, tenantId, limit, customer) as any;
    const orphan = `op_${"0".repeat(31)}2`;
    const held = await legacy.reserve({
      name: limit,
      subject: customer,
      amount: 900,
      max: 1000,
      windowMs: 24 * H,
      over: "refuse",
      tenantId,
      operationId: orphan,
    });
    expect(held).toMatchObject({ ok: true, value: { kind: "reserved" } });

    const runId = await newRun(name, { customer_id: customer });
    const refused = await resultOf(runId, name, { amount: 300 });
    expect(refused).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(refused.message).toContain("900 is already used or reserved and 100 remains");
    expect((await up.state()).effects).toHaveLength(0);
    // The sweep asks the adopted reservation's operation at once: it never started → released.
    await sweep(limit, `context.customer_id:${customer}`);
    expect(
      (await api("GET", `/v1/limits/${limit}/context.customer_id:${customer}`)).body,
    ).toMatchObject({ used: 0 });
    expect((await resultOf(runId, name, { amount: 250 })).status).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([250]);
  });
});
