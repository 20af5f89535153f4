// A write commits upstream and the response never arrives. Each idempotency mode must end with
// exactly one effect: resend with the same key, status lookup, or a person's verdict.
import { describe, expect, it } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  upstream,
} from "../support/api.ts";

const charge = { amount: 700, currency: "usd" };

/** No idempotency support upstream, but the write carries a reference the status lookup can find. */
const reconcileOnly = (url: string) =>
  manifest({
    url,
    timeout_ms: 300,
    idempotency: { mode: "none" },
    request: {
      method: "POST",
      url: `${url}/charges`,
      headers: { "X-Client-Reference": "{idempotency_key}" },
    },
    reconcile: { url: `${url}/effects?idempotency_key={idempotency_key}` },
  });

describe("write committed, response timed out", () => {
  it("header-idempotent tool: outcome_unknown, then a resend with the same key gets the stored result", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 300 }));
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.status).toBe(202);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;

    expect(await fireAlarm(operationId)).toBe(true);
    const done = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(done.status).toBe(200);
    const state = await up.state();
    expect(done.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    expect(state.requests.map((r) => r.key)).toEqual([
      state.requests[0]!.key,
      state.requests[0]!.key,
    ]);
    expect((await trace(runId)).map((e) => e.type)).toContain("outcome_unknown");
  });

  it("reconcile-only tool: the status lookup finds the effect and no second write is sent", async () => {
    const up = upstream();
    const { runId, name } = await setup(reconcileOnly(up.url));
    await up.script({ kind: "commit_then_hang" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.status).toBe(200);
    const state = await up.state();
    expect(res.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    expect(state.requests.map((r) => r.method)).toEqual(["POST", "GET"]);
    const events = (await trace(runId)).map((e) => e.type);
    expect(events).toEqual(
      expect.arrayContaining(["outcome_unknown", "reconcile_started", "reconcile_finished"]),
    );
  });

  it("reconcile-only tool: a lookup that finds nothing after the settle window sends again with the same reference", async () => {
    const up = upstream();
    // settle_ms 0: the lookup runs after the attempt's own timeout, so its 404 is trusted at once
    // (the window itself is tested in honesty.test.ts).
    const { runId, name } = await setup({
      ...reconcileOnly(up.url),
      reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}`, settle_ms: 0 },
    });
    await up.script({ kind: "hang" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    expect(await fireAlarm(res.body.results[0].operation_id)).toBe(true);
    expect((await operation(res.body.results[0].operation_id)).body.result.status).toBe(
      "succeeded",
    );
    const state = await up.state();
    expect(state.requests.map((r) => r.method)).toEqual(["POST", "GET", "POST"]);
    expect(state.effects).toHaveLength(1);
  });

  it("tool with neither: stays outcome_unknown until a person resolves it", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } }),
    );
    await up.script({ kind: "commit_then_hang" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.status).toBe(200); // settled: nothing more will happen without a person
    expect(res.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    expect(res.body.results[0].message).toMatch(/Do not retry/);
    const operationId = res.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(false);
    // It is on the tenant's list of operations only a person can settle.
    const listed = await api("GET", "/v1/unknown-outcomes");
    expect(listed.body.operations.find((o: any) => o.operation_id === operationId)).toMatchObject({
      run_id: runId,
      tool: name,
    });

    // The model re-proposes it: still the stored unknown, no second write.
    const again = await turn(runId, [{ id: "c2", name, arguments: charge }]);
    expect(again.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      operation_id: operationId,
    });

    const bad = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "maybe",
      reason: "x",
    });
    expect(bad.status).toBe(400);
    const resolved = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "succeeded",
      result: { id: "eff_manual" },
      reason: "seen in the payments dashboard",
    });
    expect(resolved.status).toBe(200);
    expect(resolved.body.result).toEqual({
      status: "succeeded",
      operation_id: operationId,
      result: { id: "eff_manual" },
    });
    expect(
      (await api("GET", "/v1/unknown-outcomes")).body.operations.map((o: any) => o.operation_id),
    ).not.toContain(operationId);
    const twice = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "failed",
      reason: "changed my mind",
    });
    expect(twice.status).toBe(409);
    expect(twice.body.code).toBe("not_outcome_unknown");

    const replay = await turn(runId, [{ id: "c3", name, arguments: charge }]);
    expect(replay.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: "eff_manual" },
    });
    expect((await up.state()).requests).toHaveLength(1);
    expect((await up.state()).effects).toHaveLength(1);
    expect((await trace(runId)).find((e) => e.type === "resolved")).toMatchObject({
      outcome: "succeeded",
      reason: "seen in the payments dashboard",
    });
  });
});
