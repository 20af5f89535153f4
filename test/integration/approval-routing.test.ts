// Routing and quorum (issue 35 item 3) through the public API, counted at the upstream: 2-of-3
// quorum where the proposer's vote does not count, one vote leaves the call waiting with nothing
// sent, the same person twice counts once, a key outside the group is a typed 403 with nothing
// changed, one reject rejects, a delegate's vote counts as its delegator's, and an escalation that
// fires after a crash reminds once, escalates once and never approves.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  api,
  manifest,
  operation,
  opStub,
  testTenant,
  trace,
  turn,
  unique,
  until,
  upstream,
} from "../support/api.ts";

/** A key of the test tenant named `name` (its verified decider id): the Authorization header. */
async function keyOf(name: string, scopes = ["approvals:decide"]) {
  const { tenantId } = await testTenant();
  const issued = await api(
    "POST",
    `/v1/admin/tenants/${tenantId}/keys`,
    { name, scopes },
    { Authorization: `Bearer ${ADMIN}` },
  );
  expect(issued.status).toBe(201);
  return { Authorization: `Bearer ${issued.body.key}` };
}

const finance = { name: "finance", members: ["bob", "carol", "dave"] };

async function routedCall(approval: Record<string, unknown>, user = "carol") {
  const up = upstream();
  const tool = manifest({ url: up.url, risk: "irreversible_write", approval });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: user, scopes: [] }, tools: [tool.name] });
  expect(run.status).toBe(201);
  const res = await turn(
    run.body.run_id,
    [{ id: unique("call"), name: tool.name, arguments: { amount: 100, currency: "usd" } }],
    0,
  );
  const op = res.body.results[0].operation_id as string;
  expect(res.body.results[0].status).toBe("awaiting_approval");
  return { up, op, runId: run.body.run_id as string };
}
const vote = (op: string, who: Record<string, string>, body: Record<string, unknown> = {}) =>
  api("POST", `/v1/operations/${op}/approve`, body, who);

describe("routing and quorum", { timeout: 30_000 }, () => {
  it("2-of-3: the proposer's vote does not count, one vote waits with 0 requests, the same person twice counts once, a key outside the group is 403 with nothing changed; the second distinct vote sends once", async () => {
    const bob = await keyOf("bob");
    const carol = await keyOf("carol");
    const dave = await keyOf("dave");
    const mallory = await keyOf("mallory");
    const { up, op } = await routedCall({ mode: "always", quorum: 2, route: [{ group: finance }] });

    const own = await vote(op, carol);
    expect(own).toMatchObject({ status: 403, body: { code: "self_approval" } });
    const first = await vote(op, bob);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      phase: "awaiting_approval",
      approval: { state: "pending" },
    });
    expect(first.body.approval.route).toMatchObject({
      quorum: 2,
      needed: 1,
      votes: [{ by: "bob", via: "api_key" }],
      may_vote: [{ group: "finance", members: ["dave"] }],
      excluded: ["carol", "bob"],
    });
    expect((await up.state()).requests).toHaveLength(0);
    const again = await vote(op, bob);
    expect(again.body.approval.route.votes).toHaveLength(1);
    const outsider = await vote(op, mallory);
    expect(outsider).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    expect((await operation(op, 0)).body.approval.route.votes).toHaveLength(1);
    expect((await up.state()).requests).toHaveLength(0);
    // The inbox shows the votes so far and who may still vote.
    const inbox = await api("GET", "/v1/approvals?state=pending");
    const item = inbox.body.items.find((i: any) => i.operation_id === op);
    expect(item.route).toMatchObject({ needed: 1, votes: [{ by: "bob" }] });

    const second = await vote(op, dave);
    expect(second.status).toBe(200);
    const done = await operation(op, 10);
    expect(done.body).toMatchObject({
      phase: "recorded",
      result: { status: "succeeded" },
      approval: { state: "approved", decided_by: "dave" },
    });
    expect((await up.state()).effects).toHaveLength(1);
    expect(await vote(op, bob)).toMatchObject({ status: 200 });
    expect((await up.state()).requests).toHaveLength(1);
    const types = (await trace(done.body.run_id)).map((e) => e.type);
    expect(types.filter((t) => t === "approval_voted")).toHaveLength(2);
  });

  it("through the batch: a vote that counts is reported as voted (not as skipped), an outsider as not_an_approver; the second vote decides, one effect", async () => {
    const bob = await keyOf("bob");
    const dave = await keyOf("dave");
    const mallory = await keyOf("mallory");
    const { up, op } = await routedCall({ mode: "always", quorum: 2, route: [{ group: finance }] });
    const hash = (await operation(op, 0)).body.approval.input_hash as string;
    const batch = (who: Record<string, string>) =>
      api(
        "POST",
        "/v1/approvals/batch",
        [{ operation_id: op, input_hash: hash, decision: "approve", reason: "ok" }],
        who,
      );
    const first = await batch(bob);
    expect(first.status).toBe(200);
    expect(first.body.items).toEqual([{ operation_id: op, result: "voted", votes: 1, needed: 1 }]);
    const outsider = await batch(mallory);
    expect(outsider.body.items).toMatchObject([
      { operation_id: op, result: "skipped", reason: "not_an_approver" },
    ]);
    expect((await up.state()).requests).toHaveLength(0);
    const second = await batch(dave);
    expect(second.body.items).toMatchObject([
      { operation_id: op, result: "decided", state: "approved" },
    ]);
    await up.waitForEffects(1);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a reject by any eligible approver rejects at once: nothing sent", async () => {
    const bob = await keyOf("bob");
    const dave = await keyOf("dave");
    const { up, op } = await routedCall({ mode: "always", quorum: 2, route: [{ group: finance }] });
    expect((await vote(op, bob)).status).toBe(200);
    const rejected = await api("POST", `/v1/operations/${op}/reject`, { reason: "no" }, dave);
    expect(rejected.body).toMatchObject({
      phase: "recorded",
      result: { status: "rejected", code: "approval_rejected" },
    });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a delegate's vote counts as the delegator's, recorded as cast by the delegate; without a delegation in force it is refused", async () => {
    const bob = await keyOf("bob");
    const dave = await keyOf("dave");
    const zed = await keyOf("zed");
    const { up, op } = await routedCall({ mode: "always", quorum: 2, route: [{ group: finance }] });
    const refused = await vote(op, zed, { on_behalf_of: "dave" });
    expect(refused).toMatchObject({ status: 403, body: { code: "forbidden" } });
    expect((await vote(op, zed)).body.code).toBe("not_an_approver");
    const ends = new Date(Date.now() + 3_600_000).toISOString();
    const put = await api("PUT", "/v1/delegations", { to: "zed", ends_at: ends }, dave);
    expect(put).toMatchObject({ status: 200, body: { from: "dave", to: "zed" } });
    const delegated = await vote(op, zed, { on_behalf_of: "dave" });
    expect(delegated.body.approval.route.votes).toEqual([
      expect.objectContaining({ by: "dave", cast_by: "zed" }),
    ]);
    expect((await up.state()).requests).toHaveLength(0);
    // Dave's own vote after his delegate's is the same person's: counted once.
    expect((await vote(op, dave)).body.approval.route.votes).toHaveLength(1);
    expect((await vote(op, bob)).status).toBe(200);
    await operation(op, 10);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it(
    "an escalation that fires after a kill: reminded once, escalated once, never approved (it expires)",
    { timeout: 30_000 },
    async () => {
      const { up, op, runId } = await routedCall({
        mode: "always",
        expires_in_ms: 6_000,
        quorum: 1,
        route: [
          {
            group: { name: "finance", members: ["bob"] },
            remind_after_ms: 1_000,
            escalate_after_ms: 2_000,
          },
          { group: { name: "leads", members: ["dave"] } },
        ],
      });
      // The crash: the object's memory is gone; its alarm and rows are all that remain.
      await runInDurableObject(opStub(op), (_: unknown, state: DurableObjectState) =>
        state.abort("crash"),
      ).catch(() => {});
      const routed = (events: Array<Record<string, any>>) =>
        events.filter((e) => e.type === "approval_reminded" || e.type === "approval_escalated");
      const fired = await until(
        async () => {
          await runDurableObjectAlarm(opStub(op));
          return routed(await trace(runId));
        },
        (events) => events.some((e) => e.type === "approval_escalated"),
      );
      expect(fired.map((e) => e.type)).toEqual(["approval_reminded", "approval_escalated"]);
      // At least once: the alarm again changes nothing.
      await runDurableObjectAlarm(opStub(op));
      const view = await operation(op, 0);
      expect(view.body).toMatchObject({ phase: "awaiting_approval" });
      expect(view.body.approval.route).toMatchObject({ step: 1, group: "leads" });
      // The last step waits: its own reminder at most, then the expiry — never an approval.
      const expired = await operation(op, 10);
      expect(expired.body).toMatchObject({
        phase: "recorded",
        result: { status: "rejected", code: "approval_expired" },
      });
      const all = (await trace(runId)).map((e) => e.type);
      expect(all.filter((t) => t === "approval_escalated")).toHaveLength(1);
      expect(all.filter((t) => t === "approval_decided")).toHaveLength(0);
      expect((await up.state()).requests).toHaveLength(0);
    },
  );

  it("a route is enforced whole or refused at PUT: quorum without groups, escalation from the last step, a timer past the expiry", async () => {
    const up = upstream();
    for (const approval of [
      { mode: "always", quorum: 2 },
      { mode: "always", route: [{ group: finance, escalate_after_ms: 5_000 }] },
      { mode: "always", expires_in_ms: 5_000, route: [{ group: finance, remind_after_ms: 9_000 }] },
      { mode: "always", route: [{ group: { name: "empty" } }] },
      { mode: "always", four_eyes: false, route: [{ group: finance }] },
    ]) {
      const tool = manifest({ url: up.url, risk: "irreversible_write", approval });
      const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
      expect(put.status, JSON.stringify(approval)).toBe(422);
    }
  });
});
