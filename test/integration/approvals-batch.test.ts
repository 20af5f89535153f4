// Batch decisions through the public API (issue 35 item 4), counted at the upstream: each item is
// decided as if alone — a stale hash, another tenant's operation, a race with a single decision —
// and reported; the approver's reason reaches the model verbatim across a re-post (item 6).
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  api,
  manifest,
  newTenant,
  operation,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { cancelRollback, charged, refundsOf, runObject, shop } from "../support/undo.ts";

async function approvalRun(as: Record<string, string> = {}) {
  const up = upstream();
  const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, as)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    { user: { id: "u1", scopes: [] }, tools: [tool.name] },
    as,
  );
  expect(run.status).toBe(201);
  return { up, name: tool.name as string, runId: run.body.run_id as string };
}

/** One call waiting for a person: its operation id and the input hash an approver sees. */
async function waiting(
  runId: string,
  name: string,
  amount: number,
  as: Record<string, string> = {},
) {
  const posted = await api(
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    { calls: [{ id: unique("call"), name, arguments: { amount, currency: "usd" } }] },
    { ...as, Prefer: "wait=0" },
  );
  const envelope = posted.body.results[0];
  expect(envelope.status).toBe("awaiting_approval");
  const view = await api("GET", `/v1/operations/${envelope.operation_id}`, undefined, as);
  return { id: envelope.operation_id as string, hash: view.body.approval.input_hash as string };
}

const batch = (items: unknown, as: Record<string, string> = {}) =>
  api("POST", "/v1/approvals/batch", items, as);
const STALE = "0".repeat(64);

describe("POST /v1/approvals/batch", () => {
  it("a stale hash is skipped and reported; the others are decided, each upstream effect once", async () => {
    const { up, runId, name } = await approvalRun();
    const [a, b, c] = [
      await waiting(runId, name, 10),
      await waiting(runId, name, 20),
      await waiting(runId, name, 30),
    ];
    const items = [
      { operation_id: a.id, input_hash: a.hash, decision: "approve", reason: "fine" },
      { operation_id: b.id, input_hash: STALE, decision: "approve" },
      { operation_id: c.id, input_hash: c.hash, decision: "reject", reason: "not this one" },
    ];
    const answer = await batch(items);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ decided_by: "test", decided_via: "api_key" });
    expect(answer.body.items).toEqual([
      { operation_id: a.id, result: "decided", state: "approved", phase: expect.any(String) },
      {
        operation_id: b.id,
        result: "skipped",
        reason: "input_hash_changed",
        detail: expect.stringContaining("nothing was decided"),
      },
      { operation_id: c.id, result: "decided", state: "rejected", phase: "recorded" },
    ]);
    expect((await operation(a.id, 5)).body.result.status).toBe("succeeded");
    expect((await operation(b.id)).body.approval.state).toBe("pending");
    // The same batch again: the decided ones are reported as already decided, nothing runs twice.
    const again = await batch(items);
    expect(again.body.items.map((i: any) => i.reason ?? i.result)).toEqual([
      "already_decided",
      "input_hash_changed",
      "already_decided",
    ]);
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.effects[0]!.body).toMatchObject({ amount: 10 });
    expect((await operation(b.id)).body.approval.state).toBe("pending");
  });

  it("another tenant's operation is skipped as not found, told apart from nothing, and left pending", async () => {
    const other = await newTenant(["runs:write", "runs:read", "tools:write", "approvals:decide"]);
    const as = { Authorization: `Bearer ${other.key}` };
    const { up, runId, name } = await approvalRun(as);
    const theirs = await waiting(runId, name, 10, as);
    const madeUp = `op_${"ab".repeat(16)}`;
    const answer = await batch([
      { operation_id: theirs.id, input_hash: theirs.hash, decision: "approve" },
      { operation_id: madeUp, input_hash: theirs.hash, decision: "approve" },
    ]);
    expect(answer.status).toBe(200);
    const [forTheirs, forNothing] = answer.body.items;
    expect(forTheirs).toEqual({ ...forNothing, operation_id: theirs.id });
    expect(forTheirs).toMatchObject({ result: "skipped", reason: "not_found" });
    expect(JSON.stringify(forTheirs)).not.toContain(name);
    expect((await operation(theirs.id, 0)).status).toBe(404);
    const owner = await api("GET", `/v1/operations/${theirs.id}`, undefined, as);
    expect(owner.body.approval.state).toBe("pending");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a batch racing a single decision on the same operation: decided once", async () => {
    const { up, runId, name } = await approvalRun();
    const op = await waiting(runId, name, 10);
    const [fromBatch, single] = await Promise.all([
      batch([{ operation_id: op.id, input_hash: op.hash, decision: "approve" }]),
      api("POST", `/v1/operations/${op.id}/reject`, { reason: "stop", input_hash: op.hash }),
    ]);
    expect(single.status).toBe(200);
    const item = fromBatch.body.items[0];
    const batchWon = item.result === "decided";
    if (!batchWon) expect(item.reason).toBe("already_decided");
    const settled = await operation(op.id, 5);
    expect(settled.body.approval.state).toBe(batchWon ? "approved" : "rejected");
    expect((await up.state()).effects).toHaveLength(batchWon ? 1 : 0);
    const decided = (await trace(runId)).filter((e) => e.type === "approval_decided");
    expect(decided).toHaveLength(1);
  });

  it("a bad batch decides nothing: duplicates, too many, unknown fields, a reject without a reason", async () => {
    const { up, runId, name } = await approvalRun();
    const op = await waiting(runId, name, 10);
    const item = { operation_id: op.id, input_hash: op.hash, decision: "approve" };
    for (const body of [
      [item, item],
      Array.from({ length: 101 }, (_, i) => ({
        ...item,
        operation_id: `op_${String(i).padStart(32, "0")}`,
      })),
      [{ ...item, approver: { id: "ceo" } }],
      [{ ...item, decision: "reject" }],
      [],
      { items: [item] },
    ]) {
      const refused = await batch(body);
      expect(refused.status).toBe(400);
      expect(refused.body.code).toBe("invalid_request");
    }
    expect((await operation(op.id)).body.approval.state).toBe("pending");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("an expired item is skipped as expired; nothing is sent", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      risk: "irreversible_write",
      approval: { mode: "always", expires_in_ms: 1_000 },
    });
    await api("PUT", `/v1/tools/${tool.name}`, tool);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
    });
    const op = await waiting(run.body.run_id, tool.name, 10);
    expect((await operation(op.id, 10)).body.approval.state).toBe("expired");
    const answer = await batch([{ operation_id: op.id, input_hash: op.hash, decision: "approve" }]);
    expect(answer.body.items[0]).toMatchObject({ result: "skipped", reason: "expired" });
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("a rollback's compensations through the batch", () => {
  it("the report names each submitted compensation with its input hash; the batch decides it as if alone, one refund per charge", async () => {
    const { up, charge, runId } = await shop();
    const charges = [
      await charged(runId, charge.name as string, 100),
      await charged(runId, charge.name as string, 200),
    ];
    let report = (await cancelRollback(runId)).body.rollback;
    for (let step = 0; step < charges.length; step++) {
      const current = report.steps[step];
      expect(current).toMatchObject({
        state: "submitted",
        compensation_input_hash: expect.any(String),
      });
      const view = await operation(current.compensation_id);
      expect(view.body.approval).toMatchObject({
        state: "pending",
        input_hash: current.compensation_input_hash,
      });
      const later = report.steps.slice(step + 1);
      expect(
        later.every((s: any) => s.compensation_id === null && s.compensation_input_hash === null),
      ).toBe(true);
      const answer = await batch([
        // The plan as the report lists it, plus the next step named with a stale hash: skipped.
        {
          operation_id: current.compensation_id,
          input_hash: current.compensation_input_hash,
          decision: "approve",
        },
        ...(step === 0
          ? [{ operation_id: `op_${"cd".repeat(16)}`, input_hash: STALE, decision: "approve" }]
          : []),
      ]);
      expect(answer.body.items[0]).toMatchObject({ result: "decided", state: "approved" });
      if (step === 0)
        expect(answer.body.items[1]).toMatchObject({ result: "skipped", reason: "not_found" });
      // Recorded, then the run's alarm takes the next step (a person's plan never skips the order).
      expect((await operation(current.compensation_id, 5)).body.result.status).toBe("succeeded");
      await runDurableObjectAlarm(runObject(runId));
      report = (await api("GET", `/v1/runs/${runId}`)).body.rollback;
    }
    expect(report.state).toBe("completed");
    const refunds = await refundsOf(up);
    expect(refunds.map((r) => r.body.amount)).toEqual([200, 100]);
  });
});

describe("the approver's reason reaches the model verbatim", () => {
  it("on reject, in the envelope's reason, exactly, and again when the same turn is posted again", async () => {
    const { up, runId, name } = await approvalRun();
    const reason = 'Customer said "stop" — twice.\nDo NOT refund; escalate to billing ✋';
    const body = {
      calls: [{ id: unique("call"), name, arguments: { amount: 5, currency: "usd" } }],
    };
    const first = await api("POST", `/v1/runs/${runId}/turns?format=native`, body);
    const op = first.body.results[0];
    const view = await api("GET", `/v1/operations/${op.operation_id}`);
    const answer = await batch([
      {
        operation_id: op.operation_id,
        input_hash: view.body.approval.input_hash,
        decision: "reject",
        reason,
      },
    ]);
    expect(answer.body.items[0].result).toBe("decided");
    for (let post = 0; post < 2; post++) {
      // The second time from storage alone: the run's stored turn keeps the words too.
      if (post === 1) await evictDurableObject(runObject(runId));
      const reposted = await api("POST", `/v1/runs/${runId}/turns?format=native`, body);
      expect(reposted.body.turn_id).toBe(first.body.turn_id);
      expect(reposted.body.results[0]).toMatchObject({
        status: "rejected",
        code: "approval_rejected",
        reason,
      });
      expect(reposted.body.results[0].message).toContain(reason);
    }
    const polled = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(polled.body.results[0].reason).toBe(reason);
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("in the provider's own wrapper too (Anthropic tool_result), across a re-post", async () => {
    const { runId, name } = await approvalRun();
    const reason = 'Amount looks wrong: 5 ≠ 50. {"json": true}';
    const id = `toolu_${unique("x")}`;
    const body = {
      role: "assistant",
      content: [{ type: "tool_use", id, name, input: { amount: 5, currency: "usd" } }],
    };
    const first = await api("POST", `/v1/runs/${runId}/turns?format=anthropic`, body);
    expect(first.status).toBe(202);
    const ops = await api("GET", `/v1/approvals?state=pending`);
    const item = ops.body.items.find((i: any) => i.run_id === runId);
    await api("POST", `/v1/operations/${item.operation_id}/reject`, { reason });
    const reposted = await api("POST", `/v1/runs/${runId}/turns?format=anthropic`, body);
    const block = reposted.body.results.content[0];
    expect(block).toMatchObject({ type: "tool_result", tool_use_id: id, is_error: true });
    const text = typeof block.content === "string" ? block.content : block.content[0].text;
    expect(JSON.parse(text).reason).toBe(reason);
  });
});
