// Undo under attack (issue 22 follow-up): the worst legal things a tenant, a model, a person or the
// network can do to a compensation or a rollback. Every test counts what the refund upstream
// (demo/upstream.ts) actually did — how many refunds, for which charge, how much, under which
// Idempotency-Key — and checks what each caller was told.
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ALL_SCOPES,
  api,
  fireAlarm,
  newTenant,
  operation,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import {
  cancelRollback,
  charged,
  compensate,
  newRun,
  put,
  refundRequestsOf,
  refundsOf,
  settleRollback,
  shop,
} from "../support/undo.ts";

afterEach(() => vi.useRealTimers());

describe("1. a manual compensate and a cancel with rollback race for the same charge", () => {
  it("fired at once, five times over: one refund per charge, one compensation id, both callers see it", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const seen: Array<{ charge: string; amount: number }> = [];
    for (let round = 0; round < 5; round++) {
      const runId = await newRun([s.charge.name as string]);
      const amount = 100 + round;
      const original = await charged(runId, s.charge.name as string, amount);
      const [manual, cancel] = await Promise.all([
        compensate(original.operation_id, {}, 5),
        cancelRollback(runId),
      ]);
      expect([200, 201]).toContain(manual.status);
      expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
      const step = cancel.body.rollback.steps[0];
      expect(cancel.body.rollback.steps).toHaveLength(1);
      expect(step.operation_id).toBe(original.operation_id);
      expect(step.compensation_id).toBe(manual.body.operation_id);
      expect((await operation(original.operation_id)).body.compensated_by).toBe(
        manual.body.operation_id,
      );
      const report = await settleRollback(runId);
      expect(report).toMatchObject({ state: "completed" });
      expect(report.steps[0]).toMatchObject({
        state: "compensated",
        compensation_id: manual.body.operation_id,
      });
      seen.push({ charge: original.result!.id, amount });
    }
    const refunds = await refundsOf(s.up);
    expect(refunds.map((r) => ({ charge: r.body.charge_id, amount: r.body.amount }))).toEqual(seen);
    expect(new Set(refunds.map((r) => r.key)).size).toBe(5);
  });
});

describe("1b. a person compensates a charge the rollback has not reached yet", () => {
  it("the rollback adopts that compensation when it gets there: each charge refunded once, newest first where it decided", async () => {
    const s = await shop();
    const first = await charged(s.runId, s.charge.name as string, 100);
    const second = await charged(s.runId, s.charge.name as string, 200);
    const cancelled = await cancelRollback(s.runId);
    expect(cancelled.body.rollback.steps.map((x: any) => x.state)).toEqual([
      "submitted",
      "pending",
    ]);
    const manual = await compensate(first.operation_id);
    expect(manual.status).toBe(201);
    expect(
      (await api("POST", `/v1/operations/${manual.body.operation_id}/approve`, {})).status,
    ).toBe(200);
    expect((await operation(manual.body.operation_id, 5)).body.phase).toBe("recorded");
    const step0 = cancelled.body.rollback.steps[0].compensation_id as string;
    expect((await api("POST", `/v1/operations/${step0}/approve`, {})).status).toBe(200);
    expect((await operation(step0, 5)).body.phase).toBe("recorded");
    const report = await settleRollback(s.runId);
    expect(report).toMatchObject({ state: "completed" });
    expect(report.steps.map((x: any) => [x.state, x.compensation_id])).toEqual([
      ["compensated", step0],
      ["compensated", manual.body.operation_id],
    ]);
    expect((await refundsOf(s.up)).map((r) => r.body.charge_id)).toEqual([
      first.result!.id,
      second.result!.id,
    ]);
  });
});

describe("2. cancels with rollback against each other", () => {
  it("two at once, then a third and a plain one: the same steps, each charge refunded once, one consistent report", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const first = await charged(s.runId, s.charge.name as string, 100);
    const second = await charged(s.runId, s.charge.name as string, 200);
    const [a, b] = await Promise.all([cancelRollback(s.runId), cancelRollback(s.runId)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const ops = (r: typeof a) => r.body.rollback.steps.map((x: any) => x.operation_id);
    expect(ops(a)).toEqual([second.operation_id, first.operation_id]);
    expect(ops(b)).toEqual(ops(a));
    expect(a.body.rollback.steps[0].compensation_id).toBe(b.body.rollback.steps[0].compensation_id);
    const report = await settleRollback(s.runId);
    expect(report.state).toBe("completed");
    expect(report.steps.map((x: any) => x.state)).toEqual(["compensated", "compensated"]);
    const again = await cancelRollback(s.runId);
    const plain = await api("POST", `/v1/runs/${s.runId}/cancel`);
    expect(again.body.rollback).toEqual(report);
    expect(plain.body.rollback).toEqual(report);
    const refunds = await refundsOf(s.up);
    expect(refunds.map((r) => [r.body.charge_id, r.body.amount])).toEqual([
      [second.result!.id, 200],
      [first.result!.id, 100],
    ]);
  });

  it("a plain cancel first, then a cancel with rollback: the writes of the cancelled run are still undone once", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const first = await charged(s.runId, s.charge.name as string, 300);
    const plain = await api("POST", `/v1/runs/${s.runId}/cancel`);
    expect(plain.status).toBe(200);
    const [a, b] = await Promise.all([cancelRollback(s.runId), cancelRollback(s.runId)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.rollback.steps).toHaveLength(1);
    const report = await settleRollback(s.runId);
    expect(report).toMatchObject({ state: "completed" });
    expect((await refundsOf(s.up)).map((r) => r.body.charge_id)).toEqual([first.result!.id]);
  });
});

describe("3. the refund upstream misbehaves", () => {
  it("500 then 200, and a refund applied whose answer timed out then 200: retried only under the compensation's one Idempotency-Key, one refund each", async () => {
    for (const fault of [{ kind: "status", status: 500 }, { kind: "commit_then_hang" }] as const) {
      const s = await shop({ undo: { approval: "none" } });
      const original = await charged(s.runId, s.charge.name as string, 400);
      await s.up.script(fault, { kind: "ok" });
      const asked = await compensate(original.operation_id, {}, 5);
      expect(asked.status).toBe(201);
      const id = asked.body.operation_id as string;
      expect(asked.body.phase, fault.kind).not.toBe("recorded");
      await fireAlarm(id);
      const done = await operation(id, 5);
      expect(done.body, fault.kind).toMatchObject({
        phase: "recorded",
        result: { status: "succeeded" },
      });
      const requests = await refundRequestsOf(s.up);
      expect(requests.length, fault.kind).toBe(2);
      expect(new Set(requests.map((r) => r.key)).size, fault.kind).toBe(1);
      expect(requests[0]!.key).toBeTruthy();
      expect((await refundsOf(s.up)).map((r) => r.body.charge_id)).toEqual([original.result!.id]);
      // Asked again after all that: the same one, nothing more sent.
      expect((await compensate(original.operation_id)).body.operation_id).toBe(id);
      expect(await refundRequestsOf(s.up)).toHaveLength(2);
    }
  });

  it("a refund whose connection drops after it committed (no idempotency): outcome_unknown, never 'not executed', and the rollback stops there", async () => {
    const s = await shop({ undo: { approval: "none" }, refund: { idempotency: { mode: "none" } } });
    const first = await charged(s.runId, s.charge.name as string, 100);
    const second = await charged(s.runId, s.charge.name as string, 200);
    await s.up.script({ kind: "commit_then_reset" });
    const cancelled = await cancelRollback(s.runId);
    const stuck = cancelled.body.rollback.steps[0];
    expect(stuck.operation_id).toBe(second.operation_id);
    const view = await operation(stuck.compensation_id, 5);
    expect(view.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    expect(JSON.stringify(view.body)).not.toMatch(/not executed|did not take effect/i);
    const report = await settleRollback(s.runId);
    expect(report.state).toBe("stopped");
    expect(report.steps.map((x: any) => x.state)).toEqual(["outcome_unknown", "pending"]);
    // The refund committed; nothing else was asked, and it was never resent.
    const requests = await refundRequestsOf(s.up);
    expect(requests.map((r) => r.body.charge_id)).toEqual([second.result!.id]);
    expect((await refundsOf(s.up)).map((r) => r.body.charge_id)).toEqual([second.result!.id]);
  });

  it("a refund answered 200 whose body stalls (no idempotency): told it took effect, not resent, counted as compensated (the rollback goes on), each charge refunded once", async () => {
    const s = await shop({ undo: { approval: "none" }, refund: { idempotency: { mode: "none" } } });
    const first = await charged(s.runId, s.charge.name as string, 100);
    const second = await charged(s.runId, s.charge.name as string, 200);
    await s.up.script({ kind: "headers_then_stall", commit: true });
    const cancelled = await cancelRollback(s.runId);
    const stuck = cancelled.body.rollback.steps[0];
    const view = await operation(stuck.compensation_id, 5);
    expect(view.body.phase).toBe("recorded");
    expect(view.body.result.message).toMatch(/took effect/);
    expect(JSON.stringify(view.body)).not.toMatch(/not executed|did not take effect/i);
    const report = await settleRollback(s.runId);
    expect(report.state).toBe("completed");
    expect(report.steps.map((x: any) => x.state)).toEqual(["compensated", "compensated"]);
    expect(report.steps[0].detail).toMatch(/took effect/);
    const requests = await refundRequestsOf(s.up);
    expect(requests.map((r) => r.body.charge_id)).toEqual([second.result!.id, first.result!.id]);
    // Asked again, the refund that took effect stays THE compensation: never a second one.
    const again = await compensate(second.operation_id);
    expect(again.body.operation_id).toBe(stuck.compensation_id);
    expect(await refundRequestsOf(s.up)).toHaveLength(2);
  });
});

describe("4. the model calls the refund tool itself", () => {
  it("an ordinary call with its own id and key: not merged with the compensation, and the compensation's approval does not release it", async () => {
    const s = await shop({ offerRefund: true, refund: { approval: "always" } });
    const original = await charged(s.runId, s.charge.name as string, 900);
    const args = { charge_id: original.result!.id, amount: 900, reason: "requested_by_customer" };
    // The model even picks call ids that look like the compensation's.
    const modelTurn = await turn(
      s.runId,
      [{ id: `undo_${original.operation_id}`, name: s.refund.name as string, arguments: args }],
      0,
    );
    expect(modelTurn.status).toBeLessThan(300);
    const modelOp = modelTurn.body.results[0];
    expect(modelOp.status).toBe("awaiting_approval");
    const asked = await compensate(original.operation_id);
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    const compensationId = asked.body.operation_id as string;
    expect(compensationId).not.toBe(modelOp.operation_id);
    expect(asked.body).toMatchObject({ compensates: original.operation_id });
    expect((await operation(modelOp.operation_id)).body).toMatchObject({
      compensates: null,
      phase: "awaiting_approval",
    });
    expect((await operation(original.operation_id)).body.compensated_by).toBe(compensationId);
    // A person approves the compensation only: exactly one refund, the model's call still waits.
    expect((await api("POST", `/v1/operations/${compensationId}/approve`, {})).status).toBe(200);
    expect((await operation(compensationId, 5)).body).toMatchObject({ phase: "recorded" });
    expect(await refundsOf(s.up)).toHaveLength(1);
    expect((await operation(modelOp.operation_id)).body.phase).toBe("awaiting_approval");
    // Rejecting the model's call leaves the compensation alone.
    expect(
      (await api("POST", `/v1/operations/${modelOp.operation_id}/reject`, { reason: "no" })).status,
    ).toBe(200);
    expect((await compensate(original.operation_id)).body).toMatchObject({
      operation_id: compensationId,
      phase: "recorded",
    });
    expect(await refundsOf(s.up)).toHaveLength(1);
  });

  it("a model's own refund that ran first does not count as the compensation: both refunds happen, under two different keys", async () => {
    const s = await shop({ offerRefund: true, undo: { approval: "none" } });
    const original = await charged(s.runId, s.charge.name as string, 500);
    const args = { charge_id: original.result!.id, amount: 500, reason: "requested_by_customer" };
    const modelTurn = await turn(s.runId, [
      { id: unique("m"), name: s.refund.name as string, arguments: args },
    ]);
    expect(modelTurn.body.results[0].status).toBe("succeeded");
    const asked = await compensate(original.operation_id, {}, 5);
    expect(asked.body).toMatchObject({ phase: "recorded", compensates: original.operation_id });
    expect(asked.body.operation_id).not.toBe(modelTurn.body.results[0].operation_id);
    const refunds = await refundsOf(s.up);
    expect(refunds).toHaveLength(2);
    expect(new Set(refunds.map((r) => r.key)).size).toBe(2);
  });
});

describe("5. compensating after the run ended", () => {
  it("a cancelled run: still compensates, once", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const original = await charged(s.runId, s.charge.name as string, 610);
    expect((await api("POST", `/v1/runs/${s.runId}/cancel`)).status).toBe(200);
    const burst = await Promise.all([0, 1, 2].map(() => compensate(original.operation_id, {}, 5)));
    expect(burst.map((r) => r.status).sort()).toEqual([200, 200, 201]);
    expect(new Set(burst.map((r) => r.body.operation_id)).size).toBe(1);
    expect((await operation(burst[0]!.body.operation_id, 5)).body.phase).toBe("recorded");
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([610]);
  });

  it("a run past its expiry (the scripted clock 25 h on): still compensates, once", async () => {
    const s = await shop({ undo: { approval: "none" } });
    const original = await charged(s.runId, s.charge.name as string, 620);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 25 * 3_600_000);
    // The agent's run token has expired: it can no longer act in the run…
    const late = await api(
      "POST",
      `/v1/runs/${s.runId}/turns?format=native`,
      {
        calls: [
          { id: unique("c"), name: s.charge.name, arguments: { amount: 1, currency: "usd" } },
        ],
      },
      { Authorization: `Bearer ${s.runToken}` },
    );
    expect(late.status).toBe(401);
    // …a person still can undo what it did.
    const first = await compensate(original.operation_id, {}, 5);
    const again = await compensate(original.operation_id, {}, 5);
    expect([first.status, again.status]).toEqual([201, 200]);
    expect(again.body.operation_id).toBe(first.body.operation_id);
    expect(again.body.phase).toBe("recorded");
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([620]);
  });
});

describe("6. the compensating tool changes under the compensation", () => {
  it("DELETEd before the ask: typed 422, nothing sent", async () => {
    const s = await shop();
    const original = await charged(s.runId, s.charge.name as string, 700);
    expect((await api("DELETE", `/v1/tools/${s.refund.name as string}`)).status).toBe(204);
    const refused = await compensate(original.operation_id);
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("compensation_arguments_invalid");
    expect(refused.body.detail).toContain("no longer registered");
    expect(await refundRequestsOf(s.up)).toHaveLength(0);
  });

  it("re-PUT with another URL and no idempotency, or DELETEd, while the compensation waits for approval: the approval no longer applies, nothing is sent anywhere", async () => {
    for (const change of ["url", "idempotency", "delete"] as const) {
      const s = await shop();
      const elsewhere = upstream();
      const original = await charged(s.runId, s.charge.name as string, 710);
      const asked = await compensate(original.operation_id);
      expect(asked.body.phase).toBe("awaiting_approval");
      if (change === "delete")
        expect((await api("DELETE", `/v1/tools/${s.refund.name as string}`)).status).toBe(204);
      else
        expect(
          (
            await put({
              ...s.refund,
              ...(change === "url"
                ? { request: { method: "POST", url: `${elsewhere.url}/refunds` } }
                : { idempotency: { mode: "none" } }),
            })
          ).status,
        ).toBe(200);
      const approved = await api("POST", `/v1/operations/${asked.body.operation_id}/approve`, {});
      expect(approved.status, change).toBe(200);
      const view = await operation(asked.body.operation_id, 5);
      expect(view.body.result, change).toMatchObject({
        status: "rejected",
        code: "approval_expired",
      });
      expect(await refundRequestsOf(s.up), change).toHaveLength(0);
      expect(await refundRequestsOf(elsewhere), change).toHaveLength(0);
    }
  });

  it("re-PUT unchanged while it waits: the compensation still runs, once", async () => {
    const s = await shop();
    const original = await charged(s.runId, s.charge.name as string, 720);
    const asked = await compensate(original.operation_id);
    expect((await put(s.refund)).status).toBe(200);
    expect(
      (await api("POST", `/v1/operations/${asked.body.operation_id}/approve`, {})).status,
    ).toBe(200);
    expect((await operation(asked.body.operation_id, 5)).body.phase).toBe("recorded");
    expect((await compensate(original.operation_id)).status).toBe(200);
    expect((await refundsOf(s.up)).map((r) => r.body.amount)).toEqual([720]);
  });
});

describe("7. a Cedar policy forbids the refund", () => {
  it("the compensation is refused with a typed policy_denied naming the policy, nothing sent or recorded; once the policy allows it, asking again compensates once", async () => {
    const t = await newTenant(ALL_SCOPES);
    const as = { Authorization: `Bearer ${t.key}` };
    const s = await shop({ as, undo: { approval: "none" } });
    const policies = `permit (principal, action, resource);
@id("no-refunds")
forbid (principal, action == Action::"${s.refund.name as string}", resource);`;
    expect((await api("PUT", "/v1/policies", { policies }, as)).status).toBe(201);
    const runId = await newRun([s.charge.name as string], as);
    const original = await charged(runId, s.charge.name as string, 800, as);
    for (let i = 0; i < 2; i++) {
      const refused = await compensate(original.operation_id, as, 5);
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
      expect(refused.body.code).toBe("policy_denied");
      expect(refused.body.detail).toContain("no-refunds");
      expect(refused.body.detail).toMatch(/nothing was sent/);
    }
    expect(await refundRequestsOf(s.up)).toHaveLength(0);
    const view = await api("GET", `/v1/operations/${original.operation_id}`, undefined, as);
    expect(view.body.compensated_by).toBeNull();
    // The policy is fixed: the same original is compensated, once.
    expect(
      (await api("PUT", "/v1/policies", { policies: "permit (principal, action, resource);" }, as))
        .status,
    ).toBe(200);
    const asked = await compensate(original.operation_id, as, 5);
    expect(asked.status, JSON.stringify(asked.body)).toBe(201);
    expect(asked.body).toMatchObject({ phase: "recorded", result: { status: "succeeded" } });
    const again = await compensate(original.operation_id, as, 5);
    expect([again.status, again.body.operation_id]).toEqual([200, asked.body.operation_id]);
    expect((await refundsOf(s.up)).map((r) => [r.body.charge_id, r.body.amount])).toEqual([
      [original.result!.id, 800],
    ]);
  });
});

describe("7b. a Cedar policy forbids the refund during a rollback", () => {
  it("the step fails naming the policy, nothing sent; cancel with rollback again after the fix refunds each charge once", async () => {
    const t = await newTenant(ALL_SCOPES);
    const as = { Authorization: `Bearer ${t.key}` };
    const s = await shop({ as, undo: { approval: "none" } });
    const runId = await newRun([s.charge.name as string], as);
    const first = await charged(runId, s.charge.name as string, 810, as);
    const second = await charged(runId, s.charge.name as string, 820, as);
    const forbid = `permit (principal, action, resource);
@id("no-refunds")
forbid (principal, action == Action::"${s.refund.name as string}", resource);`;
    expect((await api("PUT", "/v1/policies", { policies: forbid }, as)).status).toBe(201);
    const cancelled = await cancelRollback(runId, as);
    expect(cancelled.body.rollback.state).toBe("stopped");
    expect(cancelled.body.rollback.steps[0]).toMatchObject({
      operation_id: second.operation_id,
      state: "failed",
      compensation_id: null,
    });
    expect(cancelled.body.rollback.steps[0].detail).toContain("no-refunds");
    expect(cancelled.body.rollback.steps[1].state).toBe("pending");
    expect(await refundRequestsOf(s.up)).toHaveLength(0);
    const allow = "permit (principal, action, resource);";
    expect((await api("PUT", "/v1/policies", { policies: allow }, as)).status).toBe(200);
    const [a, b] = await Promise.all([cancelRollback(runId, as), cancelRollback(runId, as)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const report = await settleRollback(runId, as);
    expect(report.state).toBe("completed");
    expect(report.steps.map((x: any) => x.state)).toEqual(["compensated", "compensated"]);
    expect((await refundsOf(s.up)).map((r) => [r.body.charge_id, r.body.amount])).toEqual([
      [second.result!.id, 820],
      [first.result!.id, 810],
    ]);
  });
});
