// Shadow runs (issue 22), from the side of a team that points an agent at production "just to see":
// every write of a shadow run goes through the gate, limits, approval and locks, then only to its
// tool's sandbox (two fault-injecting upstream namespaces: production and sandbox), and is recorded
// with the production request it would have sent, secrets named, never valued.
import { describe, expect, it } from "vitest";
import demoTools from "../../demo/tools.json";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  testTenant,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { consolePage } from "../support/console-page.ts";

const SECRET_VALUE = `sk_live_${unique("shadowsecret")}`;
const secretName = unique("SHOP_KEY")
  .toUpperCase()
  .replace(/[^A-Z0-9_]/g, "_");

async function withSecret() {
  await testTenant();
  const put = await api("PUT", `/v1/secrets/${secretName}`, { value: SECRET_VALUE });
  expect([200, 201]).toContain(put.status);
}

/** A charge tool aimed at `prod`, with its sandbox (base_url at `sandbox`, or a fixed result). */
function chargeTool(prodUrl: string, sandbox: Record<string, unknown> | null, extra = {}) {
  return manifest({
    url: prodUrl,
    request: {
      method: "POST",
      url: `${prodUrl}/charges`,
      headers: { Authorization: `Bearer {secret:${secretName}}` },
    },
    ...(sandbox ? { sandbox } : {}),
    ...extra,
  });
}

async function register(tool: Record<string, unknown>) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  expect(put.status, JSON.stringify(put.body)).toBe(201);
}

async function newRun(tools: string[], mode?: string) {
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools,
    context: { customer_id: "cus_1" },
    ...(mode ? { mode } : {}),
  });
  expect(run.status, JSON.stringify(run.body)).toBe(201);
  // The creating answer says what was created.
  expect(run.body.mode).toBe(mode ?? "live");
  return run.body.run_id as string;
}

const charge = (runId: string, name: string, amount = 100, id = unique("call"), wait = 5) =>
  turn(runId, [{ id, name, arguments: { amount, currency: "usd" } }], wait);

/** No secret value anywhere in what the API answered. */
const noSecretIn = (...answers: unknown[]) => {
  for (const answer of answers) {
    expect(JSON.stringify(answer)).not.toContain(SECRET_VALUE);
    expect(JSON.stringify(answer)).not.toContain("sk_demo_");
  }
};

async function expectWouldHaveSent(operationId: string, prodUrl: string, amount: number) {
  const view = await operation(operationId);
  expect(view.body).toMatchObject({
    phase: "recorded",
    shadow: true,
    result: { status: "succeeded" },
    would_have_sent: {
      method: "POST",
      url: `${prodUrl}/charges`,
      headers: {
        Authorization: `Bearer {secret:${secretName}}`,
        "Idempotency-Key": view.body.idempotency_key,
        "Content-Type": "application/json",
      },
      body: JSON.stringify({ amount, currency: "usd" }),
    },
  });
  noSecretIn(view.body);
  return view.body;
}

describe("shadow runs", () => {
  it("nothing in a shadow run reaches production: a plain, a retried, an approved and a locked write go to the sandbox only, a result-only sandbox answers itself, each recorded with its would-be request", async () => {
    await withSecret();
    const prod = upstream();
    const sandbox = upstream();
    const reads = upstream();
    const plain = chargeTool(prod.url, { base_url: sandbox.url });
    const approved = chargeTool(prod.url, { base_url: sandbox.url }, { approval: "always" });
    const locked = chargeTool(prod.url, { base_url: sandbox.url }, { resource: "card:{currency}" });
    const fixed = chargeTool(prod.url, { result: { id: "ch_shadow" } });
    const read = manifest({
      url: reads.url,
      risk: "read",
      request: { method: "GET", url: `${reads.url}/balance` },
      output_schema: { type: "object" },
      idempotency: { mode: "none" },
    });
    for (const tool of [plain, approved, locked, fixed, read]) await register(tool);
    const names = [plain, approved, locked, fixed, read].map((t) => t.name as string);
    const runId = await newRun(names, "shadow");
    expect((await api("GET", `/v1/runs/${runId}`)).body.mode).toBe("shadow");

    // A read runs as usual (against its own upstream).
    const balance = await turn(runId, [
      { id: "r1", name: read.name as string, arguments: { amount: 1, currency: "usd" } },
    ]);
    expect(balance.body.results[0]).toMatchObject({ status: "succeeded" });
    expect((await reads.state()).requests).toHaveLength(1);

    // 1. A plain write: the model reads an ordinary result, from the sandbox.
    const first = await charge(runId, plain.name as string, 100);
    expect(first.status).toBe(200);
    expect(first.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: expect.any(String) },
    });
    await expectWouldHaveSent(first.body.results[0].operation_id, prod.url, 100);

    // 2. A retried write: 503 then 200 at the sandbox; the retry goes to the sandbox too.
    await sandbox.script({ kind: "status", status: 503 });
    const retried = await charge(runId, plain.name as string, 200);
    expect(retried.status).toBe(202);
    const retriedOp = retried.body.results[0].operation_id as string;
    expect((await operation(retriedOp)).body.phase).toBe("retry_scheduled");
    expect(await fireAlarm(retriedOp)).toBe(true);
    await expectWouldHaveSent(retriedOp, prod.url, 200);

    // 3. An approval-required write: marked shadow for the approver, sent to the sandbox once approved.
    const waiting = await charge(runId, approved.name as string, 300, unique("call"), 0);
    expect(waiting.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    const approvalOp = waiting.body.results[0].operation_id as string;
    const inbox = await api("GET", "/v1/approvals?state=pending");
    expect(inbox.body.items.find((i: any) => i.operation_id === approvalOp)).toMatchObject({
      shadow: true,
    });
    const decided = await api("POST", `/v1/operations/${approvalOp}/approve`, {});
    expect(decided.status).toBe(200);
    expect(decided.body.approval).toMatchObject({ state: "approved", shadow: true });
    expect((await operation(approvalOp, 5)).body.phase).toBe("recorded");
    await expectWouldHaveSent(approvalOp, prod.url, 300);

    // 4. Two locked writes on one resource: serialized by the lock, both to the sandbox.
    const both = await turn(
      runId,
      [
        {
          id: unique("l"),
          name: locked.name as string,
          arguments: { amount: 400, currency: "usd" },
        },
        {
          id: unique("l"),
          name: locked.name as string,
          arguments: { amount: 500, currency: "usd" },
        },
      ],
      10,
    );
    expect(both.status).toBe(200);
    for (const [i, amount] of [400, 500].entries())
      await expectWouldHaveSent(both.body.results[i].operation_id, prod.url, amount);

    // 5. A result-only sandbox: answered with its declared result, sent nowhere.
    const answered = await charge(runId, fixed.name as string, 600);
    expect(answered.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: "ch_shadow" },
    });
    await expectWouldHaveSent(answered.body.results[0].operation_id, prod.url, 600);

    // Production received nothing; the sandbox exactly the expected writes, under production paths.
    expect((await prod.state()).requests).toHaveLength(0);
    const seen = (await sandbox.state()).requests;
    const prodPath = `${new URL(prod.url).pathname}/charges`;
    const sent = seen.map((r) => [r.path, r.body.amount, r.fault] as const);
    expect(sent.slice(0, 4)).toEqual([
      [prodPath, 100, "ok"],
      [prodPath, 200, "status"],
      [prodPath, 200, "ok"],
      [prodPath, 300, "ok"],
    ]);
    // The two locked writes of one turn, in whichever order the lock granted them.
    expect(sent.slice(4).sort((a, b) => a[1] - b[1])).toEqual([
      [prodPath, 400, "ok"],
      [prodPath, 500, "ok"],
    ]);
    expect(seen[1]!.key).toBe(seen[2]!.key);
    expect((await sandbox.state()).maxInFlight[prodPath]).toBe(1);

    // The trace marks the shadow writes; no API answer holds the secret.
    // Every tenant-plane event of a shadow write says so (webhooks must not take it for a real charge).
    const recordedOf = async () =>
      (
        (await api("GET", "/v1/events?type=operation.recorded&limit=500")).body.events as any[]
      ).filter((e) => e.run_id === runId && e.tool !== read.name);
    let recorded = await recordedOf();
    for (let i = 0; i < 200 && recorded.length < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25)); // the queue consumer runs in the pool
      recorded = await recordedOf();
    }
    expect(recorded).toHaveLength(6);
    expect(recorded.every((e) => e.data.shadow === true)).toBe(true);

    const events = await trace(runId);
    expect(events.filter((e) => e.type === "validated" && e.shadow === true)).toHaveLength(6);
    noSecretIn(events, first.body, retried.body, both.body, answered.body, inbox.body);

    // The console lists each write's would-be request, secrets by name.
    const html = await consolePage(`/console/runs/${runId}`);
    expect(html).toContain("Would have sent");
    expect(html).toMatch(/<dt>Mode<\/dt>\s*<dd>shadow: writes go to each tool/);
    // Six would-be requests in the list (each call's own detail below names its production target too).
    const list = html.slice(html.indexOf('data-role="would-have-sent"'));
    expect(list.slice(0, list.indexOf("</ol>")).split(`POST ${prod.url}/charges`)).toHaveLength(7);
    expect(html).toContain(`Authorization: Bearer {secret:${secretName}}`);
    expect(html).not.toContain(SECRET_VALUE);
  });

  it("limits across runs count a shadow run in its own ledger, and a live run of the same tenant and business key is unaffected: it reaches production", async () => {
    await withSecret();
    const prod = upstream();
    const sandbox = upstream();
    const limit = unique("daily_spend");
    const tool = chargeTool(
      prod.url,
      { base_url: sandbox.url },
      {
        operation_scope: "tenant",
        operation_key: ["amount"],
        limits_across_runs: [
          { name: limit, subject: "tenant", window: "24h", sum: "amount", max: 1000 },
        ],
      },
    );
    await register(tool);
    const shadowRun = await newRun([tool.name as string], "shadow");
    const liveRun = await newRun([tool.name as string]);

    const shadowed = await charge(shadowRun, tool.name as string, 800);
    expect(shadowed.body.results[0]).toMatchObject({ status: "succeeded" });
    // Over the shadow ledger's max: refused as a live run would be.
    const over = await charge(shadowRun, tool.name as string, 300);
    expect(over.body.results[0]).toMatchObject({ status: "rejected", code: "policy_denied" });

    // The live run: the same business key (tenant scope, amount 800) is a new operation, sent to production.
    const live = await charge(liveRun, tool.name as string, 800);
    expect(live.body.results[0]).toMatchObject({ status: "succeeded" });
    expect(live.body.results[0].operation_id).not.toBe(shadowed.body.results[0].operation_id);
    expect((await operation(live.body.results[0].operation_id)).body).toMatchObject({
      shadow: false,
      would_have_sent: null,
    });
    expect((await prod.state()).requests.map((r) => r.body.amount)).toEqual([800]);
    expect((await prod.state()).requests[0]!.authorization).toBe(`Bearer ${SECRET_VALUE}`);
    expect((await sandbox.state()).requests.map((r) => r.body.amount)).toEqual([800]);
  });

  it("a write tool without a sandbox is refused in a shadow run (shadow_unsupported), nothing sent; a mode other than live or shadow is a typed 400", async () => {
    const prod = upstream();
    const tool = manifest({ url: prod.url });
    await register(tool);
    const runId = await newRun([tool.name as string], "shadow");
    const refused = await charge(runId, tool.name as string, 100);
    expect(refused.body.results[0]).toMatchObject({
      status: "rejected",
      code: "shadow_unsupported",
    });
    expect((await prod.state()).requests).toHaveLength(0);

    const bad = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
      mode: "dry",
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_request");
  });

  it("PUT checks a sandbox like any URL: on the allow-list, a result the output schema accepts, writes only", async () => {
    const prod = upstream();
    const put = (tool: Record<string, unknown>) =>
      api("PUT", `/v1/tools/${tool.name as string}`, tool);
    expect(
      await put(
        manifest({ url: prod.url, sandbox: { base_url: "https://sandbox.not-allowed.example" } }),
      ),
    ).toMatchObject({ status: 403, body: { code: "upstream_not_allowed" } });
    const wrongShape = await put(manifest({ url: prod.url, sandbox: { result: { no_id: true } } }));
    expect(wrongShape).toMatchObject({ status: 422, body: { code: "invalid_manifest" } });
    expect(wrongShape.body.detail).toMatch(/sandbox\.result/);
    const onRead = await put(
      manifest({
        url: prod.url,
        risk: "read",
        idempotency: { mode: "none" },
        sandbox: { result: { id: "x" } },
      }),
    );
    expect(onRead).toMatchObject({ status: 422, body: { code: "invalid_manifest" } });
    expect(
      await put(manifest({ url: prod.url, sandbox: { base_url: "http://127.0.0.1:1/x?q=1" } })),
    ).toMatchObject({ status: 422, body: { code: "invalid_manifest" } });
  });
});

describe("the demo shop in shadow mode", () => {
  it("demo/tools.json registers with its sandboxes; a shadow run's charge and email reach neither the shop nor anyone, the charge lands in the shop's sandbox", async () => {
    await testTenant();
    const prod = upstream();
    const origin = new URL(prod.url).origin;
    const text = JSON.stringify(demoTools)
      .replaceAll("{{UPSTREAM_ORIGIN}}", origin)
      .replaceAll("{{UPSTREAM}}", prod.url);
    const tools = JSON.parse(text) as Array<Record<string, unknown>>;
    const value = `sk_demo_${unique("v")}`;
    expect((await api("PUT", "/v1/secrets/SHOP_API_KEY", { value })).status).toBeLessThan(300);
    for (const tool of tools) await register(tool);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: ["charge_card", "send_email"],
      context: { customer_id: "cus_1", charge_limit: 10_000 },
      mode: "shadow",
    });
    expect(run.status).toBe(201);
    const res = await turn(run.body.run_id, [
      { id: "c1", name: "charge_card", arguments: { amount: 1200, currency: "usd" } },
      { id: "e1", name: "send_email", arguments: { subject: "Receipt", body: "Thanks" } },
    ]);
    expect(res.body.results.map((r: any) => r.status)).toEqual(["succeeded", "succeeded"]);
    expect(res.body.results[1].result).toEqual({ id: "em_shadow", status: "queued" });
    expect((await prod.state()).requests).toHaveLength(0);
    const sandbox = await (
      await fetch(`${origin}/_control/state?ns=shop-sandbox`)
    ).json<{ requests: Array<{ path: string; authorization: string }> }>();
    const mine = sandbox.requests.filter((r) => r.path.startsWith(new URL(prod.url).pathname));
    expect(mine.map((r) => r.path)).toEqual([`${new URL(prod.url).pathname}/charges`]);
    noSecretIn(res.body, (await operation(res.body.results[0].operation_id)).body);
  });
});
