// The tenant index (issue 20): GET /v1/runs, /v1/operations and /v1/overview, fed by the EVENTS
// queue. Three tenants run 200 operations with mixed outcomes (succeeded, failed at the upstream,
// waiting for approval, rejected by a person); each tenant's lists and counts are exactly its own
// (the ground truth is what the API answered each call), filters and cursors give every row once,
// a pruned operation leaves the index, and a rebuild from the objects gives the same answers.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import {
  ADMIN,
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  setup,
  turn,
  newTenant,
  unique,
  until,
  upstream,
} from "../support/api.ts";

type Truth = {
  operation_id: string;
  run_id: string;
  tool: string;
  user: string;
  customer: string;
  status: string;
  code: string | null;
};
type Tenant = {
  tenantId: string;
  key: string;
  auth: string;
  truth: Truth[];
  runs: Map<string, string>;
};

const schema = {
  type: "object",
  additionalProperties: false,
  properties: {
    amount: { type: "integer", exclusiveMinimum: 0 },
    currency: { enum: ["usd", "eur"] },
    customer_id: { type: "string" },
  },
  required: ["amount", "currency", "customer_id"],
};

const as = (tenant: Tenant, method: string, path: string, body?: unknown, headers = {}) =>
  api(method, path, body, { Authorization: tenant.auth, ...headers });

/** Every row of a list, page by page (an odd page size, so pages end mid-way); ids in order. */
async function all(tenant: Tenant, path: string, key: "operations" | "runs", pageSize = 17) {
  const rows: any[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await as(
      tenant,
      "GET",
      `${path}${sep}limit=${pageSize}${cursor ? `&cursor=${cursor}` : ""}`,
    );
    expect(res.status).toBe(200);
    rows.push(...res.body[key]);
    cursor = res.body.next_cursor;
    if (!cursor) return rows;
  }
  throw new Error("more than 100 pages");
}

/** One tenant's agents: `runs` runs, each a turn of `perRun` charges (some failing upstream) and 2 refunds needing approval. */
async function populate(runs: number, perRun: number, failEvery: number): Promise<Tenant> {
  const made = await newTenant(ALL_SCOPES);
  const tenant: Tenant = { ...made, auth: `Bearer ${made.key}`, truth: [], runs: new Map() };
  const up = upstream();
  // A generous timeout: the shared test machine is slow, and a timeout here would be outcome_unknown.
  const charge = manifest({
    url: up.url,
    input_schema: schema,
    name: unique("charge"),
    timeout_ms: 20_000,
  });
  const refund = manifest({
    url: up.url,
    input_schema: schema,
    name: unique("refund"),
    timeout_ms: 20_000,
    approval: { mode: "always", four_eyes: false },
  });
  for (const tool of [charge, refund])
    expect((await as(tenant, "PUT", `/v1/tools/${tool.name}`, tool)).status).toBeLessThan(300);
  // Upstream faults are drawn in arrival order: which charges fail is not known, how many is.
  const failures = Math.floor((runs * perRun) / failEvery);
  await up.script(
    ...Array.from({ length: failures }, (_, i) => ({ kind: "status", status: i % 2 ? 400 : 403 })),
  );
  for (let r = 0; r < runs; r++) {
    const user = `user_${r % 2}`;
    const run = await as(tenant, "POST", "/v1/runs", {
      user: { id: user, scopes: [] },
      tools: [charge.name, refund.name],
    });
    expect(run.status).toBe(201);
    const runId = run.body.run_id as string;
    tenant.runs.set(runId, user);
    const calls = Array.from({ length: perRun }, (_, i) => ({
      id: `c${i}`,
      name: charge.name,
      arguments: { amount: 100 + i, currency: "usd", customer_id: `cus_${r}_${i % 3}` },
    }));
    const first = await as(
      tenant,
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      { calls },
      {
        Prefer: "wait=30",
      },
    );
    expect(first.body.status).toBe("settled");
    first.body.results.forEach((result: any, i: number) =>
      tenant.truth.push({
        operation_id: result.operation_id,
        run_id: runId,
        tool: charge.name,
        user,
        customer: calls[i]!.arguments.customer_id,
        status: result.status,
        code: result.status === "succeeded" ? null : result.code,
      }),
    );
    const refunds = [0, 1].map((i) => ({
      id: `r${i}`,
      name: refund.name,
      arguments: { amount: 10 + i, currency: "eur", customer_id: `cus_${r}_refund` },
    }));
    const second = await as(
      tenant,
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      { calls: refunds },
      { Prefer: "wait=0" },
    );
    for (const result of second.body.results) {
      expect(result.status).toBe("awaiting_approval");
      tenant.truth.push({
        operation_id: result.operation_id,
        run_id: runId,
        tool: refund.name,
        user,
        customer: `cus_${r}_refund`,
        status: "awaiting_approval",
        code: null,
      });
    }
  }
  // A person rejects every other run's first refund.
  for (const row of tenant.truth
    .filter((t) => t.status === "awaiting_approval")
    .filter((_, i) => i % 4 === 0)) {
    const res = await as(tenant, "POST", `/v1/operations/${row.operation_id}/reject`, {
      reason: "not this one",
    });
    expect(res.status).toBe(200);
    row.status = "rejected";
    row.code = "approval_rejected";
  }
  // 403: failed (upstream_forbidden); 400: rejected (invalid_arguments).
  expect(tenant.truth.filter((t) => t.code === "upstream_forbidden")).toHaveLength(
    Math.ceil(failures / 2),
  );
  expect(tenant.truth.filter((t) => t.code === "invalid_arguments")).toHaveLength(
    Math.floor(failures / 2),
  );
  return tenant;
}

const countBy = (rows: Truth[], key: (t: Truth) => string) => {
  const out: Record<string, number> = {};
  for (const row of rows) out[key(row)] = (out[key(row)] ?? 0) + 1;
  return out;
};

/** The answers a rebuild must reproduce: every operation row, every run row, the overview's counts. */
async function answers(tenant: Tenant) {
  const ops = await all(tenant, "/v1/operations", "operations");
  const runs = await all(tenant, "/v1/runs", "runs");
  const overview = (await as(tenant, "GET", "/v1/overview")).body;
  const byId = (a: any, b: any) =>
    (a.operation_id ?? a.run_id) < (b.operation_id ?? b.run_id) ? -1 : 1;
  return {
    ops: ops.sort(byId),
    // `usage` is as of the run's last settled turn in the feed (turn.settled carries it), as of
    // now in a rebuild: compared apart (below).
    runs: runs.sort(byId).map(({ usage: _usage, ...run }) => run),
    counts: { queues: overview.queues, operations: overview.operations, runs: overview.runs },
  };
}

describe("the tenant index: 3 tenants, 200 operations", () => {
  it("lists and counts exactly each tenant's own; filters and cursors give every row once; pruned rows leave; a rebuild gives the same answers", async () => {
    // 8×10+16 = 96, 5×10+10 = 60, 4×9+8 = 44: 200 operations.
    const tenants = [await populate(8, 10, 7), await populate(5, 10, 6), await populate(4, 9, 5)];
    expect(tenants.reduce((n, t) => n + t.truth.length, 0)).toBe(200);

    for (const tenant of tenants) {
      const ops = await until(
        () => all(tenant, "/v1/operations", "operations"),
        (rows) =>
          rows.length === tenant.truth.length &&
          rows.every((row) => row.user !== null) &&
          tenant.truth.every((t) =>
            rows.some((row) => row.operation_id === t.operation_id && row.status === t.status),
          ),
      );
      // Exactly its own: every operation once, with the status, code, tool, user and subject it had.
      expect(ops.map((row) => row.operation_id).sort()).toEqual(
        tenant.truth.map((t) => t.operation_id).sort(),
      );
      for (const t of tenant.truth)
        expect(ops.find((row) => row.operation_id === t.operation_id)).toMatchObject({
          run_id: t.run_id,
          tool: t.tool,
          status: t.status,
          code: t.code,
          user: t.user,
          subjects: { customer_id: t.customer },
        });
      // Newest first.
      const times = ops.map((row) => Date.parse(row.created_at));
      expect([...times].sort((a, b) => b - a)).toEqual(times);

      // Filters: each answers exactly the truth's matching rows (paged with cursors: each once).
      const ids = (rows: any[]) => rows.map((row) => row.operation_id).sort();
      const want = (pick: (t: Truth) => boolean) =>
        tenant.truth
          .filter(pick)
          .map((t) => t.operation_id)
          .sort();
      for (const status of ["succeeded", "failed", "awaiting_approval", "rejected"])
        expect(ids(await all(tenant, `/v1/operations?status=${status}`, "operations", 5))).toEqual(
          want((t) => t.status === status),
        );
      const tool = tenant.truth[0]!.tool;
      expect(ids(await all(tenant, `/v1/operations?tool=${tool}`, "operations", 7))).toEqual(
        want((t) => t.tool === tool),
      );
      expect(ids(await all(tenant, "/v1/operations?user=user_1", "operations", 3))).toEqual(
        want((t) => t.user === "user_1"),
      );
      expect(
        ids(await all(tenant, "/v1/operations?code=upstream_forbidden", "operations")),
      ).toEqual(want((t) => t.code === "upstream_forbidden"));
      const customer = tenant.truth[3]!.customer;
      expect(ids(await all(tenant, `/v1/operations?subject=${customer}`, "operations"))).toEqual(
        want((t) => t.customer === customer),
      );
      expect(
        ids(await all(tenant, `/v1/operations?subject=customer_id:${customer}`, "operations")),
      ).toEqual(want((t) => t.customer === customer));
      expect(
        ids(await all(tenant, `/v1/operations?subject=order_id:${customer}`, "operations")),
      ).toEqual([]);
      expect(ids(await all(tenant, `/v1/operations?q=${customer}`, "operations"))).toEqual(
        want((t) => t.customer === customer),
      );
      const oneOp = tenant.truth[5]!.operation_id;
      expect(ids(await all(tenant, `/v1/operations?q=${oneOp}`, "operations"))).toEqual([oneOp]);
      const combined = await all(
        tenant,
        `/v1/operations?user=user_0&status=succeeded&tool=${tool}`,
        "operations",
        4,
      );
      expect(ids(combined)).toEqual(
        want((t) => t.user === "user_0" && t.status === "succeeded" && t.tool === tool),
      );

      // Runs: each once, with its user and the counts of its operations by status.
      const runs = await all(tenant, "/v1/runs", "runs", 3);
      expect(runs.map((run) => run.run_id).sort()).toEqual([...tenant.runs.keys()].sort());
      for (const run of runs) {
        expect(run.user).toBe(tenant.runs.get(run.run_id));
        expect(run.operations).toEqual(
          countBy(
            tenant.truth.filter((t) => t.run_id === run.run_id),
            (t) => t.status,
          ),
        );
      }
      expect(
        (await all(tenant, "/v1/runs?user=user_1", "runs", 2)).map((r) => r.run_id).sort(),
      ).toEqual(
        [...tenant.runs]
          .filter(([, user]) => user === "user_1")
          .map(([id]) => id)
          .sort(),
      );
      const oneRun = tenant.truth[0]!.run_id;
      expect(
        (await all(tenant, `/v1/runs?q=${tenant.truth[0]!.operation_id}`, "runs")).map(
          (r) => r.run_id,
        ),
      ).toEqual([oneRun]);

      // The overview: the queues and counts are the truth's.
      const overview = (await as(tenant, "GET", "/v1/overview")).body;
      expect(overview.queues).toEqual({
        awaiting_approval: tenant.truth.filter((t) => t.status === "awaiting_approval").length,
        outcome_unknown: 0,
      });
      expect(overview.operations).toEqual(countBy(tenant.truth, (t) => t.status));
      expect(overview.runs).toBe(tenant.runs.size);
      const stats = overview.tools.find((entry: any) => entry.tool === tool);
      const ofTool = tenant.truth.filter((t) => t.tool === tool);
      expect(stats).toMatchObject({
        calls: ofTool.length,
        failure_rate: ofTool.filter((t) => t.status === "failed").length / ofTool.length,
      });
      expect(stats.p50_ms).toBeGreaterThanOrEqual(0);
      expect(stats.p95_ms).toBeGreaterThanOrEqual(stats.p50_ms);
      expect(
        overview.series.reduce(
          (n: number, slot: any) =>
            n + (Object.values(slot.by_status) as number[]).reduce((a, b) => a + b, 0),
          0,
        ),
      ).toBe(tenant.truth.length);
    }

    // Another tenant's ids find nothing: not by search, not by run.
    const [a, b] = tenants as [Tenant, Tenant, Tenant];
    expect(
      (await as(b, "GET", `/v1/operations?q=${a.truth[0]!.operation_id}`)).body.operations,
    ).toEqual([]);
    expect(
      (await as(b, "GET", `/v1/operations?run_id=${a.truth[0]!.run_id}`)).body.operations,
    ).toEqual([]);
    expect((await as(b, "GET", `/v1/runs?q=${a.truth[0]!.run_id}`)).body.runs).toEqual([]);

    // A rebuild from the objects, from emptied rows, gives the same answers.
    const before = await answers(a);
    const rebuilt = await api("POST", `/v1/admin/tenants/${a.tenantId}/reindex`, undefined, {
      Authorization: `Bearer ${ADMIN}`,
    });
    expect(rebuilt.status).toBe(200);
    expect(rebuilt.body).toEqual({
      state: "done",
      runs: a.runs.size,
      operations: a.truth.length,
      missing: 0,
      failed: 0,
    });
    expect(await answers(a)).toEqual(before);
    for (const run of await all(a, "/v1/runs", "runs"))
      expect(run.usage).toEqual((await as(a, "GET", `/v1/runs/${run.run_id}`)).body.usage);

    // Retention: once pruned, an operation is no longer listed, and a late event does not bring it back.
    const settled = a.truth.find((t) => t.status === "succeeded")!;
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
      expect(await fireAlarm(settled.operation_id)).toBe(true);
      expect(
        (
          await api("GET", `/v1/operations/${settled.operation_id}`, undefined, {
            Authorization: a.auth,
          })
        ).status,
      ).toBe(410);
    } finally {
      vi.useRealTimers();
    }
    const after = await until(
      () => all(a, "/v1/operations", "operations", 50),
      (rows) => !rows.some((row) => row.operation_id === settled.operation_id),
    );
    expect(after.map((row) => row.operation_id).sort()).toEqual(
      a.truth
        .filter((t) => t !== settled)
        .map((t) => t.operation_id)
        .sort(),
    );
    const again = await api("POST", `/v1/admin/tenants/${a.tenantId}/reindex`, undefined, {
      Authorization: `Bearer ${ADMIN}`,
    });
    expect(again.body.operations).toBe(a.truth.length - 1);
    expect(
      (await as(a, "GET", `/v1/operations?q=${settled.operation_id}`)).body.operations,
    ).toEqual([]);
  }, 300_000);

  it("an operation settled now is listed within a few seconds (the measured bound is printed)", async () => {
    const tenant: Tenant = {
      ...(await newTenant(ALL_SCOPES)),
      auth: "",
      truth: [],
      runs: new Map(),
    };
    tenant.auth = `Bearer ${tenant.key}`;
    const up = upstream();
    const tool = manifest({ url: up.url, input_schema: schema });
    await as(tenant, "PUT", `/v1/tools/${tool.name}`, tool);
    const run = await as(tenant, "POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
    });
    const samples: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await as(
        tenant,
        "POST",
        `/v1/runs/${run.body.run_id}/turns?format=native`,
        {
          calls: [
            {
              id: `c${i}`,
              name: tool.name,
              arguments: { amount: 1 + i, currency: "usd", customer_id: "cus_42" },
            },
          ],
        },
        { Prefer: "wait=5" },
      );
      const settledAt = Date.now();
      const op = res.body.results[0].operation_id as string;
      const listed = await until(
        () => as(tenant, "GET", `/v1/operations?q=${op}`),
        (r) => r.body.operations.length === 1 && r.body.operations[0].status === "succeeded",
      );
      expect(listed.body.operations).toHaveLength(1);
      samples.push(Date.now() - settledAt);
    }
    console.log(JSON.stringify({ index_consistency_ms: { samples, max: Math.max(...samples) } }));
    // Correctness bound only (the pool's queue batches for up to 1 s): generous on purpose.
    expect(Math.max(...samples)).toBeLessThan(10_000);
    // Unknown parameters and cursors are refused, not ignored.
    expect((await as(tenant, "GET", "/v1/operations?colour=red")).status).toBe(400);
    expect((await as(tenant, "GET", "/v1/operations?cursor=bm90LW91cnM")).status).toBe(400);
    expect((await as(tenant, "GET", "/v1/operations?status=done")).status).toBe(400);
  }, 60_000);

  it("a broken index holds back no webhook; it catches up once it works again", async () => {
    const tenant: Tenant = {
      ...(await newTenant(ALL_SCOPES)),
      auth: "",
      truth: [],
      runs: new Map(),
    };
    tenant.auth = `Bearer ${tenant.key}`;
    const namespace = (env as unknown as { INDEX: DurableObjectNamespace }).INDEX;
    // Untyped: the stub's RPC types recurse too deep for runInDurableObject's signature.
    const index = namespace.get(namespace.idFromName(tenant.tenantId)) as any;
    // The index refuses every write (its storage exists, a trigger aborts each insert).
    await index.ingest(tenant.tenantId, []);
    await runInDurableObject(index, (_instance: unknown, state: DurableObjectState) => {
      state.storage.sql.exec(
        "CREATE TRIGGER broken BEFORE INSERT ON idx_ops BEGIN SELECT RAISE(ABORT, 'index down'); END",
      );
    });
    const up = upstream();
    const hook = await as(tenant, "PUT", "/v1/webhooks/wh_index", {
      url: `${up.url}/webhooks/a`,
      events: ["operation.recorded"],
      format: "standard",
    });
    expect(hook.status).toBe(201);
    const tool = manifest({ url: up.url, input_schema: schema, timeout_ms: 20_000 });
    await as(tenant, "PUT", `/v1/tools/${tool.name}`, tool);
    const run = await as(tenant, "POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
    });
    const res = await as(
      tenant,
      "POST",
      `/v1/runs/${run.body.run_id}/turns?format=native`,
      {
        calls: [
          {
            id: "c1",
            name: tool.name,
            arguments: { amount: 3, currency: "usd", customer_id: "cus_9" },
          },
        ],
      },
      { Prefer: "wait=10" },
    );
    const op = res.body.results[0].operation_id as string;
    // The webhook is delivered while the index is down.
    const delivered = await until(
      () => up.state(),
      (state) => state.requests.some((r) => r.path === "/webhooks/a"),
    );
    expect(delivered.requests.filter((r) => r.path === "/webhooks/a")).toHaveLength(1);
    expect((await as(tenant, "GET", `/v1/operations?q=${op}`)).body.operations).toEqual([]);
    // Repaired: the event queued for the index alone lands.
    await runInDurableObject(index, (_instance: unknown, state: DurableObjectState) => {
      state.storage.sql.exec("DROP TRIGGER broken");
    });
    const listed = await until(
      () => as(tenant, "GET", `/v1/operations?subject=cus_9`),
      (r) => r.body.operations.length === 1,
    );
    expect(listed.body.operations).toMatchObject([{ operation_id: op, status: "succeeded" }]);
  }, 60_000);
});

describe("one batch, one write per operation (issue 32)", () => {
  it("an operation's requested, decided and recorded in one batch: the same row as one write per step, 3 rows instead of 7", async () => {
    const startedIso = new Date(Date.now() - 1_000).toISOString();
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, approval: "always" }));
    const res = await turn(
      runId,
      [{ id: "c1", name, arguments: { amount: 5, currency: "usd" } }],
      0,
    );
    const opId = res.body.results[0].operation_id as string;
    expect((await api("POST", `/v1/operations/${opId}/approve`, {})).status).toBe(200);
    // The events exactly as the consumer handed them to the tenant (and to the index).
    const events = await until(
      async () =>
        (await api("GET", `/v1/events?since=${startedIso}&limit=100`)).body.events.filter(
          (event: any) => event.operation_id === opId,
        ),
      (mine: any[]) => mine.some((event) => event.type === "operation.recorded"),
    );
    expect(events.map((event: any) => event.type)).toEqual([
      "approval.requested",
      "approval.decided",
      "operation.recorded",
    ]);
    const tenantId = events[0].tenant_id as string;
    const namespace = (env as unknown as { INDEX: DurableObjectNamespace }).INDEX;
    // Two fresh indexes of this tenant's events: one batch per step, and the three in one batch.
    type Applied = { written: number; ops: any[]; subjects: any[]; runs: any[] };
    const apply = (batches: unknown[][]): Promise<Applied> =>
      (runInDurableObject as any)(
        namespace.get(namespace.idFromName(unique("idx"))),
        async (instance: any, state: DurableObjectState) => {
          await instance.ingest(tenantId, []);
          const before = instance.store.rowsWritten as number;
          for (const batch of batches) await instance.ingest(tenantId, batch);
          const sql = state.storage.sql;
          return {
            written: (instance.store.rowsWritten as number) - before,
            ops: sql.exec("SELECT * FROM idx_ops").toArray(),
            subjects: sql.exec("SELECT * FROM idx_subjects ORDER BY key, value").toArray(),
            runs: sql.exec("SELECT * FROM idx_runs").toArray(),
          };
        },
      );
    const stepwise = await apply(events.map((event: any) => [event]));
    const batched = await apply([events]);
    expect(batched.ops).toEqual(stepwise.ops);
    expect(batched.subjects).toEqual(stepwise.subjects);
    expect(batched.runs).toEqual(stepwise.runs);
    expect(batched.ops[0]).toMatchObject({ operation_id: opId, status: "succeeded", attempts: 1 });
    // Stepwise: the new row with its created, run and status entries (4), then two updates (the
    // status entry moving, then leaving). Batched: the row as it ends, with created and run (3).
    // The run's known id and its row with created and user entries (4) are written alike in both.
    expect({ stepwise: stepwise.written, batched: batched.written }).toEqual({
      stepwise: 4 + 2 + 1 + 4,
      batched: 3 + 4,
    });
  }, 30_000);
});
