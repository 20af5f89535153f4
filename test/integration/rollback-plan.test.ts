// A rollback's compensations approved as one plan (issue 35 item 4), through the public API and
// counted at the upstream: one approval of the plan as shown (each hash and tool version) runs
// every compensation without a second approval; a step whose compensation changed since asks a
// person; a plan changed since it was read, another tenant, a wrong list and the run's own user
// (four eyes) approve nothing.
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  newTenant,
  operation,
  storedText,
  testTenant,
  upstream,
} from "../support/api.ts";
import { countRpcs, rpcCounts } from "../../src/durable/rpc-model.ts";
import { consoleAs, hidden } from "../support/console-page.ts";
import {
  cancelRollback,
  charged,
  put,
  REFUND_SCHEMA,
  refundRequestsOf,
  refundTool,
  refundsOf,
  runObject,
  UNDO,
} from "../support/undo.ts";

/** A refund tool, a charge declaring it, a run with a customer, two charges, then a rollback. */
async function rolledBack(refundExtra: Record<string, unknown> = {}) {
  await testTenant();
  const up = upstream();
  const refund = refundTool(up.url, refundExtra);
  expect((await put(refund)).status).toBe(201);
  const charge = manifest({ url: up.url, compensate: { tool: refund.name, arguments: UNDO } });
  expect((await put(charge)).status).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [charge.name],
    context: { customer_id: "cus_1" },
  });
  const runId = run.body.run_id as string;
  const first = await charged(runId, charge.name as string, 100);
  const second = await charged(runId, charge.name as string, 200);
  const report = (await cancelRollback(runId)).body.rollback;
  expect(report.steps.map((s: any) => s.state)).toEqual(["submitted", "pending"]);
  return { up, refund, runId, first, second, report };
}

const plan = (runId: string, as: Record<string, string> = {}) =>
  api("GET", `/v1/runs/${runId}/rollback`, undefined, as);
const approvePlan = (runId: string, body: unknown, as: Record<string, string> = {}) =>
  api("POST", `/v1/runs/${runId}/rollback/approve`, body, as);
/** What GET …/rollback showed, as the approval names it: each item's hash and tool version. */
const shownOf = (body: { items: Array<{ input_hash: string; policy_version: string }> }) =>
  body.items.map(({ input_hash, policy_version }) => ({ input_hash, policy_version }));

/** Drives the run's alarm once the current compensation is recorded; the rollback's report after. */
async function nextStep(runId: string, compensationId: string) {
  await operation(compensationId, 5);
  await runDurableObjectAlarm(runObject(runId));
  return (await api("GET", `/v1/runs/${runId}`)).body.rollback;
}

describe("POST /v1/runs/{id}/rollback/approve", () => {
  it("a rollback of two charges approved once: both refunds run, newest first, no second approval asked", async () => {
    const { up, runId, first, second, report } = await rolledBack();
    const shown = (await plan(runId)).body;
    expect(shown.items).toHaveLength(2);
    // Newest first; the waiting step's hash is its compensation's, the next one rendered now.
    expect(shown.items.map((i: any) => [i.operation_id, i.arguments.amount])).toEqual([
      [second.operation_id, 200],
      [first.operation_id, 100],
    ]);
    expect(shown.items[0]).toMatchObject({
      compensation_id: report.steps[0].compensation_id,
      input_hash: report.steps[0].compensation_input_hash,
    });
    const hashes = shown.items.map((i: any) => i.input_hash);
    const approved = await approvePlan(runId, { items: shownOf(shown), reason: "undo the run" });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ decided_by: "test", decided_via: "api_key" });
    expect(approved.body.approvals).toEqual([
      expect.objectContaining({ by: "test", input_hashes: hashes, reason: "undo the run" }),
    ]);
    let now = await nextStep(runId, report.steps[0].compensation_id);
    const secondComp = now.steps[1].compensation_id;
    expect(now.steps[1].compensation_input_hash).toBe(hashes[1]);
    now = await nextStep(runId, secondComp);
    expect(now.state).toBe("completed");
    const refunds = await refundsOf(up);
    expect(refunds.map((r) => r.body.amount)).toEqual([200, 100]);
    // Each compensation was approved by the plan's approver, with the plan's reason: no person asked.
    for (const step of now.steps) {
      const view = (await operation(step.compensation_id)).body;
      expect(view.approval).toMatchObject({
        state: "approved",
        decided_by: "test",
        reason: "undo the run",
      });
    }
    expect((await api("GET", "/v1/approvals?state=pending")).body.items).toEqual(
      expect.not.arrayContaining([expect.objectContaining({ operation_id: secondComp })]),
    );
  });

  it("the approval binds to what was shown: a refund tool PUT again between the GET and the POST (same hash) is 409, then the plan read again runs both refunds once", async () => {
    await testTenant();
    const up = upstream();
    // Each charge has its own refund tool: the older charge's refund (not reached yet) changes,
    // the newer one's (submitted, waiting for approval) does not.
    const refundOld = refundTool(up.url);
    const refundNew = refundTool(up.url);
    const chargeOld = manifest({
      url: up.url,
      compensate: { tool: refundOld.name, arguments: UNDO },
    });
    const chargeNew = manifest({
      url: up.url,
      compensate: { tool: refundNew.name, arguments: UNDO },
    });
    for (const tool of [refundOld, refundNew, chargeOld, chargeNew])
      expect((await put(tool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [chargeOld.name, chargeNew.name],
    });
    const runId = run.body.run_id as string;
    await charged(runId, chargeOld.name as string, 100);
    await charged(runId, chargeNew.name as string, 200);
    const report = (await cancelRollback(runId)).body.rollback;
    const shown = shownOf((await plan(runId)).body);
    // A real change to the older charge's refund tool: its next compensation's arguments (and so
    // its hash) are the same, under another version of the tool.
    expect((await put({ ...refundOld, timeout_ms: 400 })).status).toBeLessThan(300);
    const now = shownOf((await plan(runId)).body);
    expect(now.map((i) => i.input_hash)).toEqual(shown.map((i) => i.input_hash));
    expect(now[0]!.policy_version).toBe(shown[0]!.policy_version);
    expect(now[1]!.policy_version).not.toBe(shown[1]!.policy_version);
    const stale = await approvePlan(runId, { items: shown });
    expect(stale).toMatchObject({ status: 409, body: { code: "approval_mismatch" } });
    expect(stale.body.detail).toContain(refundOld.name as string);
    // Nothing stored, nothing decided: the newer refund still waits for a person, none was sent.
    expect((await plan(runId)).body.approvals).toEqual([]);
    await runDurableObjectAlarm(runObject(runId));
    const waiting = (await operation(report.steps[0].compensation_id)).body;
    expect(waiting.phase).toBe("awaiting_approval");
    expect(await refundsOf(up)).toHaveLength(0);
    // The plan read again, as it stands now: both refunds run, each once.
    expect((await approvePlan(runId, { items: now })).status).toBe(200);
    let after = await nextStep(runId, report.steps[0].compensation_id);
    after = await nextStep(runId, after.steps[1].compensation_id);
    expect(after.state).toBe("completed");
    expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([200, 100]);
  });

  it("a step whose compensation changed since the plan was approved asks a person", async () => {
    const { up, refund, runId, report } = await rolledBack();
    const items = shownOf((await plan(runId)).body);
    const hashes = items.map((i) => i.input_hash);
    expect((await approvePlan(runId, { items })).status).toBe(200);
    await operation(report.steps[0].compensation_id, 5);
    // The refund tool now binds the run's customer: the next refund's arguments are other ones.
    const bound = {
      ...refund,
      input_schema: {
        ...REFUND_SCHEMA,
        properties: { ...REFUND_SCHEMA.properties, customer_id: { type: "string" } },
      },
      bind: { customer_id: "context.customer_id" },
    };
    expect((await put(bound)).status).toBeLessThan(300);
    await runDurableObjectAlarm(runObject(runId));
    const now = (await api("GET", `/v1/runs/${runId}`)).body.rollback;
    const step = now.steps[1];
    expect(step.state).toBe("submitted");
    expect(step.compensation_input_hash).not.toBe(hashes[1]);
    const view = (await operation(step.compensation_id)).body;
    expect(view.phase).toBe("awaiting_approval");
    expect(view.approval.state).toBe("pending");
    await runDurableObjectAlarm(runObject(runId));
    expect((await operation(step.compensation_id)).body.phase).toBe("awaiting_approval");
    expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([200]);
    // A person decides it alone: then it runs.
    const approved = await api("POST", `/v1/operations/${step.compensation_id}/approve`, {
      input_hash: step.compensation_input_hash,
    });
    expect(approved.status).toBe(200);
    await operation(step.compensation_id, 5);
    expect((await refundsOf(up)).map((r) => r.body)).toEqual([
      expect.objectContaining({ amount: 200 }),
      expect.objectContaining({ amount: 100, customer_id: "cus_1" }),
    ]);
  });

  it("another tenant reads and approves nothing; the run's own user is refused under four eyes; a wrong list is 409", async () => {
    const { up, runId, report } = await rolledBack();
    const items = shownOf((await plan(runId)).body);
    const other = await newTenant(["approvals:decide", "runs:read"]);
    const as = { Authorization: `Bearer ${other.key}` };
    expect((await plan(runId, as)).status).toBe(404);
    const foreign = await approvePlan(runId, { items }, as);
    expect(foreign).toMatchObject({ status: 404, body: { code: "not_found" } });
    const own = await approvePlan(runId, { items, approver: { id: "u1" } });
    expect(own).toMatchObject({ status: 403, body: { code: "self_approval" } });
    const reordered = await approvePlan(runId, { items: [...items].reverse() });
    expect(reordered).toMatchObject({ status: 409, body: { code: "approval_mismatch" } });
    const partial = await approvePlan(runId, { items: items.slice(0, 1) });
    expect(partial).toMatchObject({ status: 409, body: { code: "approval_mismatch" } });
    const unknown = await approvePlan(runId, { items, decide: "all" });
    expect(unknown).toMatchObject({ status: 400, body: { code: "invalid_request" } });
    // Nothing was stored or decided: the plan has no approval, the refund still waits, none sent.
    expect((await plan(runId)).body.approvals).toEqual([]);
    await runDurableObjectAlarm(runObject(runId));
    const view = (await operation(report.steps[0].compensation_id)).body;
    expect(view.phase).toBe("awaiting_approval");
    expect(await refundsOf(up)).toHaveLength(0);
  });

  it("routing applies as to a single approval: a plan approver outside the refund's group is named in the step, a member's plan approval runs it", async () => {
    const route = [{ group: { name: "finance", members: ["carol"] } }];
    const { up, runId, report } = await rolledBack({ approval: { mode: "always", route } });
    const items = shownOf((await plan(runId)).body);
    // "test" may approve plans, but is not in the refund's group: its decision is not counted.
    expect((await approvePlan(runId, { items })).status).toBe(200);
    const step = (await api("GET", `/v1/runs/${runId}`)).body.rollback.steps[0];
    expect(step).toMatchObject({ state: "submitted" });
    expect(step.detail).toContain("test: not_an_approver");
    expect((await operation(report.steps[0].compensation_id)).body.phase).toBe("awaiting_approval");
    expect(await refundsOf(up)).toHaveLength(0);
    // carol approves the same plan (a delegating key naming her): both refunds run.
    const carol = await approvePlan(runId, { items, approver: { id: "carol" } });
    expect(carol.status).toBe(200);
    let now = await nextStep(runId, report.steps[0].compensation_id);
    now = await nextStep(runId, now.steps[1].compensation_id);
    expect(now.state).toBe("completed");
    expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([200, 100]);
    expect((await operation(now.steps[1].compensation_id)).body.approval.decided_by).toBe("carol");
  });

  it("a refused plan approval is not cast again on each look: one decide across the POST and two alarm firings; another person's approval is still cast", async () => {
    const route = [{ group: { name: "finance", members: ["carol"] } }];
    const { up, runId, report } = await rolledBack({ approval: { mode: "always", route } });
    const items = shownOf((await plan(runId)).body);
    const stop = countRpcs("OperationObject");
    try {
      const decides = () => rpcCounts("OperationObject").decide ?? 0;
      const before = decides();
      // "test" is in none of the refund's groups: refused once, when the POST drives the rollback.
      expect((await approvePlan(runId, { items })).status).toBe(200);
      expect(decides() - before).toBe(1);
      for (let look = 0; look < 2; look++)
        expect(await runDurableObjectAlarm(runObject(runId))).toBe(true);
      expect(decides() - before).toBe(1);
      // The step still names the refusal; nothing was sent.
      const step = (await api("GET", `/v1/runs/${runId}`)).body.rollback.steps[0];
      expect(step).toMatchObject({ state: "submitted" });
      expect(step.detail).toContain("test: not_an_approver");
      expect(await refundsOf(up)).toHaveLength(0);
      // carol's approval is another one: cast (one decide), and both refunds run, once each.
      const carol = await approvePlan(runId, { items, approver: { id: "carol" } });
      expect(carol.status).toBe(200);
      expect(decides() - before).toBe(2);
      const now = await nextStep(runId, report.steps[0].compensation_id);
      expect((await nextStep(runId, now.steps[1].compensation_id)).state).toBe("completed");
      expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([200, 100]);
    } finally {
      stop();
    }
  });

  it("a rollback stopped and asked again is a new plan: the earlier plan approval is cleared, and the step asked anew (same hash and version) waits for a person", async () => {
    const { up, runId, report } = await rolledBack();
    const items = shownOf((await plan(runId)).body);
    // The shop refuses the refund the plan's approval sends: the rollback stops at that step.
    await up.script({ kind: "status", status: 403 });
    expect((await approvePlan(runId, { items })).status).toBe(200);
    const stopped = await nextStep(runId, report.steps[0].compensation_id);
    expect(stopped.state).toBe("stopped");
    expect(stopped.steps.map((s: any) => s.state)).toEqual(["failed", "pending"]);
    expect(await refundRequestsOf(up)).toHaveLength(1);
    const again = (await cancelRollback(runId)).body.rollback;
    expect(again.state).toBe("running");
    const asked = again.steps[0];
    expect(asked.compensation_id).not.toBe(report.steps[0].compensation_id);
    // The pair the old approval names: only its clearing keeps it from riding on the new one.
    expect(asked.compensation_input_hash).toBe(items[0]!.input_hash);
    const shown = (await plan(runId)).body;
    expect(shown.items[0].policy_version).toBe(items[0]!.policy_version);
    expect(shown.approvals).toEqual([]);
    expect(await runDurableObjectAlarm(runObject(runId))).toBe(true);
    expect((await operation(asked.compensation_id)).body.phase).toBe("awaiting_approval");
    expect(await refundRequestsOf(up)).toHaveLength(1);
    expect(await refundsOf(up)).toHaveLength(0);
  });

  it("a pruned run keeps no plan approval (the approver, their reason) nor a remembered refusal", async () => {
    const route = [{ group: { name: "finance", members: ["carol"] } }];
    const { runId, first, second, report } = await rolledBack({
      approval: { mode: "always", route },
    });
    const items = shownOf((await plan(runId)).body);
    // A refusal remembered (not in the group), then carol's approval with a reason.
    expect((await approvePlan(runId, { items, reason: "refused-marker-31" })).status).toBe(200);
    const approved = { items, reason: "plan-marker-42", approver: { id: "carol" } };
    expect((await approvePlan(runId, approved)).status).toBe(200);
    const now = await nextStep(runId, report.steps[0].compensation_id);
    const done = await nextStep(runId, now.steps[1].compensation_id);
    expect(done.state).toBe("completed");
    expect(await storedText(runObject(runId))).toContain("plan-marker-42");
    expect(await storedText(runObject(runId))).toContain("not_an_approver");
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      // Token lifetime (24 h) + retention (2 days) + a minute: every operation goes, then the run.
      vi.setSystemTime(Date.now() + 3 * 24 * 60 * 60_000 + 60_000);
      const ids = [first, second].map((c) => c.operation_id);
      for (const id of [...ids, ...done.steps.map((s: any) => s.compensation_id)])
        expect(await fireAlarm(id)).toBe(true);
      expect(await runDurableObjectAlarm(runObject(runId))).toBe(true);
      expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(410);
      const text = await storedText(runObject(runId));
      for (const gone of ["plan-marker-42", "refused-marker-31", "carol", "not_an_approver"])
        expect(text).not.toContain(gone);
    } finally {
      vi.useRealTimers();
    }
  });

  it("no rollback running: 409 rollback_not_running", async () => {
    await testTenant();
    const tool = manifest({ url: upstream().url });
    expect((await put(tool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
    });
    expect(run.status).toBe(201);
    const answer = await approvePlan(run.body.run_id, {
      items: [{ input_hash: "a", policy_version: "b" }],
    });
    expect(answer).toMatchObject({ status: 409, body: { code: "rollback_not_running" } });
  });
});

describe("console: the rollback's plan on the run page", { timeout: 30_000 }, () => {
  it("shows each compensation with its hash and one Approve plan form; pressing it runs both refunds", async () => {
    const { up, runId, report } = await rolledBack();
    const people = await consoleAs((await testTenant()).key);
    const page = await people.get(`/console/runs/${runId}`);
    expect(page.status).toBe(200);
    const items = shownOf((await plan(runId)).body);
    const hashes = items.map((i) => i.input_hash);
    for (const hash of hashes) expect(page.text).toContain(`input hash ${hash}`);
    expect(page.text.match(/>Approve plan</g)).toHaveLength(1);
    expect(page.text).toContain(`action="/console/runs/${runId}/rollback/approve"`);
    // A form naming another plan approves nothing.
    const stale = await people.post(`/console/runs/${runId}/rollback/approve`, {
      input_hashes: items[0]!.input_hash,
      policy_versions: items[0]!.policy_version,
    });
    expect(stale.status).toBe(303);
    expect((await people.get(`/console/runs/${runId}`)).text).toContain("Not approved");
    expect((await plan(runId)).body.approvals).toEqual([]);
    // The form posts what the page showed: each item's hash and its tool's version.
    const shown = {
      hashes: hidden(page.text, "input_hashes"),
      versions: hidden(page.text, "policy_versions"),
    };
    expect(shown.hashes).toBe(hashes.join(","));
    expect(shown.versions).toBe(items.map((i) => i.policy_version).join(","));
    const pressed = await people.post(`/console/runs/${runId}/rollback/approve`, {
      input_hashes: shown.hashes,
      policy_versions: shown.versions,
      reason: "whole run was wrong",
    });
    expect(pressed.status).toBe(303);
    const after = await people.get(`/console/runs/${runId}`);
    expect(after.text).toContain("The plan is approved by");
    let now = await nextStep(runId, report.steps[0].compensation_id);
    now = await nextStep(runId, now.steps[1].compensation_id);
    expect(now.state).toBe("completed");
    expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([200, 100]);
    const decided = (await operation(now.steps[1].compensation_id)).body.approval;
    expect(decided).toMatchObject({ decided_via: "console", reason: "whole run was wrong" });
  });
});
