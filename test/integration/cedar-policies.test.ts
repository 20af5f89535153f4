// Cedar policy sets (issue 21 part 2), from the side of a tenant whose rules live in Cedar: a forbid
// holds before any request reaches the upstream, a set changed while a call waits for approval
// refuses it at the check before its attempt, and a set that does not validate is refused at PUT.
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, pastFactsBound, upstream } from "../support/api.ts";
import { seniorOnlyOver500, tenantWithRefunds } from "../support/cedar.ts";

describe("Cedar policy sets", () => {
  afterEach(() => vi.useRealTimers());

  it("a set PUT after a run was created: new runs obey it at once, the existing run once its tenant facts pass their bound (issue 19), never later", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    const early = await t.run();
    expect((await t.refund(early, 600)).status).toBe("succeeded"); // no set yet: today's behaviour
    expect((await t.putPolicies(seniorOnlyOver500(t.name))).status).toBe(201);
    // A run created now reads the set with its tools.
    expect(await t.refund(await t.run(), 600)).toMatchObject({ code: "policy_denied" });
    // The early run's snapshot is older than the bound: it is not used, the set applies.
    pastFactsBound();
    expect(await t.refund(early, 601)).toMatchObject({
      status: "rejected",
      code: "policy_denied",
    });
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([600]);
  });

  it("forbid amount > 500 for users without a senior attribute: refused before any upstream request; senior users and small amounts pass", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    const put = await t.putPolicies(seniorOnlyOver500(t.name));
    expect(put.status).toBe(201);
    expect(put.body.version).toMatch(/^cedar_[0-9a-f]{32}$/);

    const junior = await t.run();
    const refused = await t.refund(junior, 600);
    expect(refused).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(refused.message).toContain("big-refunds-need-senior");
    expect(refused.message).toContain(put.body.version);
    expect((await up.state()).requests).toHaveLength(0);

    const trace = (await api("GET", `/v1/runs/${junior}/trace`, undefined, t.as)).body.events;
    expect(trace.find((e: any) => e.type === "policy_decided")).toMatchObject({
      policy_version: put.body.version,
      decision: "deny",
      policies: ["big-refunds-need-senior"],
    });

    expect((await t.refund(junior, 400)).status).toBe("succeeded");
    expect((await t.refund(await t.run({ senior: "true" }), 600)).status).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([400, 600]);
  });

  it("a policy changed while an operation waits for approval refuses it at the pre-attempt check", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url, { approval: "always" });
    expect((await t.putPolicies(`permit (principal, action, resource);`)).status).toBe(201);
    const runId = await t.run();
    const waiting = await t.refund(runId, 700, 0);
    expect(waiting.status).toBe("awaiting_approval");
    const asked = await api("GET", `/v1/approvals/${waiting.operation_id}`, undefined, t.as);
    expect(asked.body.cedar).toMatchObject({ decision: "allow", policies: ["policy0"] });

    expect((await t.putPolicies(seniorOnlyOver500(t.name))).status).toBe(200);
    const approved = await api("POST", `/v1/operations/${waiting.operation_id}/approve`, {}, t.as);
    expect(approved.status).toBe(200);
    expect(approved.body.result).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(approved.body.result.message).toContain("big-refunds-need-senior");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a policy set that does not validate against the tenant's tools is refused at PUT with Cedar's message", async () => {
    const t = await tenantWithRefunds("http://127.0.0.1:1");
    const typo = await t.putPolicies(
      `forbid (principal, action == Action::"${t.name}", resource) when { context.arguments.amout > 5 };`,
    );
    expect(typo.status).toBe(422);
    expect(typo.body.code).toBe("invalid_policy");
    expect(typo.body.detail).toMatch(/amout/);
    const unknownAction = await t.putPolicies(
      `permit (principal, action == Action::"no_such_tool", resource);`,
    );
    expect([unknownAction.status, unknownAction.body.code]).toEqual([422, "invalid_policy"]);
    const syntax = await t.putPolicies(`permit (principal, action, resource`);
    expect([syntax.status, syntax.body.code]).toEqual([422, "invalid_policy"]);
    expect((await api("GET", "/v1/policies", undefined, t.as)).status).toBe(404);
  });

  it("no policy set: today's behaviour (nothing evaluated, nothing in the trace)", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    const runId = await t.run();
    expect((await t.refund(runId, 600)).status).toBe("succeeded");
    const trace = (await api("GET", `/v1/runs/${runId}/trace`, undefined, t.as)).body.events;
    expect(trace.some((e: any) => e.type === "policy_decided")).toBe(false);
  });
});
