// Approvals through the public API, counted at the upstream: nothing is sent until a person
// approves; reject and expiry send nothing; a decision is taken once; four eyes; approval is not
// authorization (scopes and the tool's version are checked again); the inbox; turns that wait.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  api,
  manifest,
  newTenant,
  operation,
  opStub,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

async function approvalRun(
  overrides: Record<string, unknown> = {},
  scopes: string[] = ["payments:charge"],
) {
  const up = upstream();
  const tool = manifest({
    url: up.url,
    risk: "irreversible_write",
    requires_scopes: ["payments:charge"],
    ...overrides,
  });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes }, tools: [tool.name] });
  expect(run.status).toBe(201);
  return { up, tool, name: tool.name as string, runId: run.body.run_id as string };
}
const charge = (runId: string, name: string, amount = 100, id = unique("call")) =>
  turn(runId, [{ id, name, arguments: { amount, currency: "usd" } }], 0);
const approve = (operationId: string, body: Record<string, unknown> = {}) =>
  api("POST", `/v1/operations/${operationId}/approve`, body);
const reject = (operationId: string, reason = "not this one") =>
  api("POST", `/v1/operations/${operationId}/reject`, { reason });

describe("approvals", () => {
  it("an irreversible write waits for a person: 202, awaiting_approval, nothing sent; approve → one effect and the turn shows it", async () => {
    const { up, runId, name } = await approvalRun();
    const res = await charge(runId, name, 100, "c1");
    expect(res.status).toBe(202);
    const waiting = res.body.results[0];
    expect(waiting).toMatchObject({
      status: "awaiting_approval",
      code: "approval_required",
      allowed_next_actions: ["wait", "check_status", "tell_user"],
    });
    expect(waiting.message).toMatch(/person must approve/);
    expect((await up.state()).requests).toHaveLength(0);

    const inbox = await api("GET", "/v1/approvals?state=pending");
    const item = inbox.body.items.find((i: any) => i.operation_id === waiting.operation_id);
    expect(item).toMatchObject({
      run_id: runId,
      tool: name,
      arguments: { amount: 100, currency: "usd" },
      requested_by: "u1",
      state: "pending",
    });
    expect(item.target).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/ns\/.+\/charges$/);
    expect(Date.parse(item.expires_at) - Date.parse(item.requested_at)).toBe(15 * 60_000);

    const decided = await approve(waiting.operation_id, { reason: "looks right" });
    expect(decided.status).toBe(200);
    expect(decided.body.approval).toMatchObject({
      state: "approved",
      decided_by: "test",
      reason: "looks right",
    });
    const polled = await api("GET", `/v1/runs/${runId}/turns/${res.body.turn_id}?wait=5`);
    expect(polled.status).toBe(200);
    expect(polled.body.results[0]).toMatchObject({
      status: "succeeded",
      operation_id: waiting.operation_id,
    });
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests[0]!.key).toBe(decided.body.idempotency_key);
    const after = await api("GET", "/v1/approvals?state=decided");
    expect(
      after.body.items.find((i: any) => i.operation_id === waiting.operation_id),
    ).toMatchObject({ state: "approved", decided_by: "test", reason: "looks right" });
  });

  it("reject → approval_rejected with the reason; zero requests; a later approve executes nothing", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const rejected = await reject(op, "customer asked to stop");
    expect(rejected.body.result).toMatchObject({ status: "rejected", code: "approval_rejected" });
    expect(rejected.body.result.message).toContain("customer asked to stop");
    const again = await approve(op);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      phase: "recorded",
      result: { code: "approval_rejected" },
      approval: { state: "rejected" },
    });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("an approval expires by alarm → approval_expired, zero requests, a late approve executes nothing", async () => {
    const { up, runId, name } = await approvalRun({
      approval: { mode: "always", expires_in_ms: 1_000 },
    });
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const expired = await operation(op, 10);
    expect(expired.body).toMatchObject({
      phase: "recorded",
      result: { status: "rejected", code: "approval_expired" },
      approval: { state: "expired" },
    });
    expect((await approve(op)).body.result.code).toBe("approval_expired");
    expect((await up.state()).requests).toHaveLength(0);
    expect(
      (await api("GET", "/v1/approvals?state=decided")).body.items.find(
        (i: any) => i.operation_id === op,
      ).state,
    ).toBe("expired");
  });

  it("decided once: approve twice, and five times concurrently → one effect", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map((n) => approve(op, { reason: `approver ${n}` })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    await operation(op, 5);
    expect((await approve(op)).status).toBe(200);
    expect((await up.state()).effects).toHaveLength(1);
    const reasons = new Set(results.map((r) => r.body.approval.reason));
    expect(reasons.size).toBe(1);
  });

  it("four eyes: the run's own user cannot approve; four_eyes: false allows it", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const self = await approve(op, { approver: { id: "u1" } });
    expect(self).toMatchObject({ status: 403, body: { code: "self_approval" } });
    expect((await operation(op)).body.phase).toBe("awaiting_approval");
    expect((await approve(op, { approver: { id: "supervisor_7" } })).body.approval.decided_by).toBe(
      "supervisor_7",
    );
    await operation(op, 5);
    expect((await up.state()).effects).toHaveLength(1);

    const relaxed = await approvalRun({ approval: { mode: "always", four_eyes: false } });
    const op2 = (await charge(relaxed.runId, relaxed.name)).body.results[0].operation_id;
    expect((await approve(op2, { approver: { id: "u1" } })).status).toBe(200);
  });

  it("four eyes cannot be passed by naming someone: approver.id needs approvals:delegate; otherwise the approver is the key", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const issue = async (keyName: string, scopes: string[]) => {
      const { tenantId } = await testTenant();
      const issued = await api(
        "POST",
        `/v1/admin/tenants/${tenantId}/keys`,
        { name: keyName, scopes },
        { Authorization: `Bearer ${ADMIN}` },
      );
      return { Authorization: `Bearer ${issued.body.key}` };
    };
    // The run's own user holds a deciding key and names a colleague: refused, nothing decided.
    const own = await issue("u1", ["approvals:decide"]);
    const named = await api(
      "POST",
      `/v1/operations/${op}/approve`,
      { approver: { id: "supervisor_7" } },
      own,
    );
    expect(named).toMatchObject({ status: 403, body: { code: "forbidden" } });
    expect(named.body.detail).toContain("approvals:delegate");
    const rejectNamed = await api(
      "POST",
      `/v1/operations/${op}/reject`,
      { reason: "no", approver: { id: "supervisor_7" } },
      own,
    );
    expect(rejectNamed.status).toBe(403);
    // Without naming anyone the approver is the key's name, and four eyes sees it is the run's user.
    expect(await api("POST", `/v1/operations/${op}/approve`, {}, own)).toMatchObject({
      status: 403,
      body: { code: "self_approval" },
    });
    expect((await operation(op)).body.phase).toBe("awaiting_approval");
    expect((await up.state()).requests).toHaveLength(0);

    // A service key trusted to delegate may decide on a named person's behalf.
    const service = await issue("approvals-service", ["approvals:decide", "approvals:delegate"]);
    const delegated = await api(
      "POST",
      `/v1/operations/${op}/approve`,
      { approver: { id: "supervisor_7" } },
      service,
    );
    expect(delegated.body.approval.decided_by).toBe("supervisor_7");
    await operation(op, 5);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("approval is not authorization: scopes revoked while waiting → forbidden, zero requests", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    expect((await api("PATCH", `/v1/runs/${runId}`, { user: { scopes: [] } })).status).toBe(200);
    const decided = await approve(op);
    expect(decided.body.result).toMatchObject({ status: "rejected", code: "forbidden" });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a changed tool cannot ride an old approval; changed arguments are another operation", async () => {
    const { up, tool, runId, name } = await approvalRun();
    const first = (await charge(runId, name, 100)).body.results[0].operation_id;
    const other = (await charge(runId, name, 999)).body.results[0];
    expect(other.operation_id).not.toBe(first);
    expect(other.status).toBe("awaiting_approval");
    // The tool changes (a new limit) while the first call waits.
    const tightened = { ...tool, limits: { amount: { max: 50 } } };
    expect((await api("PUT", `/v1/tools/${name}`, tightened)).status).toBe(200);
    expect((await api("PATCH", `/v1/runs/${runId}`, { tools: [name] })).status).toBe(200);
    const decided = await approve(first);
    expect(decided.body.result).toMatchObject({ status: "rejected", code: "approval_expired" });
    expect(decided.body.result.message).toMatch(/changed/);
    // A decision naming other arguments than the operation holds is refused.
    const mismatch = await approve(other.operation_id, { input_hash: decided.body.input_hash });
    expect(mismatch).toMatchObject({ status: 409, body: { code: "approval_mismatch" } });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a plan stored before the rename (the tool's version as `policyVersion`) still binds its approval: the same version approves, another is refused", async () => {
    const { up, runId, name } = await approvalRun();
    const [a, b] = [
      (await charge(runId, name, 100)).body.results[0].operation_id,
      (await charge(runId, name, 200)).body.results[0].operation_id,
    ];
    const asWrittenBefore = async (id: string) => {
      await runInDurableObject(opStub(id), (_i: unknown, state: DurableObjectState) => {
        const sql = state.storage.sql;
        const frozen = JSON.parse(
          sql.exec<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1").one().frozen,
        );
        frozen.plan.approval.policyVersion = frozen.plan.approval.toolVersion;
        delete frozen.plan.approval.toolVersion;
        sql.exec("UPDATE op_log SET frozen = ? WHERE seq = 1", JSON.stringify(frozen));
      });
      await evictDurableObject(opStub(id));
    };
    const version = (await operation(a)).body.approval.policy_version as string;
    expect(version).toMatch(/^[0-9a-f]{64}$/);
    await asWrittenBefore(a);
    await asWrittenBefore(b);
    expect((await operation(a)).body.approval.policy_version).toBe(version);
    const other = await approve(b, { policy_version: "0".repeat(64) });
    expect(other).toMatchObject({ status: 409, body: { code: "approval_mismatch" } });
    const decided = await approve(a, { policy_version: version });
    expect(decided.status).toBe(200);
    await up.waitForEffects(1);
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([100]);
  });

  it("cross-tenant: approve, reject and the inbox see nothing of another tenant", async () => {
    const { up, runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const other = await newTenant(["approvals:decide", "runs:read"]);
    const as = { Authorization: `Bearer ${other.key}` };
    expect((await api("POST", `/v1/operations/${op}/approve`, {}, as)).status).toBe(404);
    expect((await api("POST", `/v1/operations/${op}/reject`, { reason: "x" }, as)).status).toBe(
      404,
    );
    expect((await api("GET", "/v1/approvals?state=pending", undefined, as)).body.items).toEqual([]);
    expect((await operation(op)).body.phase).toBe("awaiting_approval");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a key without approvals:decide cannot decide", async () => {
    const { runId, name } = await approvalRun();
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const narrow = await newTenant(["runs:write"]);
    expect(
      (
        await api(
          "POST",
          `/v1/operations/${op}/approve`,
          {},
          { Authorization: `Bearer ${narrow.key}` },
        )
      ).status,
    ).toBe(403);
  });

  it("cancelling a call that awaits approval → cancelled; approving it afterwards executes nothing", async () => {
    const { up, runId, name } = await approvalRun();
    const res = await charge(runId, name);
    const op = res.body.results[0].operation_id;
    expect((await api("POST", `/v1/operations/${op}/cancel`)).body.result).toMatchObject({
      status: "cancelled",
    });
    expect((await approve(op)).body.result.status).toBe("cancelled");
    const polled = await api("GET", `/v1/runs/${runId}/turns/${res.body.turn_id}`);
    expect(polled.body.results[0]).toMatchObject({ status: "cancelled" });
    expect((await up.state()).requests).toHaveLength(0);
    expect(
      (await api("GET", "/v1/approvals?state=decided")).body.items.find(
        (i: any) => i.operation_id === op,
      ).state,
    ).toBe("cancelled");
  });

  it("a when rule: 50 runs at once, the 150s wait and the 50s run", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      approval: { when: { amount: { gt: 100 } } },
      timeout_ms: 20_000,
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, async (_, index) => {
        const run = await api("POST", "/v1/runs", {
          user: { id: `u${index}` },
          tools: [tool.name],
        });
        const amount = index % 2 === 0 ? 50 : 150;
        const res = await turn(
          run.body.run_id,
          [{ id: "c1", name: tool.name, arguments: { amount, currency: "usd" } }],
          // A 50 waits for its answer; on a loaded machine 50 runs at once can pass 10 s.
          amount === 50 ? 25 : 0,
        );
        return [amount, res.body.results[0].status] as const;
      }),
    );
    expect(
      outcomes.filter(([amount]) => amount === 50).every(([, status]) => status === "succeeded"),
    ).toBe(true);
    expect(
      outcomes
        .filter(([amount]) => amount === 150)
        .every(([, status]) => status === "awaiting_approval"),
    ).toBe(true);
    expect((await up.state()).effects).toHaveLength(25);
  }, 60_000);

  it("waiting is not failing: an Anthropic tool_result for a waiting call is not an error", async () => {
    const { runId, name } = await approvalRun();
    const message = {
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_w", name, input: { amount: 5, currency: "usd" } }],
    };
    const res = await api("POST", `/v1/runs/${runId}/turns?format=anthropic`, message, {
      Prefer: "wait=1",
    });
    expect(res.status).toBe(202);
    expect(res.body.results.content[0]).toMatchObject({
      type: "tool_result",
      tool_use_id: "toolu_w",
      is_error: false,
    });
    expect(JSON.parse(res.body.results.content[0].content).status).toBe("awaiting_approval");
  });

  it("inbox pages newest first with a cursor; bad queries are typed", async () => {
    const { runId, name } = await approvalRun();
    const ops: string[] = [];
    for (const amount of [1, 2, 3])
      ops.push((await charge(runId, name, amount)).body.results[0].operation_id);
    const page1 = await api("GET", "/v1/approvals?state=pending&limit=2");
    const page2 = await api(
      "GET",
      `/v1/approvals?state=pending&limit=2&cursor=${page1.body.next_cursor}`,
    );
    const listed = [...page1.body.items, ...page2.body.items].map((i: any) => i.operation_id);
    const mine = listed.filter((id: string) => ops.includes(id));
    expect(mine).toEqual([...ops].reverse());
    expect(page1.body.items).toHaveLength(2);
    expect((await api("GET", "/v1/approvals?state=maybe")).body.code).toBe("invalid_request");
  });

  it("an approver preview: one read when approval is asked, stored with the request, nothing committed", async () => {
    const up = upstream();
    const { tool, name, runId } = await approvalRun({
      preview: { url: `${up.url}/quotes/{currency}?amount={amount}` },
    });
    void tool;
    const op = (await charge(runId, name, 120)).body.results[0].operation_id;
    const view = await operation(op);
    expect(view.body.approval.preview).toMatchObject({
      status: 200,
      body: { path: "/quotes/usd" },
      detail: null,
    });
    const item = (await api("GET", "/v1/approvals?state=pending")).body.items.find(
      (i: any) => i.operation_id === op,
    );
    expect(item.preview).toEqual({ ...view.body.approval.preview, truncated: false });
    const state = await up.state();
    expect(state.requests.map((r) => [r.method, r.path])).toEqual([
      ["GET", "/quotes/usd?amount=120"],
    ]);
    expect(state.effects).toHaveLength(0);
    const never = manifest({
      url: up.url,
      approval: "never",
      preview: { url: `${up.url}/quotes` },
    });
    expect((await api("PUT", `/v1/tools/${never.name}`, never)).body.code).toBe("invalid_manifest");
  });

  it("toolgate_check_status: offered with any write, in every format; returns the live envelope of this run's operation only", async () => {
    const { up, runId, name } = await approvalRun();
    for (const format of ["anthropic", "openai-responses", "openai-chat", "mcp", "native"]) {
      const listed = JSON.stringify(
        (await api("GET", `/v1/runs/${runId}/tools?format=${format}`)).body.tools,
      );
      expect(listed, format).toContain("toolgate_check_status");
    }
    const op = (await charge(runId, name)).body.results[0].operation_id;
    const check = (id: string, args: unknown, run = runId) =>
      turn(run, [{ id, name: "toolgate_check_status", arguments: args }], 0);
    const waiting = await check("s1", { operation_id: op });
    expect(waiting.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { status: "awaiting_approval", operation_id: op },
    });
    await approve(op);
    await operation(op, 5);
    const done = await check("s2", { operation_id: op });
    expect(done.body.results[0].result).toMatchObject({ status: "succeeded", operation_id: op });
    // Another run (same tenant) cannot read it; a malformed or extra argument is refused; nothing is sent.
    const other = await approvalRun();
    expect((await check("s3", { operation_id: op }, other.runId)).body.results[0]).toMatchObject({
      status: "rejected",
      code: "not_found",
    });
    expect((await check("s4", { operation_id: "op_nope" })).body.results[0]).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
    expect((await check("s5", { operation_id: op, force: true })).body.results[0].code).toBe(
      "invalid_arguments",
    );
    expect((await up.state()).effects).toHaveLength(1);
    // A run with reads only is not offered it.
    const read = manifest({ url: up.url, risk: "read", idempotency: { mode: "none" } });
    await api("PUT", `/v1/tools/${read.name}`, read);
    const readRun = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [read.name] });
    expect(JSON.stringify(readRun.body.tools)).not.toContain("toolgate_check_status");
    expect(
      (await check("s6", { operation_id: op }, readRun.body.run_id)).body.results[0].code,
    ).toBe("unknown_tool");
    const reserved = manifest({ url: up.url, name: "toolgate_check_status" });
    expect((await api("PUT", "/v1/tools/toolgate_check_status", reserved)).body.code).toBe(
      "invalid_manifest",
    );
  });
});
