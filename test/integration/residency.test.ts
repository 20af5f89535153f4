// Data residency (issue 19 item 3) through the public API: a tenant created with
// `"jurisdiction": "eu"` has every object it touches — tenant, run, operations, lock — made through
// the jurisdiction namespace, on every path (new write, approval, locked write, check_status, the
// console). workerd does not implement `DurableObjectNamespace.jurisdiction()` ("Jurisdiction
// restrictions are not implemented in workerd"), so what is observed here is the placement
// (durable/placement.ts, through its test-only observer): which jurisdiction each object was made
// in, and that the development emulation keeps an EU object and a default one of the same name
// apart. That production then stores the data in the EU is Cloudflare's promise, not observed here.
// The tenant plane's queues are observed through their bindings: the test env's queue bindings are
// the very objects the Worker and its Durable Objects send on (the pool runs them in one isolate).
import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { observePlacements, type Placement } from "../../src/durable/placement.ts";
import worker from "../../src/index.ts";
import { ADMIN, ALL_SCOPES, api, manifest, unique, until, upstream } from "../support/api.ts";

const admin = { Authorization: `Bearer ${ADMIN}` };

async function tenantIn(jurisdiction: unknown) {
  const created = await api(
    "POST",
    "/v1/admin/tenants",
    jurisdiction === undefined ? { name: unique("t") } : { name: unique("t"), jurisdiction },
    admin,
  );
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const tenantId = created.body.tenant_id as string;
  const issued = await api(
    "POST",
    `/v1/admin/tenants/${tenantId}/keys`,
    { name: "ops", scopes: ALL_SCOPES },
    admin,
  );
  expect(issued.status).toBe(201);
  const auth = { Authorization: `Bearer ${issued.body.key as string}` };
  return { tenantId, key: issued.body.key as string, auth, created: created.body };
}

type Tenant = Awaited<ReturnType<typeof tenantIn>>;

const orderSchema = {
  type: "object",
  additionalProperties: false,
  properties: { order_id: { type: "string" }, amount: { type: "integer" } },
  required: ["order_id", "amount"],
};

/** A write, an approval-gated write and a locked write, registered and offered in one run. */
async function flowRun(t: Tenant, url: string) {
  const write = manifest({ url });
  const gated = manifest({
    url,
    risk: "irreversible_write",
    requires_scopes: ["payments:charge"],
  });
  const locked = manifest({
    url,
    input_schema: orderSchema,
    resource: "order:{order_id}",
    request: { method: "POST", url: `${url}/orders/{order_id}/refunds` },
  });
  for (const tool of [write, gated, locked])
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, t.auth)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: [write.name, gated.name, locked.name],
    },
    t.auth,
  );
  expect(run.status, JSON.stringify(run.body)).toBe(201);
  return {
    runId: run.body.run_id as string,
    runToken: run.body.run_token as string,
    write: write.name as string,
    gated: gated.name as string,
    locked: locked.name as string,
  };
}

const turnAs = (
  runId: string,
  auth: Record<string, string>,
  calls: Array<{ id: string; name: string; arguments: unknown }>,
  waitSeconds = 5,
) =>
  api(
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    { calls },
    { ...auth, Prefer: `wait=${waitSeconds}` },
  );

async function consolePage(path: string, key: string) {
  const fetcher = (exports as unknown as { default: Fetcher }).default;
  const form = await fetcher.fetch(new Request("http://toolgate.test/console/sign-in"));
  const formText = await form.text();
  const csrf = /name="csrf" value="([^"]*)"/.exec(formText)![1]!;
  const login = form.headers
    .getSetCookie()
    .find((c) => c.startsWith("tg_console_login="))!
    .split(";")[0]!;
  const signedIn = await fetcher.fetch(
    new Request("http://toolgate.test/console/sign-in", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: login },
      body: new URLSearchParams({ csrf, next: "/console", api_key: key }).toString(),
      redirect: "manual",
    }),
  );
  expect(signedIn.status).toBe(303);
  const session = signedIn.headers
    .getSetCookie()
    .find((c) => c.startsWith("tg_console="))!
    .split(";")[0]!;
  const page = await fetcher.fetch(
    new Request(`http://toolgate.test${path}`, { headers: { Cookie: session } }),
  );
  return { status: page.status, text: await page.text() };
}

/** The full flow of the issue: new write, approval, locked write, check_status, console page. */
async function fullFlow(t: Tenant) {
  const up = upstream();
  const run = await flowRun(t, up.url);
  const wrote = await turnAs(run.runId, t.auth, [
    { id: "w1", name: run.write, arguments: { amount: 100, currency: "usd" } },
  ]);
  expect(wrote.body.results[0]).toMatchObject({ status: "succeeded" });
  const writeOp = wrote.body.results[0].operation_id as string;

  const gated = await turnAs(
    run.runId,
    t.auth,
    [{ id: "g1", name: run.gated, arguments: { amount: 7, currency: "eur" } }],
    0,
  );
  expect(gated.body.results[0]).toMatchObject({ status: "awaiting_approval" });
  const gatedOp = gated.body.results[0].operation_id as string;
  const inbox = await api("GET", "/v1/approvals?state=pending", undefined, t.auth);
  expect(inbox.body.items.map((i: any) => i.operation_id)).toContain(gatedOp);
  const approved = await api("POST", `/v1/operations/${gatedOp}/approve`, {}, t.auth);
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
  const settled = await api(
    "GET",
    `/v1/runs/${run.runId}/turns/${gated.body.turn_id}?wait=5`,
    undefined,
    t.auth,
  );
  expect(settled.body.results[0]).toMatchObject({ status: "succeeded", operation_id: gatedOp });

  const locked = await turnAs(run.runId, t.auth, [
    { id: "l1", name: run.locked, arguments: { order_id: "o1", amount: 3 } },
  ]);
  expect(locked.body.results[0]).toMatchObject({ status: "succeeded" });
  const lockedOp = locked.body.results[0].operation_id as string;

  // The model's check_status, with the run token (the agent's credential) rather than the key.
  const checked = await turnAs(run.runId, { Authorization: `Bearer ${run.runToken}` }, [
    { id: "s1", name: "toolgate_check_status", arguments: { operation_id: gatedOp } },
  ]);
  expect(checked.body.results[0]).toMatchObject({
    status: "succeeded",
    result: { status: "succeeded", operation_id: gatedOp },
  });

  const page = await consolePage(`/console/runs/${run.runId}`, t.key);
  expect(page.status).toBe(200);
  for (const op of [writeOp, gatedOp, lockedOp]) expect(page.text).toContain(op);
  expect((await up.state()).effects).toHaveLength(3);
  return { ...run, ops: [writeOp, gatedOp, lockedOp] };
}

// Every test's placements are recorded; the names each test placed are kept for the ones after it
// (their background work — the queue consumer indexing their events — may place them again later).
let stop: (() => void) | null = null;
let placing: Placement[] = [];
const placedBefore = new Set<string>();
beforeEach(() => {
  const seen: Placement[] = [];
  placing = seen;
  stop = observePlacements((p) => seen.push(p));
});
afterEach(() => {
  stop?.();
  for (const p of placing) placedBefore.add(p.name);
});
/** The placements made since this test began. */
const recordPlacements = () => placing;

/** Every table an object's SQLite storage holds (none: the object was never written). */
const tablesOf = (stub: DurableObjectStub) =>
  runInDurableObject(stub, (_instance: unknown, state: DurableObjectState) =>
    state.storage.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%'",
      )
      .toArray()
      .map((row) => row.name),
  );

describe("data residency", () => {
  it("an EU tenant: every object of a full flow (write, approval, locked write, check_status, console) is made through the EU namespace, none through the default one", async () => {
    const seen = recordPlacements();
    const t = await tenantIn("eu");
    expect(t.created).toMatchObject({ jurisdiction: "eu" });
    expect(t.tenantId).toMatch(/^ten_eu_[0-9A-Z]{26}$/);
    const flow = await fullFlow(t);
    expect(flow.runId).toMatch(/^run_eu_/);
    for (const op of flow.ops) expect(op).toMatch(/^op_eu_[0-9a-f]{32}$/);

    // Nothing at all was made in the default namespace during the flow (the queue consumer and
    // the tenant's inbox included), and every object the flow needs was made in the EU.
    expect(seen.filter((p) => p.jurisdiction !== "eu")).toEqual([]);
    expect(new Set(seen.map((p) => p.via))).toEqual(new Set(["emulated"]));
    const names = (binding: string) =>
      new Set(seen.filter((p) => p.binding === binding).map((p) => p.name));
    expect(names("TENANTS")).toEqual(new Set([t.tenantId]));
    expect(names("RUNS")).toEqual(new Set([flow.runId]));
    for (const op of flow.ops) expect(names("OPERATIONS").has(op)).toBe(true);
    expect(names("LOCKS")).toEqual(new Set([`${t.tenantId}:order:o1`]));

    // The EU objects hold the data; the default namespace's objects of the same names are empty.
    const typed = env as unknown as Record<string, DurableObjectNamespace>;
    const eu = (binding: string, name: string) =>
      typed[binding]!.get(typed[binding]!.idFromName(`jurisdiction:eu:${name}`));
    const plain = (binding: string, name: string) =>
      typed[binding]!.get(typed[binding]!.idFromName(name));
    for (const [binding, name] of [
      ["TENANTS", t.tenantId],
      ["RUNS", flow.runId],
      ["OPERATIONS", flow.ops[0]!],
      ["LOCKS", `${t.tenantId}:order:o1`],
    ] as const) {
      expect((await tablesOf(eu(binding, name))).length, `${binding} in the EU`).toBeGreaterThan(0);
      expect(await tablesOf(plain(binding, name)), `${binding} by default`).toEqual([]);
    }
  }, 30_000);

  it("a tenant without a jurisdiction: the same flow makes every object in the default namespace, with untagged ids, as before", async () => {
    const seen = recordPlacements();
    const t = await tenantIn(undefined);
    expect(t.created).toMatchObject({ jurisdiction: null });
    expect(t.tenantId).toMatch(/^ten_[0-9A-Z]{26}$/);
    const flow = await fullFlow(t);
    expect(flow.runId).toMatch(/^run_[0-9A-Z]{26}$/);
    for (const op of flow.ops) expect(op).toMatch(/^op_[0-9a-f]{32}$/);
    // (The EU tenant of the test before may still be receiving its events: only this tenant's names.)
    const mine = seen.filter(
      (p) =>
        p.name.startsWith(`${t.tenantId}:`) ||
        [t.tenantId, flow.runId, ...flow.ops].includes(p.name),
    );
    // The tenant's index (INDEX, fed by the queue consumer) is placed during the test or just after.
    expect(new Set(mine.map((p) => p.binding).filter((b) => b !== "INDEX"))).toEqual(
      new Set(["TENANTS", "RUNS", "OPERATIONS", "LOCKS"]),
    );
    expect(mine.filter((p) => p.jurisdiction !== null || p.via !== "default")).toEqual([]);
    // The ids are the ones the plain namespace makes for these names.
    const runs = (env as unknown as { RUNS: DurableObjectNamespace }).RUNS;
    const runPlacement = mine.find((p) => p.binding === "RUNS")!;
    expect(runPlacement.id).toBe(runs.idFromName(flow.runId).toString());
  }, 30_000);

  it("an EU tenant's run token and ids reach nothing outside the EU: untagged twins, another tenant's key, and the default namespace's object of the same name", async () => {
    const t = await tenantIn("eu");
    const other = await tenantIn(undefined);
    const up = upstream();
    const run = await flowRun(t, up.url);
    const wrote = await turnAs(run.runId, t.auth, [
      { id: "w1", name: run.write, arguments: { amount: 5, currency: "usd" } },
    ]);
    const op = wrote.body.results[0].operation_id as string;
    expect(op).toMatch(/^op_eu_/);
    const twinRun = run.runId.replace("run_eu_", "run_");
    const twinOp = op.replace("op_eu_", "op_");
    const token = { Authorization: `Bearer ${run.runToken}` };

    // The run token names the EU run: it does not open the untagged twin, nor does the key.
    expect((await api("GET", `/v1/runs/${twinRun}`, undefined, token)).status).toBe(404);
    expect((await api("GET", `/v1/runs/${twinRun}`, undefined, t.auth)).status).toBe(404);
    expect((await api("GET", `/v1/operations/${twinOp}`, undefined, t.auth)).status).toBe(404);
    // Another tenant cannot reach the EU objects by their ids.
    expect((await api("GET", `/v1/runs/${run.runId}`, undefined, other.auth)).status).toBe(404);
    expect((await api("GET", `/v1/operations/${op}`, undefined, other.auth)).status).toBe(404);
    // The model cannot either: check_status with the untagged twin finds nothing.
    const twin = await turnAs(run.runId, token, [
      { id: "s1", name: "toolgate_check_status", arguments: { operation_id: twinOp } },
    ]);
    expect(twin.body.results[0]).toMatchObject({ status: "rejected", code: "not_found" });
    // The EU run is where its data is; the default namespace's object of that very name is empty.
    const runs = (env as unknown as { RUNS: DurableObjectNamespace }).RUNS;
    expect(await tablesOf(runs.get(runs.idFromName(run.runId)))).toEqual([]);
    expect(await tablesOf(runs.get(runs.idFromName(twinRun)))).toEqual([]);
    // A run named by the client's request_id is made in the EU too, and found again by a resend.
    const requested = { user: { id: "u1" }, tools: [run.write], request_id: "r-1" };
    const first = await api("POST", "/v1/runs", requested, t.auth);
    expect(first.body.run_id).toMatch(/^run_eu_[0-9A-Z]{26}$/);
    const again = await api("POST", "/v1/runs", requested, t.auth);
    expect([first.status, again.status, again.body.run_id]).toEqual([201, 200, first.body.run_id]);
    expect((await up.state()).effects).toHaveLength(1);
  }, 30_000);

  it("an unknown jurisdiction is refused with a typed 422 and creates nothing", async () => {
    const seen = recordPlacements();
    for (const jurisdiction of ["mars", "EU", "us", "", 3]) {
      const res = await api(
        "POST",
        "/v1/admin/tenants",
        { name: "x", jurisdiction },
        { Authorization: `Bearer ${ADMIN}` },
      );
      if (typeof jurisdiction === "number") {
        expect(res.status).toBe(400);
        continue;
      }
      expect(res.status, String(jurisdiction)).toBe(422);
      expect(res.body).toMatchObject({ code: "unsupported_jurisdiction" });
    }
    // Nothing new was made: only the objects of earlier tests' tenants may still be placed.
    expect(seen.filter((p) => !placedBefore.has(p.name))).toEqual([]);
  });
});

type Sent = { binding: string; body: any };
const QUEUE_BINDINGS = ["EVENTS", "EVENTS_DLQ", "EVENTS_EU", "EVENTS_EU_DLQ"] as const;

/** Every message sent on the queue bindings from now on (still sent: the consumers run as usual). */
function recordQueues() {
  const sent: Sent[] = [];
  const restore: Array<() => void> = [];
  for (const binding of QUEUE_BINDINGS) {
    const queue = (env as unknown as Record<string, any>)[binding];
    const { send, sendBatch } = queue;
    queue.send = (body: unknown, options?: unknown) => {
      sent.push({ binding, body });
      return send.call(queue, body, options);
    };
    queue.sendBatch = (messages: Array<{ body: unknown }>, options?: unknown) => {
      for (const message of messages) sent.push({ binding, body: message.body });
      return sendBatch.call(queue, messages, options);
    };
    restore.push(() => Object.assign(queue, { send, sendBatch }));
  }
  return { sent, stop: () => restore.forEach((undo) => undo()) };
}

const tenantOf = (body: any): string | undefined => body?.event?.tenant_id ?? body?.tenant_id;

describe("data residency of the tenant plane's queues", () => {
  it("an EU tenant's events, its webhook retries and its dead letters go only through the EU queues; a default tenant's only through the default ones", async () => {
    const queues = recordQueues();
    try {
      const t = await tenantIn("eu");
      const plain = await tenantIn(undefined);
      const receiver = upstream();
      await receiver.script(...Array.from({ length: 10 }, () => ({ kind: "status", status: 500 })));
      const hook = await api(
        "PUT",
        "/v1/webhooks/eu-hook",
        { url: `${receiver.url}/webhooks/eu`, events: ["operation.recorded"], format: "standard" },
        t.auth,
      );
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      const up = upstream();
      const writes = [] as string[];
      for (const tenant of [t, plain]) {
        const run = await flowRun(tenant, up.url);
        const wrote = await turnAs(run.runId, tenant.auth, [
          { id: "w1", name: run.write, arguments: { amount: 3, currency: "usd" } },
        ]);
        expect(wrote.body.results[0]).toMatchObject({ status: "succeeded" });
        writes.push(wrote.body.results[0].operation_id);
      }
      // The EU queue's consumer stored the events at the tenant and indexed them, and the failed
      // webhook delivery queued its retry.
      const feed = await until(
        async () =>
          ((await api("GET", "/v1/events?limit=100", undefined, t.auth)).body.events as any[]).map(
            (e) => e.type,
          ),
        (types) => types.includes("operation.recorded") && types.includes("turn.settled"),
      );
      expect(feed).toEqual(expect.arrayContaining(["operation.recorded", "turn.settled"]));
      const listed = await until(
        async () => (await api("GET", "/v1/operations", undefined, t.auth)).body.operations,
        (ops: any[]) => ops.some((op) => op.operation_id === writes[0]),
      );
      expect(listed.map((op: any) => op.operation_id)).toContain(writes[0]);
      await until(
        async () => queues.sent.filter((s) => s.body?.kind === "delivery"),
        (retries) => retries.some((s) => tenantOf(s.body) === t.tenantId),
      );
      expect((await receiver.state()).requests.length).toBeGreaterThan(0);

      // A dead letter of the EU tenant whose tenant object cannot be reached is parked in the EU's
      // dead-letter queue (through the Worker's queue handler, as the EU dead-letter queue calls it).
      const down = new Proxy(
        {},
        { get: () => () => Promise.reject(new Error("Durable Object is overloaded")) },
      );
      const fake = {
        ...(env as unknown as Env),
        TENANTS: {
          idFromName: (name: string) => name,
          get: () => down,
          jurisdiction: () => {
            throw new Error("Jurisdiction restrictions are not implemented in workerd");
          },
        },
      } as unknown as Env;
      const stored = (await api("GET", "/v1/events?limit=1", undefined, t.auth)).body.events[0];
      const did: string[] = [];
      await worker.queue(
        {
          queue: "toolgate-events-eu-dlq",
          messages: [
            {
              id: crypto.randomUUID(),
              timestamp: new Date(),
              attempts: 1,
              body: { kind: "event", event: stored },
              ack: () => void did.push("ack"),
              retry: () => void did.push("retry"),
            },
          ],
          ackAll: () => {},
          retryAll: () => {},
        } as unknown as MessageBatch<never>,
        fake,
      );
      expect(did).toEqual(["ack"]);

      // Every message of the EU tenant went through an EU queue: events (the operation's and the
      // run's), the webhook retry, the dead letter; none through the default ones.
      const of = (tenantId: string) => queues.sent.filter((s) => tenantOf(s.body) === tenantId);
      const eu = of(t.tenantId);
      expect(eu.filter((s) => !s.binding.startsWith("EVENTS_EU"))).toEqual([]);
      const kinds = (sent: Sent[], binding: string) =>
        new Set(
          sent.filter((s) => s.binding === binding).map((s) => s.body.event?.type ?? s.body.kind),
        );
      expect([...kinds(eu, "EVENTS_EU")]).toEqual(
        expect.arrayContaining(["operation.recorded", "turn.settled"]),
      );
      expect(eu.some((s) => s.binding === "EVENTS_EU" && s.body.kind === "delivery")).toBe(true);
      expect(eu.filter((s) => s.binding === "EVENTS_EU_DLQ")).toEqual([
        { binding: "EVENTS_EU_DLQ", body: { kind: "event", event: stored, parked: 1 } },
      ]);
      // The queue is chosen by the tenant, not for everyone: the default tenant's went the default way.
      const other = of(plain.tenantId);
      expect(other.length).toBeGreaterThan(0);
      expect(other.filter((s) => s.binding !== "EVENTS")).toEqual([]);
    } finally {
      queues.stop();
    }
  }, 30_000);

  it("a jurisdiction whose queues this deployment does not bind is refused at tenant creation: 422, nothing made", async () => {
    const seen = recordPlacements();
    const res = await api(
      "POST",
      "/v1/admin/tenants",
      { name: "f", jurisdiction: "fedramp" },
      admin,
    );
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: "unsupported_jurisdiction" });
    expect(res.body.detail).toContain("EVENTS_FEDRAMP");
    expect(seen.filter((p) => !placedBefore.has(p.name))).toEqual([]);
  });
});
