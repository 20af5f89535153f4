// Undo (issue 22), from the side of a support engineer reversing an agent's charge, and of an
// attacker or an unlucky double-click: a compensation runs once however often (and however
// concurrently) it is asked, only for what was applied, and only within the tenant. The upstream
// (demo/upstream.ts) counts what was charged and refunded.
import { env } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import demoTools from "../../demo/tools.json";
import {
  ALL_SCOPES,
  api,
  fireAlarm,
  manifest,
  newTenant,
  operation,
  testTenant,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { REFUND_SCHEMA, UNDO } from "../support/undo.ts";

const refundTool = (url: string, extra: Record<string, unknown> = {}) =>
  manifest({
    url,
    name: unique("refund"),
    description: "Refund a charge.",
    input_schema: REFUND_SCHEMA,
    request: { method: "POST", url: `${url}/refunds` },
    ...extra,
  });

async function put(tool: Record<string, unknown>) {
  return api("PUT", `/v1/tools/${tool.name as string}`, tool);
}

/** A refund tool, then a charge tool that declares it as its compensation, and a run offering the charge. */
async function shop(
  chargeExtra: Record<string, unknown> = {},
  refundExtra: Record<string, unknown> = {},
  undoExtra: Record<string, unknown> = {},
) {
  await testTenant();
  const up = upstream();
  const refund = refundTool(up.url, refundExtra);
  expect((await put(refund)).status).toBe(201);
  const charge = manifest({
    url: up.url,
    compensate: { tool: refund.name, arguments: UNDO, ...undoExtra },
    ...chargeExtra,
  });
  const putCharge = await put(charge);
  expect(putCharge.status, JSON.stringify(putCharge.body)).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [charge.name],
  });
  expect(run.status).toBe(201);
  return { up, refund, charge, runId: run.body.run_id as string };
}

async function charged(runId: string, name: string, amount = 1200, wait = 5) {
  const res = await turn(
    runId,
    [{ id: unique("c"), name, arguments: { amount, currency: "usd" } }],
    wait,
  );
  return res.body.results[0] as { operation_id: string; status: string; result?: { id: string } };
}

const compensate = (operationId: string, reason = "customer asked", key?: string) =>
  api(
    "POST",
    `/v1/operations/${operationId}/compensate`,
    { reason },
    key ? { Authorization: `Bearer ${key}` } : {},
  );

async function approveAndWait(compensationId: string) {
  const approved = await api("POST", `/v1/operations/${compensationId}/approve`, {});
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
  return operation(compensationId, 5);
}

const refundsOf = async (up: ReturnType<typeof upstream>) =>
  (await up.state()).effects.filter((e) => e.path.endsWith("/refunds"));

describe("compensate one operation", () => {
  it("charge then compensate (a person approves the refund): one charge and one refund upstream, with the charge's id and amount, linked both ways", async () => {
    const { up, refund, runId, charge } = await shop();
    const original = await charged(runId, charge.name as string);
    expect(original.status).toBe("succeeded");
    const asked = await compensate(original.operation_id, "charged twice by mistake");
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    expect(asked.body).toMatchObject({
      tool: refund.name,
      run_id: runId,
      phase: "awaiting_approval",
      compensates: original.operation_id,
      approval: { state: "pending", compensates: original.operation_id },
    });
    expect(await refundsOf(up)).toHaveLength(0); // nothing sent before a person approves
    const inbox = await api("GET", "/v1/approvals?state=pending");
    expect(
      inbox.body.items.find((i: any) => i.operation_id === asked.body.operation_id),
    ).toMatchObject({
      compensates: original.operation_id,
    });
    const done = await approveAndWait(asked.body.operation_id);
    expect(done.body).toMatchObject({ phase: "recorded", result: { status: "succeeded" } });
    const state = await up.state();
    expect(state.effects.map((e) => e.path.split("/").pop())).toEqual(["charges", "refunds"]);
    expect(state.effects[1]!.body).toEqual({
      charge_id: original.result!.id,
      amount: 1200,
      reason: "requested_by_customer",
    });
    expect(state.effects[0]!.id).toBe(original.result!.id);
    expect((await operation(original.operation_id)).body).toMatchObject({
      compensated_by: asked.body.operation_id,
      compensates: null,
    });
    // Its tenant-plane events say what it undoes (a webhook's approver must know it is a refund of that).
    const eventsOf = async () =>
      (
        (await api("GET", "/v1/events?type=approval.requested&limit=500")).body.events as any[]
      ).filter((e) => e.operation_id === asked.body.operation_id);
    let requested = await eventsOf();
    for (let i = 0; i < 200 && requested.length < 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25)); // the queue consumer runs in the pool
      requested = await eventsOf();
    }
    expect(requested.map((e) => e.data.compensates)).toEqual([original.operation_id]);
    // The run's trace holds the compensation's transitions too.
    const events = await trace(runId);
    expect(
      events.filter((e) => e.operation_id === asked.body.operation_id).map((e) => e.type),
    ).toEqual(
      expect.arrayContaining([
        "awaiting_approval",
        "approval_decided",
        "attempt_started",
        "recorded",
      ]),
    );
  });

  it("asked again (the same request, a new one, five at once): one compensation operation, one refund", async () => {
    const { up, runId, charge } = await shop();
    const original = await charged(runId, charge.name as string);
    const burst = await Promise.all(
      Array.from({ length: 5 }, () => compensate(original.operation_id)),
    );
    expect(burst.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 201]);
    const ids = new Set(burst.map((r) => r.body.operation_id));
    expect(ids.size).toBe(1);
    const [id] = [...ids] as string[];
    const same = await compensate(original.operation_id);
    const other = await compensate(original.operation_id, "another person, another reason");
    expect([same.status, other.status]).toEqual([200, 200]);
    expect([same.body.operation_id, other.body.operation_id]).toEqual([id, id]);
    await approveAndWait(id!);
    const after = await Promise.all(
      Array.from({ length: 5 }, () => compensate(original.operation_id)),
    );
    expect(after.map((r) => [r.status, r.body.operation_id, r.body.phase])).toEqual(
      Array.from({ length: 5 }, () => [200, id, "recorded"]),
    );
    expect(await refundsOf(up)).toHaveLength(1);
  });

  it('"approval": "none" leaves it to the refund tool\'s own rule (none here): it runs at once, once, and a stricter tool rule still asks a person', async () => {
    await testTenant();
    const up = upstream();
    const refund = refundTool(up.url);
    const strict = refundTool(up.url, { approval: "always" });
    for (const tool of [refund, strict]) expect((await put(tool)).status).toBe(201);
    const names = [];
    for (const target of [refund, strict]) {
      const charge = manifest({
        url: up.url,
        compensate: { tool: target.name, arguments: UNDO, approval: "none" },
      });
      expect((await put(charge)).status).toBe(201);
      names.push(charge.name as string);
    }
    const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: names });
    const free = await charged(run.body.run_id, names[0]!, 700);
    const asked = await api("POST", `/v1/operations/${free.operation_id}/compensate?wait=5`, {
      reason: "duplicate",
    });
    expect(asked.status).toBe(201);
    expect(asked.body).toMatchObject({
      phase: "recorded",
      approval: null,
      result: { status: "succeeded" },
    });
    expect((await compensate(free.operation_id)).status).toBe(200);
    const guarded = await charged(run.body.run_id, names[1]!, 800);
    const waiting = await compensate(guarded.operation_id);
    expect(waiting.body).toMatchObject({ phase: "awaiting_approval" });
    expect((await refundsOf(up)).map((r) => r.body.amount)).toEqual([700]);
  });

  it("a failed, a rejected, a pending-approval and an outcome_unknown original: typed 409 each, nothing sent", async () => {
    const { up, runId, charge } = await shop();
    // failed: the shop refused the charge
    await up.script({ kind: "status", status: 403 });
    const failed = await charged(runId, charge.name as string, 100);
    expect(failed.status).toBe("failed");
    // a compensation is not compensable either (a second undo would be a new charge)
    const ok = await charged(runId, charge.name as string, 200);
    const undo = await compensate(ok.operation_id);
    expect(undo.status).toBe(201);

    const approving = await shop({ approval: "always" });
    const rejected = await charged(approving.runId, approving.charge.name as string, 300, 0);
    const pending = await charged(approving.runId, approving.charge.name as string, 400, 0);
    expect(rejected.status).toBe("awaiting_approval");
    expect(
      (await api("POST", `/v1/operations/${rejected.operation_id}/reject`, { reason: "no" }))
        .status,
    ).toBe(200);

    const unknown = await shop({ timeout_ms: 300, idempotency: { mode: "none" } });
    await unknown.up.script({ kind: "commit_then_hang" });
    const unsure = await charged(unknown.runId, unknown.charge.name as string, 500);
    expect(unsure.status).toBe("outcome_unknown");

    const before = [
      (await up.state()).requests.length,
      (await approving.up.state()).requests.length,
    ];
    for (const [id, state] of [
      [failed.operation_id, "failed"],
      [rejected.operation_id, "rejected"],
      [pending.operation_id, "awaiting_approval"],
      [unsure.operation_id, "outcome_unknown"],
      [undo.body.operation_id, "awaiting_approval"],
    ] as const) {
      const refused = await compensate(id);
      expect(refused.status, `${state}: ${JSON.stringify(refused.body)}`).toBe(409);
      expect(refused.body).toMatchObject({ code: "operation_not_compensable", state });
    }
    expect([
      (await up.state()).requests.length,
      (await approving.up.state()).requests.length,
    ]).toEqual(before);
    expect((await refundsOf(unknown.up)).length).toBe(0);
    expect((await operation(failed.operation_id)).body.compensated_by).toBeNull();
  });

  it("another tenant's operation id is not found; a key without operations:compensate is forbidden", async () => {
    const { up, runId, charge } = await shop();
    const original = await charged(runId, charge.name as string);
    const stranger = await newTenant(ALL_SCOPES);
    const probe = await compensate(original.operation_id, "mine now", stranger.key);
    expect(probe.status).toBe(404);
    expect(probe.body.code).toBe("not_found");
    expect(JSON.stringify(probe.body)).not.toContain(runId);
    const narrow = await newTenant(ALL_SCOPES.filter((s) => s !== "operations:compensate"));
    const forbidden = await compensate(original.operation_id, "x", narrow.key);
    expect(forbidden.status).toBe(403);
    const own = await api(
      "POST",
      `/v1/operations/${original.operation_id}/compensate`,
      { reason: "x" },
      { Authorization: `Bearer ${narrow.key}` },
    );
    expect(own.status).toBe(403);
    expect(await refundsOf(up)).toHaveLength(0);
    expect((await compensate(original.operation_id, "")).status).toBe(400);
    expect((await compensate(original.operation_id, "x".repeat(501))).status).toBe(400);
  });

  it("the compensating tool changed after the PUT so the rendered arguments no longer validate: typed 422, nothing sent, nothing recorded", async () => {
    const { up, refund, runId, charge } = await shop();
    const original = await charged(runId, charge.name as string, 1200);
    const stricter = {
      ...refund,
      input_schema: {
        ...REFUND_SCHEMA,
        properties: { ...REFUND_SCHEMA.properties, amount: { type: "integer", maximum: 1000 } },
      },
    };
    expect((await put(stricter)).status).toBe(200);
    const refused = await compensate(original.operation_id);
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.code).toBe("compensation_arguments_invalid");
    expect(refused.body.detail).toMatch(/amount/);
    expect((await up.state()).requests).toHaveLength(1);
    expect((await operation(original.operation_id)).body.compensated_by).toBeNull();
  });
});

describe("PUT refuses a compensate that cannot run", () => {
  it("on a read, an unknown tool, an argument not in its schema, a missing required property, a path not in the input or output schema, a bad literal", async () => {
    await testTenant();
    const up = upstream();
    const refund = refundTool(up.url);
    expect((await put(refund)).status).toBe(201);
    const cases: Array<[string, Record<string, unknown>]> = [
      ["read", { risk: "read", compensate: { tool: refund.name, arguments: UNDO } }],
      ["unknown", { compensate: { tool: unique("nope"), arguments: UNDO } }],
      ["extra argument", { compensate: { tool: refund.name, arguments: { ...UNDO, note: "x" } } }],
      [
        "missing required",
        {
          compensate: {
            tool: refund.name,
            arguments: { charge_id: "{result.id}", amount: "{input.amount}" },
          },
        },
      ],
      [
        "input path",
        { compensate: { tool: refund.name, arguments: { ...UNDO, amount: "{input.total}" } } },
      ],
      [
        "result path",
        { compensate: { tool: refund.name, arguments: { ...UNDO, charge_id: "{result.charge}" } } },
      ],
      ["literal", { compensate: { tool: refund.name, arguments: { ...UNDO, reason: "because" } } }],
    ];
    for (const [what, extra] of cases) {
      const refused = await put(manifest({ url: up.url, ...extra }));
      expect(refused.status, what).toBe(422);
      expect(refused.body.code, what).toBe("invalid_compensation");
    }
    expect(
      (await put(manifest({ url: up.url, compensate: { tool: refund.name, arguments: UNDO } })))
        .status,
    ).toBe(201);
  });
});

const runObject = (runId: string) => placedStub(env as unknown as Env, "RUNS", runId) as any;

/** A run that charged 100, read an order, charged 200 and 300 (in that order), each its own turn. */
async function busyRun() {
  const s = await shop();
  const read = manifest({
    url: s.up.url,
    name: unique("lookup"),
    risk: "read",
    idempotency: { mode: "none" },
    request: { method: "GET", url: `${s.up.url}/orders/{amount}` },
  });
  expect((await put(read)).status).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [s.charge.name, read.name],
  });
  const runId = run.body.run_id as string;
  const charges = [];
  for (const amount of [100, 200, 300]) {
    charges.push(await charged(runId, s.charge.name as string, amount));
    if (amount === 100) {
      const looked = await turn(runId, [
        { id: unique("r"), name: read.name as string, arguments: { amount: 7, currency: "usd" } },
      ]);
      expect(looked.body.results[0].status).toBe("succeeded");
    }
  }
  expect(charges.map((c) => c.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
  return { ...s, runId, charges, read };
}

/** A person approves the current step's refund; once it is recorded the run's alarm takes the next step. */
async function approveStep(runId: string, index: number) {
  const before = await api("GET", `/v1/runs/${runId}`);
  const step = before.body.rollback.steps[index];
  expect(step.state).toBe("submitted");
  const done = await approveAndWait(step.compensation_id);
  expect(done.body).toMatchObject({ phase: "recorded", result: { status: "succeeded" } });
  await runDurableObjectAlarm(runObject(runId));
  return (await api("GET", `/v1/runs/${runId}`)).body.rollback;
}

describe("cancel with rollback", () => {
  it("a run with 3 charges and 1 read: 3 refunds, newest first, one at a time, the read untouched; cancel and GET report each step", async () => {
    const { up, runId, charges, charge } = await busyRun();
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { rollback: "yes" })).status).toBe(400);
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { undo: true })).status).toBe(400);
    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`, { rollback: true });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    const newestFirst = [...charges].reverse().map((c) => c.operation_id);
    expect(cancelled.body).toMatchObject({ status: "cancelled", rollback: { state: "running" } });
    expect(
      cancelled.body.rollback.steps.map((s: any) => [s.operation_id, s.tool, s.state]),
    ).toEqual([
      [newestFirst[0], charge.name, "submitted"],
      [newestFirst[1], charge.name, "pending"],
      [newestFirst[2], charge.name, "pending"],
    ]);
    // One at a time: the second refund is not even asked for before the first is recorded.
    expect(await refundsOf(up)).toHaveLength(0);
    let report = await approveStep(runId, 0);
    expect(report.steps.map((s: any) => s.state)).toEqual(["compensated", "submitted", "pending"]);
    report = await approveStep(runId, 1);
    expect(report.steps.map((s: any) => s.state)).toEqual([
      "compensated",
      "compensated",
      "submitted",
    ]);
    report = await approveStep(runId, 2);
    expect(report).toMatchObject({ state: "completed" });
    expect(report.steps.every((s: any) => s.state === "compensated" && s.compensation_id)).toBe(
      true,
    );
    const state = await up.state();
    const refunds = state.effects.filter((e) => e.path.endsWith("/refunds"));
    expect(refunds.map((r) => r.body.amount)).toEqual([300, 200, 100]);
    expect(refunds.map((r) => r.body.charge_id)).toEqual(
      [...charges].reverse().map((c) => c.result!.id),
    );
    expect(state.requests.filter((r) => r.method === "GET")).toHaveLength(1); // the read, once
    for (const c of charges)
      expect((await operation(c.operation_id)).body.compensated_by).toBeTruthy();
    // Asked again: the same report, nothing more sent.
    const again = await api("POST", `/v1/runs/${runId}/cancel`, { rollback: true });
    expect(again.body.rollback).toEqual(report);
    expect(await refundsOf(up)).toHaveLength(3);
  });

  it("a crash in the middle (the step's row lost its submit, the object evicted) resumes from the alarm without doubling: 3 refunds, each charge once", async () => {
    const { up, runId, charges } = await busyRun();
    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`, { rollback: true });
    expect(cancelled.status).toBe(200);
    const report = await approveStep(runId, 0);
    const second = report.steps[1].compensation_id as string;
    expect(second).toBeTruthy();
    // The crash: the compensation was submitted but the step's update never committed.
    await runInDurableObject(runObject(runId), async (_o: unknown, state: DurableObjectState) => {
      state.storage.sql.exec(
        "UPDATE rollback_steps SET state = 'pending', compensation_id = NULL WHERE seq = 1",
      );
    });
    await evictDurableObject(runObject(runId));
    await runDurableObjectAlarm(runObject(runId));
    const resumed = (await api("GET", `/v1/runs/${runId}`)).body.rollback;
    expect(resumed.steps[1]).toMatchObject({ state: "submitted", compensation_id: second });
    await approveStep(runId, 1);
    const last = await approveStep(runId, 2);
    expect(last.state).toBe("completed");
    const refunds = await refundsOf(up);
    expect(refunds.map((r) => r.body.charge_id).sort()).toEqual(
      charges.map((c) => c.result!.id).sort(),
    );
    expect(refunds).toHaveLength(3);
    // A cancel without a body still works, and reports the rollback as it stands.
    const plain = await api("POST", `/v1/runs/${runId}/cancel`);
    expect(plain.status).toBe(200);
    expect(plain.body.rollback.state).toBe("completed");
  });
});

describe("a rollback that stops", () => {
  it("stops at a compensation whose outcome is unknown (nothing more is asked); once a person resolves it, cancel with rollback goes on", async () => {
    const s = await shop(
      {},
      { timeout_ms: 300, idempotency: { mode: "none" } },
      { approval: "none" },
    );
    const first = await charged(s.runId, s.charge.name as string, 100);
    const second = await charged(s.runId, s.charge.name as string, 200);
    await s.up.script({ kind: "commit_then_hang" });
    const cancelled = await api("POST", `/v1/runs/${s.runId}/cancel`, { rollback: true });
    const stuck = cancelled.body.rollback.steps[0];
    expect(stuck).toMatchObject({ operation_id: second.operation_id, state: "submitted" });
    expect((await operation(stuck.compensation_id, 5)).body.phase).toBe("outcome_unknown");
    await runDurableObjectAlarm(runObject(s.runId));
    let report = (await api("GET", `/v1/runs/${s.runId}`)).body.rollback;
    expect(report.state).toBe("stopped");
    expect(report.steps.map((x: any) => x.state)).toEqual(["outcome_unknown", "pending"]);
    expect(await refundsOf(s.up)).toHaveLength(1); // the hung refund committed; the next was never asked
    const resolved = await api("POST", `/v1/operations/${stuck.compensation_id}/resolve`, {
      outcome: "succeeded",
      result: { id: "re_seen_in_the_shop" },
      reason: "the shop's dashboard shows the refund",
    });
    expect(resolved.status).toBe(200);
    report = (await api("POST", `/v1/runs/${s.runId}/cancel`, { rollback: true })).body.rollback;
    expect(report.steps.map((x: any) => x.state)).toEqual(["compensated", "submitted"]);
    expect((await operation(report.steps[1].compensation_id, 5)).body.phase).toBe("recorded");
    await runDurableObjectAlarm(runObject(s.runId));
    report = (await api("GET", `/v1/runs/${s.runId}`)).body.rollback;
    expect(report).toMatchObject({ state: "completed" });
    const refunds = await refundsOf(s.up);
    expect(refunds.map((r) => r.body.charge_id)).toEqual([second.result!.id, first.result!.id]);
  });
});

describe("the demo shop", () => {
  it("demo/tools.json registers in its order (refund_charge first); charge_card's compensation refunds the charge once, after a person approves", async () => {
    await testTenant();
    const up = upstream();
    const text = JSON.stringify(demoTools)
      .replaceAll("{{UPSTREAM_ORIGIN}}", new URL(up.url).origin)
      .replaceAll("{{UPSTREAM}}", up.url);
    expect(
      (await api("PUT", "/v1/secrets/SHOP_API_KEY", { value: "sk_demo_undo" })).status,
    ).toBeLessThan(300);
    for (const tool of JSON.parse(text) as Array<Record<string, unknown>>)
      expect((await put(tool)).status, tool.name as string).toBeLessThan(300);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: ["charge_card"],
      context: { customer_id: "cus_1", charge_limit: 10_000 },
    });
    const original = await charged(run.body.run_id, "charge_card", 1500);
    expect(original.status).toBe("succeeded");
    const asked = await compensate(original.operation_id, "demo: customer changed their mind");
    expect(asked.body).toMatchObject({ tool: "refund_charge", phase: "awaiting_approval" });
    await approveAndWait(asked.body.operation_id);
    expect((await compensate(original.operation_id)).status).toBe(200);
    const refunds = await refundsOf(up);
    expect(refunds.map((r) => r.body)).toEqual([
      { charge_id: original.result!.id, amount: 1500, reason: "requested_by_customer" },
    ]);
  });
});

// The tool answered success with output toolgate could not read (failed/invalid_output): the charge
// TOOK EFFECT. It must never be called "nothing applied", and a rollback must not skip it.
describe("a write that took effect but whose answer could not be read", () => {
  const INPUT_ONLY = {
    arguments: { charge_id: "by-amount", amount: "{input.amount}", reason: "duplicate" },
  };

  async function unreadableCharge(s: Awaited<ReturnType<typeof shop>>, amount: number) {
    await s.up.script({ kind: "invalid_json" });
    const c = await charged(s.runId, s.charge.name as string, amount);
    expect(c).toMatchObject({ status: "failed", code: "invalid_output" });
    return c;
  }

  it("templates over its input only: compensable, refunded once after a person approves", async () => {
    const s = await shop({}, {}, INPUT_ONLY);
    const c = await unreadableCharge(s, 700);
    expect((await s.up.state()).effects.filter((e) => e.path.endsWith("/charges"))).toHaveLength(1);
    const asked = await compensate(c.operation_id);
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    await approveAndWait(asked.body.operation_id);
    expect((await refundsOf(s.up)).map((r) => r.body)).toEqual([
      { charge_id: "by-amount", amount: 700, reason: "duplicate" },
    ]);
    expect((await operation(c.operation_id)).body.compensated_by).toBe(asked.body.operation_id);
  });

  it("a {result.*} template: a typed 422 that says it took effect and has no result (never 'nothing was applied'); nothing sent", async () => {
    const s = await shop();
    const c = await unreadableCharge(s, 800);
    const asked = await compensate(c.operation_id);
    expect(asked.status).toBe(422);
    expect(asked.body.code).toBe("compensation_arguments_invalid");
    expect(asked.body.detail).toMatch(/took effect/);
    expect(asked.body.detail).not.toMatch(/nothing was applied/);
    expect(await refundsOf(s.up)).toHaveLength(0);
  });

  it("cancel with rollback: it is a step, not skipped — the rollback stops there and says why instead of reporting completed", async () => {
    const s = await shop();
    const first = await charged(s.runId, s.charge.name as string, 100);
    expect(first.status).toBe("succeeded");
    const unreadable = await unreadableCharge(s, 200);
    const cancelled = await api("POST", `/v1/runs/${s.runId}/cancel`, { rollback: true });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    const steps = cancelled.body.rollback.steps;
    expect(steps.map((x: any) => [x.operation_id, x.state])).toEqual([
      [unreadable.operation_id, "failed"],
      [first.operation_id, "pending"],
    ]);
    expect(steps[0].detail).toMatch(/took effect/);
    expect(cancelled.body.rollback.state).toBe("stopped");
    expect(await refundsOf(s.up)).toHaveLength(0);
  });
});

// A compensation that applied nothing (a person rejected it, its approval expired, the refund tool
// refused it) must not leave the charge impossible to undo through toolgate: asking again makes the
// next generation (a new operation and key). One that took effect, is under way or is unknown stays
// THE compensation: asking again returns it, so a charge is never refunded twice.
describe("asking again after a compensation that applied nothing", () => {
  afterEach(() => vi.useRealTimers());
  const reject = (id: string) =>
    api("POST", `/v1/operations/${id}/reject`, { reason: "wrong amount" });

  it("rejected by a person → five asks at once make ONE new compensation (new id and key); approved, one refund; asked again, the same one", async () => {
    const s = await shop();
    const c = await charged(s.runId, s.charge.name as string, 900);
    const first = await compensate(c.operation_id);
    expect(first.status).toBe(201);
    expect((await reject(first.body.operation_id)).status).toBe(200);
    expect((await operation(first.body.operation_id)).body.result.status).toBe("rejected");
    const asked = await Promise.all([1, 2, 3, 4, 5].map(() => compensate(c.operation_id)));
    expect(asked.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 201]);
    const ids = new Set(asked.map((a) => a.body.operation_id));
    expect(ids.size).toBe(1);
    const [second] = [...ids] as string[];
    expect(second).not.toBe(first.body.operation_id);
    expect(asked[0]!.body).toMatchObject({
      compensates: c.operation_id,
      phase: "awaiting_approval",
    });
    expect(asked[0]!.body.idempotency_key).not.toBe(first.body.idempotency_key);
    await approveAndWait(second!);
    const again = await compensate(c.operation_id);
    expect(again.status).toBe(200);
    expect(again.body.operation_id).toBe(second);
    const refunds = await refundsOf(s.up);
    expect(refunds.map((r) => [r.body.charge_id, r.body.amount, r.key])).toEqual([
      [c.result!.id, 900, asked[0]!.body.idempotency_key],
    ]);
    expect((await operation(c.operation_id)).body.compensated_by).toBe(second);
  });

  it("its approval expired → asked anew; the expired one never sent", async () => {
    const s = await shop();
    const c = await charged(s.runId, s.charge.name as string, 450);
    const first = await compensate(c.operation_id);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 16 * 60_000);
    await fireAlarm(first.body.operation_id);
    expect((await operation(first.body.operation_id)).body.result).toMatchObject({
      status: "rejected",
      code: "approval_expired",
    });
    vi.useRealTimers();
    const second = await compensate(c.operation_id);
    expect(second.status).toBe(201);
    expect(second.body.operation_id).not.toBe(first.body.operation_id);
    await approveAndWait(second.body.operation_id);
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([450]);
  });

  it("a refund that took effect with an unreadable answer, or whose outcome is unknown, is never asked anew: the same compensation, one refund", async () => {
    const s = await shop({}, {}, { approval: "none" });
    const took = await charged(s.runId, s.charge.name as string, 300);
    await s.up.script({ kind: "invalid_json" });
    const first = await compensate(took.operation_id, "r", undefined);
    const settled = await operation(first.body.operation_id, 5);
    expect(settled.body.result).toMatchObject({ status: "failed", code: "invalid_output" });
    const again = await compensate(took.operation_id);
    expect(again.status).toBe(200);
    expect(again.body.operation_id).toBe(first.body.operation_id);
    expect(await refundsOf(s.up)).toHaveLength(1);

    const unknown = await charged(s.runId, s.charge.name as string, 301);
    await s.up.script(
      { kind: "commit_then_reset" },
      { kind: "commit_then_reset" },
      { kind: "commit_then_reset" },
      { kind: "commit_then_reset" },
    );
    const asked = await compensate(unknown.operation_id);
    const after = await operation(asked.body.operation_id, 2);
    expect(after.body.phase).not.toBe("recorded");
    const repeat = await compensate(unknown.operation_id);
    expect(repeat.status).toBe(200);
    expect(repeat.body.operation_id).toBe(asked.body.operation_id);
  });

  it("cancel with rollback stopped at a rejected refund; cancelled with rollback again, that step is asked anew and the rollback completes: each charge refunded once", async () => {
    const s = await shop();
    const a = await charged(s.runId, s.charge.name as string, 100);
    const b = await charged(s.runId, s.charge.name as string, 200);
    const cancelled = await api("POST", `/v1/runs/${s.runId}/cancel`, { rollback: true });
    const firstStep = cancelled.body.rollback.steps[0];
    expect(firstStep).toMatchObject({ operation_id: b.operation_id, state: "submitted" });
    await reject(firstStep.compensation_id);
    await runDurableObjectAlarm(runObject(s.runId));
    let report = (await api("GET", `/v1/runs/${s.runId}`)).body.rollback;
    expect(report.state).toBe("stopped");
    expect(report.steps.map((x: any) => x.state)).toEqual(["failed", "pending"]);
    report = (await api("POST", `/v1/runs/${s.runId}/cancel`, { rollback: true })).body.rollback;
    expect(report.state).toBe("running");
    expect(report.steps[0].state).toBe("submitted");
    expect(report.steps[0].compensation_id).not.toBe(firstStep.compensation_id);
    await approveStep(s.runId, 0);
    report = await approveStep(s.runId, 1);
    expect(report.state).toBe("completed");
    expect((await refundsOf(s.up)).map((r) => [r.body.charge_id, r.body.amount])).toEqual([
      [b.result!.id, 200],
      [a.result!.id, 100],
    ]);
  });
});
