// Cedar fails closed (issue 31, audit N1 and N2): an error in a policy's evaluation denies, naming
// the policy; a tool change that would break the tenant's set is refused, or forced and the set
// marked invalid so every call is refused until it is PUT again; the set of the moment applies to
// every operation not yet sent, whether or not one existed at its start; DELETE removes the set.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ADMIN,
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  newTenant,
  opStub,
  pastFactsBound,
  unique,
  upstream,
} from "../support/api.ts";
import { REFUND_INPUT, seniorOnlyOver500, tenantWithRefunds } from "../support/cedar.ts";
import { charged, compensate, refundRequestsOf, shop } from "../support/undo.ts";

const forbidAll = (tool: string) => `@id("no-refunds")
forbid (principal, action == Action::"${tool}", resource);`;

/** Long overflow at evaluation for amounts over 9,223,372 (validation cannot see it coming). */
const scaledCap = (tool: string) => `@id("allow-refunds")
permit (principal, action == Action::"${tool}", resource);
@id("scaled-cap")
forbid (principal, action == Action::"${tool}", resource)
when { context.arguments.amount * 1000000000000 > 5000000000000000 };`;

const operationOf = (id: string, as: Record<string, string>) =>
  api("GET", `/v1/operations/${id}`, undefined, as);

/** The operation ended recorded, rejected/policy_denied; its result (what the model reads). */
async function refusedByPolicy(id: string, as: Record<string, string>) {
  const seen = await operationOf(id, as);
  expect(seen.body).toMatchObject({
    phase: "recorded",
    result: { status: "rejected", code: "policy_denied" },
  });
  return seen.body.result as { message: string };
}

describe("Cedar fails closed: evaluation errors and tool changes", () => {
  afterEach(() => vi.useRealTimers());

  it("a tool re-PUT that would disable a forbid (amount integer → string) is 422 with Cedar's message and the tool unchanged; with ?force=1 every call is refused, nothing sent, until a set that validates is PUT", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    const early = await t.run();
    expect((await t.putPolicies(seniorOnlyOver500(t.name))).status).toBe(201);
    const stringly = {
      ...t.tool,
      input_schema: {
        ...REFUND_INPUT,
        properties: { ...REFUND_INPUT.properties, amount: { type: "string" } },
      },
    };
    const refused = await api("PUT", `/v1/tools/${t.name}`, stringly, t.as);
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("tool_breaks_policy_set");
    expect(refused.body.detail).toContain("big-refunds-need-senior");
    expect(refused.body.detail).toMatch(/Long|String/);
    const kept = await api("GET", `/v1/tools/${t.name}`, undefined, t.as);
    expect([kept.body.version, kept.body.manifest.input_schema.properties.amount.type]).toEqual([
      1,
      "integer",
    ]);
    expect((await api("PUT", `/v1/tools/${t.name}?force=yes`, stringly, t.as)).status).toBe(400);

    const forced = await api("PUT", `/v1/tools/${t.name}?force=1`, stringly, t.as);
    expect([forced.status, forced.body.version]).toEqual([200, 2]);
    // The caller who forced it is told, in the answer, what it did to the set.
    expect(forced.body.warnings).toContainEqual({
      code: "policy_set_invalid",
      detail: expect.stringContaining("marked invalid"),
    });
    const shown = await api("GET", "/v1/policies", undefined, t.as);
    expect(shown.body.invalid.reason).toContain(`PUT /v1/tools/${t.name} with ?force=1`);
    expect(shown.body.invalid.reason).toContain("big-refunds-need-senior");
    // A run created now carries the mark in its tenant facts; a senior user is refused too.
    const late = await t.run({ senior: "true" });
    const denied = await t.call(late, { amount: "900000" });
    expect(denied).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(denied.message).toMatch(/marked invalid/);
    expect(denied.message).toMatch(/PUT again/);
    expect((await t.call(late, { amount: "5" })).code).toBe("policy_denied");
    // A run whose facts predate the set: once past their bound, the fresh facts carry the mark.
    pastFactsBound();
    expect(await t.refund(early, 5)).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect((await up.state()).requests).toHaveLength(0);

    // The same text still does not validate against the new tool: refused, still invalid.
    expect((await t.putPolicies(seniorOnlyOver500(t.name))).body.code).toBe("invalid_policy");
    expect((await api("GET", "/v1/policies", undefined, t.as)).body.invalid).not.toBeNull();
    const fixed = `@id("allow-refunds")
permit (principal, action == Action::"${t.name}", resource);
@id("big-refunds-need-senior")
forbid (principal, action == Action::"${t.name}", resource)
when { context.arguments.amount like "*00000*" }
unless { principal.hasTag("senior") };`;
    expect((await t.putPolicies(fixed)).status).toBe(200);
    expect((await api("GET", "/v1/policies", undefined, t.as)).body.invalid).toBeNull();
    // (A new amount: the same call again in the same run is the same, recorded, operation.)
    expect((await t.call(late, { amount: "1000000" })).status).toBe("succeeded");
    expect((await t.call(await t.run(), { amount: "1000000" })).code).toBe("policy_denied");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual(["1000000"]);
  });

  it("a tool DELETE the set names is refused (422, the tool kept); with ?force=1 it is deleted and the set marked invalid: another tool's calls are refused until the set is PUT again", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    const other = manifest({ url: up.url, name: unique("charge") });
    expect((await api("PUT", `/v1/tools/${other.name}`, other, t.as)).status).toBe(201);
    const set = `permit (principal, action, resource);
@id("no-big-refunds")
forbid (principal, action == Action::"${t.name}", resource) when { context.arguments.amount > 500 };`;
    expect((await t.putPolicies(set)).status).toBe(201);

    const refused = await api("DELETE", `/v1/tools/${t.name}`, undefined, t.as);
    expect([refused.status, refused.body.code]).toEqual([422, "tool_breaks_policy_set"]);
    expect(refused.body.detail).toContain(t.name);
    expect((await api("GET", `/v1/tools/${t.name}`, undefined, t.as)).status).toBe(200);
    expect((await api("DELETE", `/v1/tools/${t.name}?force=true`, undefined, t.as)).status).toBe(
      400,
    );
    expect((await api("GET", `/v1/tools/${t.name}`, undefined, t.as)).status).toBe(200);

    const deleted = await api("DELETE", `/v1/tools/${t.name}?force=1`, undefined, t.as);
    // The caller who forced it is told, in the answer, what it did to the set.
    expect(deleted.status).toBe(200);
    expect(deleted.body.warnings).toEqual([
      expect.objectContaining({ code: "policy_set_invalid" }),
    ]);
    expect((await api("GET", `/v1/tools/${t.name}`, undefined, t.as)).status).toBe(404);
    const shown = await api("GET", "/v1/policies", undefined, t.as);
    expect(shown.body.invalid.reason).toContain(`DELETE /v1/tools/${t.name} with ?force=1`);
    const charges = await t.run({}, [other.name as string]);
    const charge = { amount: 10, currency: "usd" };
    const denied = await t.call(charges, charge, 3, other.name as string);
    expect(denied).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(denied.message).toMatch(/marked invalid/);
    expect((await up.state()).requests).toHaveLength(0);

    expect((await t.putPolicies("permit (principal, action, resource);")).status).toBe(200);
    expect(
      (await t.call(await t.run({}, [other.name as string]), charge, 3, other.name as string))
        .status,
    ).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("an error at evaluation (Long overflow on a model-chosen amount) denies at the gate and before an attempt after approval, naming the policy; nothing sent", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    expect((await t.putPolicies(scaledCap(t.name))).status).toBe(201);
    const runId = await t.run();
    expect((await t.refund(runId, 10)).status).toBe("succeeded");
    const overflow = await t.refund(runId, 10_000_000);
    expect(overflow).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(overflow.message).toContain("scaled-cap");
    expect(overflow.message).toMatch(/overflow/);
    const trace = (await api("GET", `/v1/runs/${runId}/trace`, undefined, t.as)).body.events;
    expect(trace.filter((e: any) => e.type === "policy_decided").at(-1)).toMatchObject({
      decision: "deny",
      policies: ["scaled-cap"],
    });

    // The same error before the attempt after an approval (the set PUT while it waited).
    const a = await tenantWithRefunds(up.url, { approval: "always" });
    expect((await a.putPolicies(`permit (principal, action, resource);`)).status).toBe(201);
    const waiting = await a.refund(await a.run(), 10_000_000, 0);
    expect(waiting.status).toBe("awaiting_approval");
    expect((await a.putPolicies(scaledCap(a.name))).status).toBe(200);
    const approved = await api("POST", `/v1/operations/${waiting.operation_id}/approve`, {}, a.as);
    expect(approved.body.result).toMatchObject({ status: "rejected", code: "policy_denied" });
    expect(approved.body.result.message).toContain("scaled-cap");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([10]);
  });

  it("a compensation the set's evaluation errors on is refused before anything is recorded (422 policy_denied naming the policy), nothing sent", async () => {
    const t = await newTenant(ALL_SCOPES);
    const as = { Authorization: `Bearer ${t.key}` };
    const s = await shop({ as, undo: { approval: "none" } });
    const refund = s.refund.name as string;
    const set = `permit (principal, action, resource);
@id("scaled-refund-cap")
forbid (principal, action == Action::"${refund}", resource)
when { context.arguments.amount * 1000000000000 > 5000000000000000 };`;
    expect((await api("PUT", "/v1/policies", { policies: set }, as)).status).toBe(201);
    const original = await charged(s.runId, s.charge.name as string, 10_000_000, as);
    const refused = await compensate(original.operation_id, as, 5);
    expect([refused.status, refused.body.code]).toEqual([422, "policy_denied"]);
    expect(refused.body.detail).toContain("scaled-refund-cap");
    expect(await refundRequestsOf(s.up)).toHaveLength(0);
  });
});

describe("the set of the moment applies to every operation not yet sent (N2)", () => {
  afterEach(() => vi.useRealTimers());

  it("a forbid-all set PUT while a 700 refund waits for approval (no set at its start): after approval nothing is sent, it ends rejected/policy_denied and the model is told", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url, { approval: "always" });
    const runId = await t.run();
    const waiting = await t.refund(runId, 700, 0);
    expect(waiting.status).toBe("awaiting_approval");
    expect((await t.putPolicies(forbidAll(t.name))).status).toBe(201);
    pastFactsBound();
    const approved = await api("POST", `/v1/operations/${waiting.operation_id}/approve`, {}, t.as);
    expect(approved.status).toBe(200);
    expect(approved.body.result).toMatchObject({ status: "rejected", code: "policy_denied" });
    const told = await refusedByPolicy(waiting.operation_id, t.as);
    expect(told.message).toMatch(/^Policy does not allow this/);
    expect(told.message).toContain("no-refunds");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a retry scheduled before the set appeared: the retry alarm sends nothing — after a 429 it ends rejected/policy_denied, after a 503 (which may have applied) it stops sending and waits for a person", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    await up.script({ kind: "status", status: 429 }, { kind: "status", status: 503 });
    const runId = await t.run();
    const [notProcessed, mayHaveApplied] = [await t.refund(runId, 300), await t.refund(runId, 301)];
    for (const { operation_id } of [notProcessed, mayHaveApplied])
      expect((await operationOf(operation_id, t.as)).body.phase).toBe("retry_scheduled");
    expect((await t.putPolicies(forbidAll(t.name))).status).toBe(201);

    expect(await fireAlarm(notProcessed.operation_id)).toBe(true);
    const refused = await refusedByPolicy(notProcessed.operation_id, t.as);
    expect(refused.message).toContain("no-refunds");

    expect(await fireAlarm(mayHaveApplied.operation_id)).toBe(true);
    const stopped = await operationOf(mayHaveApplied.operation_id, t.as);
    expect(stopped.body.phase).toBe("outcome_unknown");
    const trace = (await api("GET", `/v1/runs/${runId}/trace`, undefined, t.as)).body.events;
    const denials = trace.filter((e: any) => e.type === "denied").map((e: any) => e.code);
    expect(denials).toEqual(["policy_denied", "policy_denied"]);
    expect((await up.state()).requests.map((r) => r.body.amount)).toEqual([300, 301]);
  });

  it("a write queued behind a resource lock before the set appeared leaves the queue at its next recheck, rejected/policy_denied, nothing sent", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url, {
      resource: "customer:{customer_id}",
      timeout_ms: 300,
    });
    // The holder's answer never arrives: it keeps the customer's lock while its outcome is unknown.
    await up.script({ kind: "commit_then_hang" });
    const runId = await t.run();
    expect((await t.refund(runId, 1)).status).not.toBe("succeeded");
    const queued = await t.refund(runId, 2, 0);
    expect(queued).toMatchObject({ status: "pending", code: "resource_locked" });
    expect((await t.putPolicies(forbidAll(t.name))).status).toBe(201);
    expect(await fireAlarm(queued.operation_id)).toBe(true);
    await refusedByPolicy(queued.operation_id, t.as);
    expect((await up.state()).requests.map((r) => r.body.amount)).toEqual([1]);
  });

  it("an operation frozen before requests were frozen for every operation (no request in its plan): rebuilt from its frozen input without the user's attributes — a forbid applies, a permit by attribute does not", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url, { approval: "always" });
    const asOld = async (id: string) => {
      await runInDurableObject(opStub(id), (_i: unknown, state: DurableObjectState) => {
        const row = state.storage.sql
          .exec<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1")
          .one();
        const frozen = JSON.parse(row.frozen);
        expect(frozen.plan.policyRequest.arguments).toMatchObject({ customer_id: "cus_1" });
        delete frozen.plan.policyRequest;
        state.storage.sql.exec(
          "UPDATE op_log SET frozen = ? WHERE seq = 1",
          JSON.stringify(frozen),
        );
      });
      await evictDurableObject(opStub(id));
    };
    const senior = await t.run({ senior: "true" });
    const [small, big] = [await t.refund(senior, 400, 0), await t.refund(senior, 600, 0)];
    await asOld(small.operation_id);
    await asOld(big.operation_id);
    expect((await t.putPolicies(seniorOnlyOver500(t.name))).status).toBe(201);
    const approve = (id: string) => api("POST", `/v1/operations/${id}/approve`, {}, t.as);
    expect((await approve(big.operation_id)).body.result).toMatchObject({ code: "policy_denied" });
    expect((await approve(small.operation_id)).status).toBe(200);
    await up.waitForEffects(1);
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([400]);
  });

  it("DELETE /v1/policies (scope policies:write) removes the set: a call it denied succeeds, on a new run at once and on an existing run past its facts' bound", async () => {
    const up = upstream();
    const t = await tenantWithRefunds(up.url);
    expect((await t.putPolicies(forbidAll(t.name))).status).toBe(201);
    const early = await t.run();
    expect((await t.refund(early, 100)).code).toBe("policy_denied");
    const issued = await api(
      "POST",
      `/v1/admin/tenants/${t.tenantId}/keys`,
      { name: "runs-only", scopes: ["runs:write", "tools:write"] },
      { Authorization: `Bearer ${ADMIN}` },
    );
    const narrow = { Authorization: `Bearer ${issued.body.key as string}` };
    expect((await api("DELETE", "/v1/policies", undefined, narrow)).status).toBe(403);
    expect((await t.refund(await t.run(), 100)).code).toBe("policy_denied");

    expect((await api("DELETE", "/v1/policies", undefined, t.as)).status).toBe(204);
    expect((await api("GET", "/v1/policies", undefined, t.as)).status).toBe(404);
    expect((await api("DELETE", "/v1/policies", undefined, t.as)).status).toBe(404);
    expect((await t.refund(await t.run(), 101)).status).toBe("succeeded");
    pastFactsBound();
    expect((await t.refund(early, 102)).status).toBe("succeeded");
    expect((await up.state()).effects.map((e) => e.body.amount)).toEqual([101, 102]);
  });
});
