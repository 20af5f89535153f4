// The RunObject under concurrency, crashes and changing tools (issue 7): settlement refunds once,
// a tightened tool reaches a warm run, cancel closes every call of a turn, turn identity includes
// its content, unknown names are unknown_tool, and a crash before the turn row loses no budget.
import { describe, expect, it } from "vitest";
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { api, manifest, newTenant, operation, turn, unique, upstream } from "../support/api.ts";

async function runWith(tool: Record<string, unknown>, run: Record<string, unknown>) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  expect([200, 201]).toContain(put.status);
  const created = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    ...run,
  });
  expect(created.status).toBe(201);
  return { runId: created.body.run_id as string, name: tool.name as string };
}
const charge = (amount: number) => ({ amount, currency: "usd" });
const usage = async (runId: string) =>
  (await api("GET", `/v1/runs/${runId}`)).body.usage as {
    turns: number;
    tool_calls: number;
    cost: number;
  };
const poll = (runId: string, turnId: string, waitSeconds: number) =>
  api("GET", `/v1/runs/${runId}/turns/${turnId}?wait=${waitSeconds}`);

describe("settlement", () => {
  it("concurrent settles of one turn refund its reservation once: max_cost holds in effects", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, cost: 1, timeout_ms: 5_000 }), {
      budgets: { max_cost: 2 },
    });
    await up.script({ kind: "slow", delayMs: 1_000 });
    // Two calls of one operation: 2 reserved, 1 spent (the replay pays nothing) → refund 1.
    const posted = await turn(
      runId,
      [
        { id: "c1", name, arguments: charge(5) },
        { id: "c2", name, arguments: charge(5) },
      ],
      0,
    );
    expect(posted.status).toBe(202);
    const polls = await Promise.all([1, 2, 3, 4].map(() => poll(runId, posted.body.turn_id, 5)));
    for (const p of polls)
      expect(p.body.results.map((r: { status: string }) => r.status)).toEqual([
        "succeeded",
        "succeeded",
      ]);
    expect((await usage(runId)).cost).toBe(1);
    // More settles after the fact change nothing.
    await Promise.all([
      poll(runId, posted.body.turn_id, 0),
      turn(runId, [
        { id: "c1", name, arguments: charge(5) },
        { id: "c2", name, arguments: charge(5) },
      ]),
    ]);
    expect((await usage(runId)).cost).toBe(1);

    const more = [];
    for (let i = 0; i < 4; i++)
      more.push(
        (await turn(runId, [{ id: `m${i}`, name, arguments: charge(10 + i) }])).body.results[0],
      );
    expect(more.map((e) => e.status)).toEqual([
      "succeeded",
      "budget_exhausted",
      "budget_exhausted",
      "budget_exhausted",
    ]);
    expect(more[1]).toMatchObject({ code: "max_cost" });
    expect((await usage(runId)).cost).toBe(2);
    expect((await up.state()).effects).toHaveLength(2);
  });
});

describe("tools that change", () => {
  it("a tightened tool (lower limit, new scope) reaches a warm run after PATCH", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, limits: { amount: { max: 1_000 } } });
    const { runId, name } = await runWith(tool, {});
    expect(
      (await turn(runId, [{ id: "c1", name, arguments: charge(600) }])).body.results[0].status,
    ).toBe("succeeded");
    const tightened = {
      ...tool,
      limits: { amount: { max: 500 } },
      requires_scopes: ["payments:charge"],
    };
    expect((await api("PUT", `/v1/tools/${name}`, tightened)).status).toBe(200);
    expect((await api("PATCH", `/v1/runs/${runId}`, { tools: [name] })).status).toBe(200);
    const after = await turn(runId, [{ id: "c2", name, arguments: charge(601) }]);
    expect(after.body.results[0]).toMatchObject({ status: "rejected", code: "forbidden" });
    expect(
      (await api("PATCH", `/v1/runs/${runId}`, { user: { scopes: ["payments:charge"] } })).status,
    ).toBe(200);
    expect(
      (await turn(runId, [{ id: "c3", name, arguments: charge(602) }])).body.results[0],
    ).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(
      (await turn(runId, [{ id: "c4", name, arguments: charge(400) }])).body.results[0].status,
    ).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([600, 400]);
  });

  it("a name not registered in the tenant is unknown_tool; a registered but not offered one is tool_not_allowed", async () => {
    const up = upstream();
    const other = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${other.name}`, other)).status).toBe(201);
    const { runId, name } = await runWith(manifest({ url: up.url }), {});
    const res = await turn(runId, [
      { id: "c1", name: unique("never_registered"), arguments: {} },
      { id: "c2", name: other.name, arguments: charge(1) },
      { id: "c3", name: "create_shipment", arguments: { order_id: "o1", weight_kg: 1 } },
      { id: "c4", name, arguments: charge(2) },
    ]);
    expect(
      res.body.results.map((r: { status: string; code?: string }) => [r.status, r.code ?? null]),
    ).toEqual([
      ["rejected", "unknown_tool"],
      ["rejected", "tool_not_allowed"],
      ["rejected", "tool_not_allowed"],
      ["succeeded", null],
    ]);
    expect(res.body.results[0].message).toMatch(/Do not retry/);
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("turn identity", () => {
  it("same call ids with other content is turn_conflict (409); same content is the same turn", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), {});
    const first = await turn(runId, [{ id: "call_0", name, arguments: charge(1) }]);
    expect(first.body.results[0].status).toBe("succeeded");
    const conflict = await turn(runId, [{ id: "call_0", name, arguments: charge(2) }]);
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ code: "turn_conflict", status: 409 });
    // Same content, arguments as a JSON string with other key order: the same turn, safe to re-post.
    const again = await turn(runId, [
      { id: "call_0", name, arguments: '{"currency":"usd","amount":1}' },
    ]);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await usage(runId)).turns).toBe(1);
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("turn identity under concurrency", () => {
  it("the same turn posted five times at once is one turn, one reservation, one effect", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, cost: 1 }), {
      budgets: { max_cost: 5 },
    });
    const calls = [{ id: "c1", name, arguments: charge(7) }];
    const posts = await Promise.all([1, 2, 3, 4, 5].map(() => turn(runId, calls)));
    expect(new Set(posts.map((p) => p.body.turn_id)).size).toBe(1);
    for (const p of posts) expect(p.body.results[0].status).toBe("succeeded");
    expect(await usage(runId)).toEqual({ turns: 1, tool_calls: 1, cost: 1 });
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("cancellation", () => {
  it("cancel closes every in-flight call of a turn; late results stay on the operations", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url, timeout_ms: 5_000 }), {});
    // Slow enough that the cancel lands while all four are in flight, even on a loaded machine.
    await up.script(...[1, 2, 3, 4].map(() => ({ kind: "slow", delayMs: 2_500 })));
    const calls = [1, 2, 3, 4].map((n) => ({ id: `c${n}`, name, arguments: charge(n) }));
    const first = await turn(runId, calls, 0);
    expect(first.status).toBe(202);
    await up.waitForRequests(4);
    expect((await api("POST", `/v1/runs/${runId}/cancel`)).body.status).toBe("cancelled");
    const closed = await poll(runId, first.body.turn_id, 0);
    expect(closed.status).toBe(200);
    expect(closed.body.results.map((r: { status: string }) => r.status)).toEqual([
      "cancelled",
      "cancelled",
      "cancelled",
      "cancelled",
    ]);
    for (const result of first.body.results) {
      const settled = await operation(result.operation_id, 5);
      expect(settled.body).toMatchObject({
        phase: "recorded",
        late: true,
        result: { status: "succeeded" },
      });
    }
    const later = await poll(runId, first.body.turn_id, 0);
    expect(later.body).toEqual(closed.body);
    expect((await up.state()).effects).toHaveLength(4);
  });
});

const runObject = (runId: string) => (env as any).RUNS.get((env as any).RUNS.idFromName(runId));

/**
 * The crash window of issue 7: the run object's turn write never becomes durable and the object
 * dies. The first `INSERT INTO turns` throws (as a failed commit would), then the object is aborted
 * (memory gone, storage kept). Whatever the object sent before that write has left the building.
 */
async function failNextTurnWrite(runId: string) {
  await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) => {
    const sql = state.storage.sql;
    const exec = sql.exec.bind(sql);
    let fired = false;
    (sql as any).exec = (query: string, ...bindings: SqlStorageValue[]) => {
      if (!fired && /^\s*INSERT INTO turns/i.test(query)) {
        fired = true;
        throw new Error("simulated crash at the turn write");
      }
      return exec(query, ...bindings);
    };
  });
}
const abortRun = (runId: string) =>
  runInDurableObject(runObject(runId), (_i: unknown, state: DurableObjectState) =>
    state.abort("simulated crash"),
  ).catch(() => {});

describe("crash window", () => {
  it.each([
    ["max_tool_calls", { max_tool_calls: 1 }],
    ["max_turns", { max_turns: 1 }],
    ["max_cost", { max_cost: 1 }],
  ] as const)(
    "a run object crashing as it writes a turn loses no budget: %s holds in effects",
    async (code, budgets) => {
      const up = upstream();
      const { runId, name } = await runWith(manifest({ url: up.url, cost: 1 }), { budgets });
      await failNextTurnWrite(runId);
      const crashed = await turn(runId, [{ id: "c1", name, arguments: charge(1) }]);
      expect(crashed.status).toBe(500);
      await abortRun(runId);
      // The agent carries on with another call, then re-posts the crashed turn.
      const next = await turn(runId, [{ id: "c2", name, arguments: charge(2) }]);
      const reposted = await turn(runId, [{ id: "c1", name, arguments: charge(1) }]);
      expect(next.body.results[0].status).toBe("succeeded");
      expect(reposted.body.results[0]).toMatchObject({ status: "budget_exhausted", code });
      // Wait out anything the crashed instance may have started (the re-posted call's operation), then count effects.
      await operation(reposted.body.results[0].operation_id, 2);
      expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([2]);
      expect(await usage(runId)).toEqual({ turns: 2, tool_calls: 1, cost: 1 });
    },
  );
});

describe("creating a run with a request_id (a client's resend after a lost response)", () => {
  it("the same request again is the same run (200, same token); another body is 409; no second run", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const requestId = unique("req");
    const body = { user: { id: "u1", scopes: [] }, tools: [tool.name], request_id: requestId };
    const first = await api("POST", "/v1/runs", body);
    expect(first.status).toBe(201);
    // The response was lost; the client sends the same request again.
    const again = await api("POST", "/v1/runs", body);
    expect(again.status).toBe(200);
    for (const field of ["run_id", "run_token", "expires_at", "tools"])
      expect(again.body[field]).toEqual(first.body[field]);

    // The agent's work on it is one run's: a turn with either token lands on the same run.
    const res = await api(
      "POST",
      `/v1/runs/${again.body.run_id}/turns?format=native`,
      { calls: [{ id: "c1", name: tool.name, arguments: charge(3) }] },
      { Authorization: `Bearer ${again.body.run_token}`, Prefer: "wait=5" },
    );
    expect(res.body.results[0].status).toBe("succeeded");
    expect((await usage(first.body.run_id)).tool_calls).toBe(1);

    // The same request_id with another body is refused, and the first run is unchanged.
    const other = await api("POST", "/v1/runs", { ...body, user: { id: "u2", scopes: [] } });
    expect(other).toMatchObject({ status: 409, body: { code: "request_id_conflict" } });
    expect((await api("GET", `/v1/runs/${first.body.run_id}`)).body.user.id).toBe("u1");

    // Without a request_id every POST is a new run, as before.
    const { request_id: _, ...plain } = body;
    const a = await api("POST", "/v1/runs", plain);
    const b = await api("POST", "/v1/runs", plain);
    expect(a.body.run_id).not.toBe(b.body.run_id);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("two sends racing land on one run; another tenant's same request_id is its own run; a malformed one is 400", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const body = { user: { id: "u1", scopes: [] }, tools: [tool.name], request_id: unique("req") };
    const raced = await Promise.all([1, 2, 3].map(() => api("POST", "/v1/runs", body)));
    expect(raced.map((r) => r.status).sort()).toEqual([200, 200, 201]);
    expect(new Set(raced.map((r) => r.body.run_id)).size).toBe(1);

    const other = await newTenant(["runs:write", "tools:write"]);
    const auth = { Authorization: `Bearer ${other.key}` };
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
    const theirs = await api("POST", "/v1/runs", body, auth);
    expect(theirs.status).toBe(201);
    expect(theirs.body.run_id).not.toBe(raced[0]!.body.run_id);

    for (const requestId of ["", "has space", "x".repeat(129), 42])
      expect((await api("POST", "/v1/runs", { ...body, request_id: requestId })).body.code).toBe(
        "invalid_request",
      );
  });
});
