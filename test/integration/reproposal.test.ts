// A call that re-proposes an operation that already exists (a new call id, the same arguments) gets
// that operation's stored outcome whatever the budgets or a cancel say, and pays nothing; only a
// call that would create an operation is refused, in words that stay true. A settled turn's
// accounting is final: pruning its operations never gives budget back. A re-proposal of a pruned
// operation says how the identical request settled, not that it was "handled".
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, fireAlarm, manifest, operation, turn, upstream } from "../support/api.ts";

afterEach(() => {
  vi.useRealTimers();
});

const charge = { amount: 500, currency: "usd" };
/** Any wording that claims the call had no effect. */
const NOT_APPLIED = /not executed|did not take effect|nothing was sent|before it took effect/i;

async function budgetedRun(tool: Record<string, unknown>, budgets: Record<string, number>) {
  expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
    budgets,
  });
  expect(run.status).toBe(201);
  return { runId: run.body.run_id as string, name: tool.name as string };
}
const usage = async (runId: string) => (await api("GET", `/v1/runs/${runId}`)).body.usage;

describe("a re-proposal of a write that already ran", () => {
  it("max_tool_calls used up by that very charge: the stored result, charged nothing; only a new charge is refused, truthfully", async () => {
    const up = upstream();
    const { runId, name } = await budgetedRun(manifest({ url: up.url }), { max_tool_calls: 1 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0].status).toBe("succeeded");
    const op = first.body.results[0].operation_id as string;

    // The agent crashed before the model saw the result; the model proposes it again.
    const again = await turn(runId, [{ id: "c2", name, arguments: charge }]);
    expect(again.body.results[0]).toEqual(first.body.results[0]);
    expect(again.body.results[0]).toMatchObject({ status: "succeeded", operation_id: op });
    expect(await usage(runId)).toMatchObject({ tool_calls: 1 });

    const other = await turn(runId, [{ id: "c3", name, arguments: { ...charge, amount: 7 } }]);
    expect(other.body.results[0]).toMatchObject({
      status: "budget_exhausted",
      code: "max_tool_calls",
    });
    expect(other.body.results[0].message).not.toMatch(NOT_APPLIED);
    expect(other.body.results[0].message).toMatch(/If an identical earlier call already ran/);
    expect((await up.state()).effects).toHaveLength(1);
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("the run cancelled after the charge: the stored result, not 'cancelled … not executed'; a new charge is refused", async () => {
    const up = upstream();
    const { runId, name } = await budgetedRun(manifest({ url: up.url }), {});
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0].status).toBe("succeeded");
    expect((await api("POST", `/v1/runs/${runId}/cancel`)).body.status).toBe("cancelled");

    const again = await turn(runId, [{ id: "c2", name, arguments: charge }]);
    expect(again.body.results[0]).toEqual(first.body.results[0]);
    const other = await turn(runId, [{ id: "c3", name, arguments: { ...charge, amount: 8 } }]);
    expect(other.body.results[0]).toMatchObject({ status: "cancelled", code: "cancelled" });
    expect(other.body.results[0].message).not.toMatch(NOT_APPLIED);
    expect((await up.state()).effects).toHaveLength(1);
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe("retention and the run's accounting", () => {
  it("polling turns whose operations were pruned refunds nothing: max_cost stays spent and a new charge is refused", async () => {
    const up = upstream();
    const { runId, name } = await budgetedRun(manifest({ url: up.url, cost: 1 }), { max_cost: 2 });
    const turns = [];
    for (const [id, amount] of [
      ["c1", 1],
      ["c2", 2],
    ] as const) {
      const res = await turn(runId, [{ id, name, arguments: { ...charge, amount } }]);
      expect(res.body.results[0].status).toBe("succeeded");
      turns.push(res.body);
    }
    expect(await usage(runId)).toEqual({ turns: 2, tool_calls: 2, cost: 2 });

    // Two days and a minute later (the test deployment's retention), both operations are pruned.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
    for (const t of turns) {
      expect(await fireAlarm(t.results[0].operation_id)).toBe(true);
      expect((await operation(t.results[0].operation_id)).status).toBe(410);
    }
    for (const t of turns)
      expect((await api("GET", `/v1/runs/${runId}/turns/${t.turn_id}`)).status).toBe(410);
    expect(await usage(runId)).toEqual({ turns: 2, tool_calls: 2, cost: 2 });

    const more = await turn(runId, [{ id: "c3", name, arguments: { ...charge, amount: 3 } }]);
    expect(more.body.results[0]).toMatchObject({ status: "budget_exhausted", code: "max_cost" });
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("a re-proposal of a pruned request a person rejected says it was settled as rejected, never that it was handled; nothing is sent", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      approval: { mode: "always", expires_in_ms: 7 * 24 * 60 * 60_000 },
    });
    const { runId, name } = await budgetedRun(tool, {});
    const asked = await turn(runId, [{ id: "c1", name, arguments: charge }], 0);
    const op = asked.body.results[0].operation_id as string;
    expect(asked.body.results[0].status).toBe("awaiting_approval");
    const rejected = await api("POST", `/v1/operations/${op}/reject`, { reason: "no" });
    expect(rejected.body.result).toMatchObject({ status: "rejected" });

    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 24 * 60 * 60_000 + 60_000);
    expect(await fireAlarm(op)).toBe(true);
    const gone = await operation(op);
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ code: "operation_pruned", settled_as: "rejected" });

    const again = await turn(runId, [{ id: "c2", name, arguments: charge }], 0);
    expect(again.status).toBe(410);
    expect(again.body).toMatchObject({
      code: "operation_pruned",
      operation_id: op,
      settled_as: "rejected",
      pruned: [{ call_id: "c2", operation_id: op, settled_as: "rejected" }],
      results: [{ status: "rejected", code: "operation_pruned", operation_id: op }],
    });
    const message = again.body.results[0].message as string;
    expect(message).toMatch(/settled earlier as rejected/);
    expect(message).not.toMatch(/handled|succeeded/);
    expect(again.body.detail).toMatch(/settled earlier as rejected/);
    expect((await up.state()).requests).toHaveLength(0);
  });
});
