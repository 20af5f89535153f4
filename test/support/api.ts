// Test helpers: everything goes through the public HTTP API (exports.default.fetch); the upstream
// is the real fault-injecting server from demo/upstream.ts, one namespace per test.
import { env, exports } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { vi } from "vitest";
import { FACTS_MAX_AGE_MS } from "../../src/domain/tenant-facts.ts";

export const ADMIN = "test-admin-token";
const upstreamBase = (env as unknown as { UPSTREAM_URL: string }).UPSTREAM_URL;
let counter = 0;
export const unique = (prefix: string) =>
  `${prefix}_${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`;

export const ALL_SCOPES = [
  "runs:write",
  "runs:read",
  "tools:write",
  "secrets:write",
  "approvals:decide",
  "approvals:delegate",
  "operations:resolve",
  "traces:read",
  "events:read",
  "webhooks:write",
  "webhooks:read",
  "policies:write",
  "operations:compensate",
  "freezes:write",
];

/** A tenant with an all-scopes key, created once per test file (storage is per file). */
let tenant: Promise<{ tenantId: string; key: string }> | null = null;
export function testTenant() {
  tenant ??= newTenant(ALL_SCOPES);
  return tenant;
}

export async function newTenant(scopes: string[]) {
  const created = await api(
    "POST",
    "/v1/admin/tenants",
    { name: unique("tenant") },
    { Authorization: `Bearer ${ADMIN}` },
  );
  const issued = await api(
    "POST",
    `/v1/admin/tenants/${created.body.tenant_id}/keys`,
    { name: "test", scopes },
    { Authorization: `Bearer ${ADMIN}` },
  );
  if (issued.status !== 201) throw new Error(`key issue failed: ${JSON.stringify(issued.body)}`);
  return {
    tenantId: created.body.tenant_id as string,
    key: issued.body.key as string,
    keyId: issued.body.key_id as string,
  };
}

export async function api(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const auth = headers.Authorization ?? `Bearer ${(await testTenant()).key}`;
  const init: RequestInit = { method, headers: { ...headers, Authorization: auth } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] ??= "application/json";
  }
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`http://toolgate.test${path}`, init),
  );
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {}
  return { status: response.status, body: parsed, headers: response.headers };
}

export type UpstreamState = {
  requests: Array<{
    method: string;
    path: string;
    key: string | null;
    fencingToken: string | null;
    authorization: string | null;
    headers: Record<string, string>;
    body: any;
    /** The scripted fault this request drew ("ok" when none). */
    fault: string;
    /** When it arrived (the test clock once `clock` set one). */
    atMs: number;
    /** Webhook receivers (paths under /webhooks): the raw body, to verify its signature. */
    raw?: string;
  }>;
  /** `request`: the index in `requests` of the request that committed the effect. */
  effects: Array<{ id: string; key: string | null; body: any; path: string; request: number }>;
  effectsByKey: Record<string, number>;
  /** The most writes ever in flight at once, per path, and in all under "*". */
  maxInFlight: Record<string, number>;
};

export function upstream() {
  const ns = unique("ns");
  const control = (path: string, init?: RequestInit) =>
    fetch(`${upstreamBase}/_control/${path}${path.includes("?") ? "&" : "?"}ns=${ns}`, init);
  return {
    url: `${upstreamBase}/ns/${ns}`,
    script: async (...faults: unknown[]) =>
      void (await control("script", { method: "POST", body: JSON.stringify(faults) })),
    state: async () => (await (await control("state")).json()) as UpstreamState,
    /** Stamps arrivals with the test's scripted clock from now on (quota tests). */
    clock: async (ms: number) =>
      void (await control("clock", { method: "POST", body: JSON.stringify({ ms }) })),
    /** Drops the faults still queued: the upstream recovers. */
    clear: async () => void (await control("clear", { method: "POST" })),
    /** Breaks idempotency promises for good in this namespace (demo/upstream.ts MISBEHAVIOURS). */
    misbehave: async (...modes: string[]) => {
      const response = await control("mode", {
        method: "POST",
        body: JSON.stringify({ misbehave: modes }),
      });
      if (response.status !== 200) throw new Error(`mode refused: ${await response.text()}`);
    },
    /** Resolves once the upstream has received `count` requests (a long-poll, not a sleep). */
    waitForRequests: async (count: number) =>
      void (await (await control(`wait?requests=${count}`)).json()),
    /** Resolves once the upstream has committed `count` effects (a long-poll, not a sleep). */
    waitForEffects: async (count: number) =>
      void (await (await control(`wait?effects=${count}`)).json()),
  };
}

/**
 * Reads until `done` holds (bounded: 400 reads 25 ms apart; the queue consumer runs in the pool,
 * so what it writes shows up a little later); the last value read.
 */
export async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  let value = await read();
  for (let i = 0; i < 400 && !done(value); i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    value = await read();
  }
  return value;
}

export const REFUSED_URL = "http://127.0.0.1:9";

export function manifest(overrides: Record<string, unknown> & { url: string }) {
  const { url, ...rest } = overrides;
  return {
    name: unique("tool"),
    description: "Charge the customer's card.",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
      },
      required: ["amount", "currency"],
    },
    output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    risk: "write",
    request: { method: "POST", url: `${url}/charges` },
    idempotency: { mode: "header", header: "Idempotency-Key" },
    timeout_ms: 1000,
    max_attempts: 4,
    // Long delays (30 s floor under the jitter): retries happen only when a test fires the alarm.
    retry: {
      min_delay_ms: 30_000,
      initial_delay_ms: 60_000,
      max_delay_ms: 600_000,
      max_elapsed_ms: 3_600_000,
    },
    ...rest,
  };
}

export async function setup(tool: Record<string, unknown>, context: Record<string, unknown> = {}) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  if (put.status !== 201 && put.status !== 200)
    throw new Error(`tool registration failed: ${JSON.stringify(put.body)}`);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    context,
  });
  if (run.status !== 201) throw new Error(`run creation failed: ${JSON.stringify(run.body)}`);
  return {
    runId: run.body.run_id as string,
    runToken: run.body.run_token as string,
    name: tool.name as string,
  };
}

export function turn(
  runId: string,
  calls: Array<{ id: string; name: string; arguments: unknown }>,
  waitSeconds = 5,
) {
  return api(
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    { calls },
    { Prefer: `wait=${waitSeconds}` },
  );
}

export const operation = (operationId: string, waitSeconds = 0) =>
  api("GET", `/v1/operations/${operationId}?wait=${waitSeconds}`);

export async function trace(runId: string): Promise<Array<Record<string, any>>> {
  const response = await api("GET", `/v1/runs/${runId}/trace`);
  return response.body.events;
}

/** Through the one placement function, so an EU tenant's `op_eu_…` reaches its EU object too. */
export const opStub = (operationId: string) =>
  placedStub(env as unknown as Env, "OPERATIONS", operationId) as any;
/** An operation's `op_outbox` rows matching `where` (0 if it never needed the table: issue 32). */
export const opOutboxCount = (sql: SqlStorage, where = "1") =>
  sql.exec("SELECT name FROM sqlite_master WHERE name = 'op_outbox'").toArray().length === 0
    ? 0
    : sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM op_outbox WHERE ${where}`).one().n;
export const fireAlarm = (operationId: string) => runDurableObjectAlarm(opStub(operationId));

/** Every row of every table in an object's own SQLite, as text (what retention must have deleted). */
export const storedText = (object: DurableObjectStub) =>
  runInDurableObject(object, (_i: unknown, state: DurableObjectState) => {
    const sql = state.storage.sql;
    const tables = sql
      .exec("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE '_cf_%'")
      .toArray()
      .map((row) => String(row.name));
    return JSON.stringify(tables.map((t) => sql.exec(`SELECT * FROM ${t}`).toArray()));
  });

/**
 * Whether the operation will still act by itself: an alarm is set for a retry, a watchdog, a
 * lookup or an approval expiry. A recorded operation's only alarm is its retention pruning (due at
 * least an hour after it was recorded), which is not automatic work on the call.
 */
export const automaticWork = (operationId: string) =>
  runInDurableObject(opStub(operationId), async (_instance: unknown, state: DurableObjectState) => {
    const at = await state.storage.getAlarm();
    if (at === null) return false;
    const row = state.storage.sql
      .exec<{ state: string }>("SELECT state FROM op_log ORDER BY seq DESC LIMIT 1")
      .toArray()[0];
    const current = row
      ? (JSON.parse(row.state) as { phase: string; recordedAtMs?: number })
      : null;
    return !(current?.phase === "recorded" && at >= current.recordedAtMs! + 3_600_000);
  });

/**
 * The scripted clock past the tenant-facts bound (domain/tenant-facts.ts): every run's snapshot is
 * now too old to use, as it is FACTS_MAX_AGE_MS after a rotation. Undo with vi.useRealTimers().
 */
export function pastFactsBound(): void {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.now() + FACTS_MAX_AGE_MS + 1_000);
}
