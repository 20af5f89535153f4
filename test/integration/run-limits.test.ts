// What a run stores, from a runaway agent's side (domain/run-limits.ts): turns past a spent budget
// are answered for a while, then refused with 409 run_turn_limit (nothing stored, nothing sent,
// usage unchanged, a stored turn still answers); toolgate_check_status has a per-run allowance;
// a turn row names its tool source by hash, so a 64-call turn of a large manifest stays small; and
// a run stored in the earlier layout keeps working.
import { describe, expect, it } from "vitest";
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { api, manifest, trace, turn, upstream } from "../support/api.ts";
import { usageAsStored } from "../support/run-usage.ts";

const CHECK = "toolgate_check_status";
const charge = (amount: number) => ({ amount, currency: "usd" });

async function runWith(tool: Record<string, unknown>, budgets: Record<string, number> = {}) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  expect([200, 201]).toContain(put.status);
  const created = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    budgets,
  });
  expect(created.status).toBe(201);
  return { runId: created.body.run_id as string, name: tool.name as string };
}
const usage = async (runId: string) => (await api("GET", `/v1/runs/${runId}`)).body.usage;
const runObject = (runId: string) => (env as any).RUNS.get((env as any).RUNS.idFromName(runId));
/** Reads the run's own SQLite (what it stores is the point of these tests). */
const sql = <T>(runId: string, query: string, ...bindings: SqlStorageValue[]): Promise<T[]> =>
  runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) =>
    state.storage.sql.exec(query, ...bindings).toArray(),
  ) as Promise<T[]>;
/** The run's usage as stored (the usage row, or a newer snapshot in a turn row). */
const storedUsage = (runId: string) =>
  runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) =>
    usageAsStored(state.storage.sql),
  );
const storedTurns = async (runId: string) =>
  (await sql<{ n: number }>(runId, "SELECT COUNT(*) AS n FROM turns"))[0]!.n;

describe("turns past a spent budget", () => {
  it("max_turns 1: 16 more turns are answered budget_exhausted, then 409 run_turn_limit; nothing more is stored or sent, usage stops, a stored turn is still answered", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), { max_turns: 1 });
    const first = await turn(runId, [{ id: "c0", name, arguments: charge(1) }]);
    expect(first.body.results[0].status).toBe("succeeded");
    for (let i = 1; i <= 16; i++) {
      const late = await turn(runId, [{ id: `c${i}`, name, arguments: charge(i + 1) }]);
      expect(late.status).toBe(200);
      expect(late.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "max_turns" });
    }
    const before = await usage(runId);
    expect(before.turns).toBe(17);
    for (const id of ["c17", "c18"]) {
      const refused = await turn(runId, [{ id, name, arguments: charge(99) }]);
      expect(refused.status).toBe(409);
      expect(refused.headers.get("content-type")).toContain("application/problem+json");
      expect(refused.body).toMatchObject({
        code: "run_turn_limit",
        detail: expect.stringContaining("nothing was stored or sent"),
      });
    }
    expect(await usage(runId)).toEqual(before);
    expect(await storedTurns(runId)).toBe(17);
    expect((await trace(runId)).filter((e) => e.type === "turn_received")).toHaveLength(17);
    // A re-post of a stored turn is a replay, answered as before.
    const again = await turn(runId, [{ id: "c0", name, arguments: charge(1) }]);
    expect(again.status).toBe(200);
    expect(again.body.results).toEqual(first.body.results);
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("toolgate_check_status", () => {
  it("a check loop is answered 50 times, then refused in its envelope (nothing looked up), then the run stops storing it", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }));
    const write = await turn(runId, [{ id: "w1", name, arguments: charge(5) }]);
    const op = write.body.results[0].operation_id as string;
    const check = (...ids: string[]) =>
      turn(
        runId,
        ids.map((id) => ({ id, name: CHECK, arguments: { operation_id: op } })),
        0,
      );
    for (let i = 0; i < 49; i++) {
      const answered = await check(`k${i}`);
      expect(answered.body.results[0]).toMatchObject({
        status: "succeeded",
        result: { status: "succeeded", operation_id: op },
      });
    }
    // One check left: the first call of this turn gets it, the others are refused.
    const last = await check("k49", "k50", "k51");
    expect(last.body.results.map((e: { status: string }) => e.status)).toEqual([
      "succeeded",
      "budget_exhausted",
      "budget_exhausted",
    ]);
    const spent = last.body.results[1];
    expect(spent).toMatchObject({ code: "max_status_checks", allowed_next_actions: ["tell_user"] });
    expect(spent.message).toContain("nothing was looked up");
    expect(spent).not.toHaveProperty("result");
    for (let i = 0; i < 16; i++)
      expect((await check(`x${i}`)).body.results[0].code).toBe("max_status_checks");
    const refused = await check("x16");
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("run_turn_limit");
    expect(await storedTurns(runId)).toBe(1 + 50 + 16);
    const counts = await storedUsage(runId);
    expect({ checks: counts.checks, stopped_turns: counts.stopped_turns }).toEqual({
      checks: 50,
      stopped_turns: 16,
    });
    // The write itself is still answered, and was sent once.
    expect((await turn(runId, [{ id: "w1", name, arguments: charge(5) }])).body.results).toEqual(
      write.body.results,
    );
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("tool sources are stored once per run", () => {
  it("a 64-call turn of a 42 KB manifest stores a row of a few KB, and every call is answered", async () => {
    const up = upstream();
    // About 42 KB of manifest: long property descriptions, as a real tool's schema may have.
    const properties: Record<string, unknown> = {
      amount: { type: "integer", exclusiveMinimum: 0 },
      currency: { enum: ["usd", "eur"] },
    };
    for (let i = 0; i < 20; i++)
      properties[`note_${i}`] = { type: "string", description: `n${i} `.repeat(700) };
    const tool = manifest({
      url: up.url,
      // 64 calls at once on a shared CI machine: the support's 1 s upstream timeout made some of
      // them outcome_unknown under load (old code too); this test is about row size, not timing.
      timeout_ms: 10_000,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties,
        required: ["amount", "currency"],
      },
    });
    expect(JSON.stringify(tool).length).toBeGreaterThan(42_000);
    const { runId, name } = await runWith(tool);
    const calls = Array.from({ length: 64 }, (_, i) => ({
      id: `c${i}`,
      name,
      arguments: charge(i + 1),
    }));
    const posted = await turn(runId, calls, 10);
    expect(posted.status).toBe(200);
    expect(posted.body.results.map((e: { status: string }) => e.status)).toEqual(
      calls.map(() => "succeeded"),
    );
    const [row] = await sql<{ bytes: number }>(
      runId,
      "SELECT LENGTH(CAST(calls AS BLOB)) AS bytes FROM turns WHERE id = ?",
      posted.body.turn_id,
    );
    // 2.7 MB when every call held the manifest; Cloudflare's per-row limit is 2 MB.
    expect(row!.bytes).toBeLessThan(32 * 1024);
    const sources = await sql<{ n: number }>(runId, "SELECT COUNT(*) AS n FROM tool_sources");
    expect(sources[0]!.n).toBe(1);
    // The calls read back whole: a poll answers from the row, the trace lists every call.
    const poll = await api("GET", `/v1/runs/${runId}/turns/${posted.body.turn_id}`);
    expect(poll.body.results).toEqual(posted.body.results);
    const received = (await trace(runId)).find((e) => e.type === "turn_received")!;
    expect(received.calls).toHaveLength(64);
    expect((await up.state()).effects).toHaveLength(64);
  });
});

describe("a run stored in the earlier layout", () => {
  it("(each call row holding its source, no storage counts, the usage only in its own row, no source or operation tables) still answers polls, checks, new turns and a cancel", async () => {
    const up = upstream();
    const { runId, name } = await runWith(manifest({ url: up.url }), { max_turns: 5 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge(1) }]);
    const op = first.body.results[0].operation_id as string;
    const was = await usage(runId);
    expect(was).toMatchObject({ turns: 1, tool_calls: 1 });
    // Rewrite the run's storage as e1168c0 left it, then drop the object's memory.
    await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) => {
      const db = state.storage.sql;
      const source = db.exec<{ source: string }>("SELECT source FROM tool_sources").one().source;
      const row = db.exec<{ calls: string }>("SELECT calls FROM turns").one();
      const calls = JSON.parse(row.calls) as Array<{ submit?: Record<string, unknown> }>;
      for (const call of calls)
        if (call.submit) {
          delete call.submit.sourceHash;
          call.submit.source = JSON.parse(source);
        }
      db.exec("UPDATE turns SET calls = ?", JSON.stringify(calls));
      // The usage in its row, as every turn wrote it before the turn row carried it (issue 32).
      const now = usageAsStored(db);
      db.exec("UPDATE usage SET turns = ?, calls = ?, cost = ?", now.turns!, now.calls!, now.cost!);
      db.exec("ALTER TABLE turns DROP COLUMN usage");
      db.exec("ALTER TABLE usage DROP COLUMN version");
      for (const column of ["stored_turns", "stored_bytes", "stopped_turns", "checks"])
        db.exec(`ALTER TABLE usage DROP COLUMN ${column}`);
      db.exec("DROP TABLE tool_sources");
      expect(
        db
          .exec("SELECT name FROM sqlite_schema WHERE name IN ('turn_ops', 'tool_sources')")
          .toArray(),
      ).toEqual([]);
    });
    // In a call of its own: an abort in the call that rewrote the rows would drop the rewrite.
    await runInDurableObject(runObject(runId), (_instance: unknown, state: DurableObjectState) =>
      state.abort("reload"),
    ).catch(() => {});
    expect(
      await sql(runId, "SELECT name FROM pragma_table_info('turns') WHERE name = 'usage'"),
    ).toEqual([]);
    const poll = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(poll.body.results).toEqual(first.body.results);
    expect(await usage(runId)).toEqual(was);
    const checked = await turn(runId, [{ id: "s1", name: CHECK, arguments: { operation_id: op } }]);
    expect(checked.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { status: "succeeded", operation_id: op },
    });
    const next = await turn(runId, [{ id: "c2", name, arguments: charge(2) }]);
    expect(next.body.results[0].status).toBe("succeeded");
    // Counted on from the old usage row: each turn and call once (a status check is no tool call).
    expect(await usage(runId)).toEqual({ turns: 3, tool_calls: 2, cost: 2 });
    const counts = await storedUsage(runId);
    expect({ stored_turns: counts.stored_turns, checks: counts.checks }).toEqual({
      stored_turns: 3,
      checks: 1,
    });
    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`);
    expect(cancelled.body.status).toBe("cancelled");
    expect((await trace(runId)).filter((e) => e.type === "turn_received")).toHaveLength(3);
    expect((await up.state()).effects).toHaveLength(2);
  });
});
