// Rebuilding the tenant index from the objects (issue 38, audit I1–I2): a rebuild writes in place and
// never empties the index first, so a read that fails (an overloaded or restarting object, here an
// RPC that rejects) leaves the index whole, and the failed read is tried again until it answers; an
// index that lost its storage finds the runs again from the tenant's own list of runs, which the
// run's retention empties; and pruned ids' tombstones are pruned in turn once no late event can
// bring a row back. Faults are injected at the RPC edge of the IndexObject (its env's namespaces).
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import {
  ADMIN,
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  newTenant,
  unique,
  until,
  upstream,
} from "../support/api.ts";

const DAY_MS = 24 * 60 * 60_000;
const RETENTION_MS = 2 * DAY_MS; // the pool's TOOLGATE_RETENTION_MS (vitest.config.ts)
const realEnv = env as unknown as Env;

afterEach(() => void vi.useRealTimers());

type Tenant = { tenantId: string; auth: Record<string, string>; runs: string[]; ops: string[] };

/** A tenant whose `runs` runs each made `perRun` charges, all succeeded and indexed. */
async function indexedTenant(runs: number, perRun: number): Promise<Tenant> {
  const made = await newTenant(ALL_SCOPES);
  const t: Tenant = {
    tenantId: made.tenantId,
    auth: { Authorization: `Bearer ${made.key}` },
    runs: [],
    ops: [],
  };
  const up = upstream();
  const tool = manifest({ url: up.url, name: unique("charge"), timeout_ms: 20_000 });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, t.auth)).status).toBe(201);
  for (let r = 0; r < runs; r++) {
    const run = await api(
      "POST",
      "/v1/runs",
      { user: { id: `u${r}`, scopes: [] }, tools: [tool.name] },
      t.auth,
    );
    expect(run.status).toBe(201);
    t.runs.push(run.body.run_id);
    const calls = Array.from({ length: perRun }, (_, i) => ({
      id: `c${i}`,
      name: tool.name,
      arguments: { amount: 10 * r + i + 1, currency: "usd" },
    }));
    const turn = await api(
      "POST",
      `/v1/runs/${run.body.run_id}/turns?format=native`,
      { calls },
      { ...t.auth, Prefer: "wait=30" },
    );
    expect(turn.body.results.map((r: any) => r.status)).toEqual(calls.map(() => "succeeded"));
    t.ops.push(...turn.body.results.map((r: any) => r.operation_id as string));
  }
  const listed = await until(
    () => answers(t),
    (a) => a.ops.length === t.ops.length && a.runs.length === runs,
  );
  expect(listed.ops.map((op) => op.operation_id).sort()).toEqual([...t.ops].sort());
  return t;
}

/** What the index answers: every operation and run row (ids sorted), the overview's counts. */
async function answers(t: Tenant) {
  const ops = (await api("GET", "/v1/operations?limit=200", undefined, t.auth)).body
    .operations as any[];
  const runs = (await api("GET", "/v1/runs?limit=200", undefined, t.auth)).body.runs as any[];
  const overview = (await api("GET", "/v1/overview", undefined, t.auth)).body;
  const byId = (a: any, b: any) =>
    (a.operation_id ?? a.run_id) < (b.operation_id ?? b.run_id) ? -1 : 1;
  return {
    ops: ops.sort(byId),
    // usage is as of the last settled turn in the feed, as of now in a rebuild: left out.
    runs: runs.sort(byId).map(({ usage: _usage, ...run }) => run),
    operations: overview.operations,
  };
}

const reindex = (tenantId: string) =>
  api("POST", `/v1/admin/tenants/${tenantId}/reindex`, undefined, {
    Authorization: `Bearer ${ADMIN}`,
  });

/** The tenant's IndexObject (untyped: the stub's RPC types recurse too deep for runInDurableObject). */
const indexOf = (tenantId: string) => placedStub(realEnv, "INDEX", tenantId) as any;

/**
 * `real` whose stubs' `method` rejects for the named objects, as many times as `failures` says
 * (an object overloaded or reset mid-rebuild); every other call goes through.
 */
function failing(real: unknown, method: string, failures: Map<string, number>) {
  const namespace = real as DurableObjectNamespace;
  return new Proxy(namespace, {
    get(target, prop) {
      if (prop === "get")
        return (id: DurableObjectId) => {
          const stub = target.get(id) as unknown as Record<string | symbol, any>;
          return new Proxy(stub, {
            get(s, p) {
              if (p !== method) return typeof s[p] === "function" ? s[p].bind(s) : s[p];
              return async (...args: unknown[]) => {
                const left = failures.get(id.toString()) ?? 0;
                if (left > 0) {
                  failures.set(id.toString(), left - 1);
                  throw new Error("Durable Object is overloaded. Too many requests queued.");
                }
                return s[p](...args);
              };
            },
          });
        };
      const value = (target as unknown as Record<string | symbol, any>)[prop];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("rebuilding the tenant index", () => {
  it("reads that fail leave the index whole: one failing operation read is tried again at once, a run whose reads keep failing is read again by the index's alarm; afterwards the index is whole", async () => {
    const t = await indexedTenant(3, 2);
    const before = await answers(t);
    const runs = (realEnv as unknown as { RUNS: DurableObjectNamespace }).RUNS;
    const ops = (realEnv as unknown as { OPERATIONS: DurableObjectNamespace }).OPERATIONS;
    // The second run's read fails 4 times (more than one step's 3 tries); one operation's once.
    const runFailures = new Map([[runs.idFromName(t.runs[1]!).toString(), 4]]);
    const opFailures = new Map([[ops.idFromName(t.ops[4]!).toString(), 1]]);
    const patch = (instance: { env: Record<string, unknown> }) => {
      instance.env = {
        ...instance.env,
        RUNS: failing(instance.env.RUNS, "indexEntry", runFailures),
        OPERATIONS: failing(instance.env.OPERATIONS, "indexEntry", opFailures),
      };
    };
    await runInDurableObject(indexOf(t.tenantId), patch as (instance: unknown) => void);

    const first = await reindex(t.tenantId);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ state: "running", runs: 2, operations: 4, missing: 0, failed: 0 });
    expect(opFailures.get(ops.idFromName(t.ops[4]!).toString())).toBe(0);
    // Mid-rebuild, with a run not read yet: nothing is missing.
    expect(await answers(t)).toEqual(before);

    // The index's alarm takes the next step once the failed read is due again (5 s later): the
    // run answers now, and the rebuild is done.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 6_000);
    expect(await runDurableObjectAlarm(indexOf(t.tenantId))).toBe(true);
    vi.useRealTimers();
    expect(runFailures.get(runs.idFromName(t.runs[1]!).toString())).toBe(0);
    const left = await runInDurableObject(
      indexOf(t.tenantId),
      (_i: unknown, state: DurableObjectState) =>
        state.storage.sql
          .exec<{ n: number }>(
            "SELECT (SELECT COUNT(*) FROM idx_rebuild) + (SELECT COUNT(*) FROM rb_todo) AS n",
          )
          .one().n,
    );
    expect(left).toBe(0);
    expect(await answers(t)).toEqual(before);
    // A rebuild now reads every run in one call.
    const again = await reindex(t.tenantId);
    expect(again.body).toEqual({ state: "done", runs: 3, operations: 6, missing: 0, failed: 0 });
  }, 60_000);

  it("an index that lost its storage finds every run again from the tenant's own list of runs", async () => {
    const t = await indexedTenant(2, 2);
    const before = await answers(t);
    // The index's storage is gone (and with it the runs it had been told of).
    await runInDurableObject(
      indexOf(t.tenantId),
      async (_i: unknown, state: DurableObjectState) => {
        await state.storage.deleteAll();
      },
    );
    await runInDurableObject(indexOf(t.tenantId), (_i: unknown, state: DurableObjectState) =>
      state.abort("storage lost"),
    ).catch(() => {});
    expect((await answers(t)).ops).toEqual([]);

    const rebuilt = await reindex(t.tenantId);
    expect(rebuilt.body).toEqual({ state: "done", runs: 2, operations: 4, missing: 0, failed: 0 });
    expect(await answers(t)).toEqual(before);
  }, 60_000);

  it("the tenant's list of runs forgets a run once retention prunes it", async () => {
    const t = await newTenant(ALL_SCOPES);
    const auth = { Authorization: `Bearer ${t.key}` };
    const up = upstream();
    const tool = manifest({ url: up.url });
    await api("PUT", `/v1/tools/${tool.name}`, tool, auth);
    const run = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] }, auth);
    const runId = run.body.run_id as string;
    const tenant = placedStub(realEnv, "TENANTS", t.tenantId) as any;
    const listed = async () =>
      ((await tenant.runPage(null, 100)) as Array<{ run_id: string }>).map((row) => row.run_id);
    expect(await listed()).toEqual([runId]);
    // Its token expired and the retention period passed: the run's alarm prunes it.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + DAY_MS + RETENTION_MS + 60_000);
    await runDurableObjectAlarm(placedStub(realEnv, "RUNS", runId) as any);
    vi.useRealTimers();
    expect((await api("GET", `/v1/runs/${runId}`, undefined, auth)).body.code).toBe("run_pruned");
    expect(await listed()).toEqual([]);
  });

  it("pruned ids' tombstones are pruned once no late event can come, and an event that old is ignored", async () => {
    const t = await indexedTenant(3, 1);
    const [op1, op2, op3] = t.ops as [string, string, string];
    const dropped = () =>
      runInDurableObject(indexOf(t.tenantId), (_i: unknown, state: DurableObjectState) =>
        state.storage.sql
          .exec<{ id: string }>("SELECT id FROM idx_dropped ORDER BY id")
          .toArray()
          .map((row) => row.id),
      );
    const listed = async (op: string) =>
      (await api("GET", `/v1/operations?q=${op}`, undefined, t.auth)).body.operations as any[];
    const startMs = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      // op1 is pruned by retention: its row leaves the index and a tombstone stays.
      vi.setSystemTime(startMs + RETENTION_MS + 60_000);
      expect(await fireAlarm(op1)).toBe(true);
      await until(
        () => listed(op1),
        (rows) => rows.length === 0,
      );
      expect(await dropped()).toEqual([op1]);
      // Long after (the retention period again, plus 2 days): op2's prune takes op1's tombstone.
      vi.setSystemTime(startMs + 2 * RETENTION_MS + 2 * DAY_MS + 5 * 60_000);
      expect(await fireAlarm(op2)).toBe(true);
      await until(
        () => listed(op2),
        (rows) => rows.length === 0,
      );
      expect(await dropped()).toEqual([op2]);

      // An event for op1 as old as op1 itself, arriving now with a fresh one for op3: the fresh
      // one lands; the old one does not bring op1's row back.
      const old = (await api("GET", "/v1/events?limit=100", undefined, t.auth)).body.events.find(
        (e: any) => e.operation_id === op1 && e.type === "operation.recorded",
      );
      expect(old).toBeDefined();
      const fresh = {
        ...old,
        id: `evt_${"a".repeat(32)}`,
        run_id: t.runs[2],
        operation_id: op3,
        at_ms: Date.now(),
      };
      await realEnv.EVENTS.sendBatch([
        { body: { kind: "event", event: { ...old, id: `evt_${"b".repeat(32)}` } } },
        { body: { kind: "event", event: { ...fresh, data: { ...old.data, status: "failed" } } } },
      ]);
      await until(
        () => listed(op3),
        (rows) => rows[0]?.status === "failed",
      );
      expect(await listed(op1)).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  }, 60_000);
});
