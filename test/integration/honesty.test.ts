// Outcome honesty under every fault (issue 7), through the public API against the fault-injecting
// upstream: once an attempt may have applied, nothing tells the model it did not; every attempt
// ends in exactly one classified observation; "nothing was sent" only when Cloudflare proves it.
import { describe, expect, it } from "vitest";
import { runInDurableObject } from "cloudflare:test";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  opStub,
  REFUSED_URL,
  setup,
  trace,
  turn,
  upstream,
  automaticWork,
} from "../support/api.ts";

const charge = { amount: 700, currency: "usd" };
const NOT_APPLIED =
  /did not take effect|before it took effect|did not happen|nothing was sent|did not succeed/i;

/** No idempotency support upstream, but the write carries a reference the status lookup can find. */
const lookupOnly = (url: string, extra: Record<string, unknown> = {}) =>
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
    ...extra,
  });

const observed = async (runId: string) =>
  (await trace(runId)).filter((e) => e.type === "attempt_finished").map((e) => e.observed.kind);

describe("(a) keyed write: commit, then timeout, then 503 until exhaustion", () => {
  it("ends outcome_unknown with one effect, and nothing says it did not take effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 3 }),
    );
    await up.script(
      { kind: "commit_then_hang" },
      { kind: "gateway", status: 503 },
      { kind: "gateway", status: 503 },
    );
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;

    expect(await fireAlarm(operationId)).toBe(true); // attempt 2: 503
    const between = await operation(operationId);
    expect(between.body).toMatchObject({
      phase: "retry_scheduled",
      result: { status: "outcome_unknown" },
    });
    expect(await fireAlarm(operationId)).toBe(true); // attempt 3: 503, budget used up

    const final = await operation(operationId);
    expect(final.body.phase).toBe("outcome_unknown");
    expect(final.body.result).toMatchObject({
      status: "outcome_unknown",
      allowed_next_actions: ["wait", "check_status", "tell_user"],
    });
    expect(final.body.result.message).toMatch(/same idempotency key/);
    const polled = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(JSON.stringify([final.body, polled.body])).not.toMatch(NOT_APPLIED);
    expect((await trace(runId)).filter((e) => e.type === "recorded")).toEqual([]);

    // Attempts spent, but the key settles it late (issue 24): the resend gets the stored replay.
    expect(await fireAlarm(operationId)).toBe(true);
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests).toHaveLength(4);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect((await operation(operationId)).body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
  });

  it("(f) a person's resend sends once more with the same key: one more request, still one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 2 }),
    );
    await up.script({ kind: "commit_then_hang" }, { kind: "gateway", status: 503 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    expect((await operation(operationId)).body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });

    const resent = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "the ledger shows nothing; send it again",
    });
    expect(resent.status).toBe(200);
    const done = await operation(operationId, 5);
    const state = await up.state();
    expect(done.body.result).toEqual({
      status: "succeeded",
      operation_id: operationId,
      result: expect.objectContaining({ id: state.effects[0]!.id }),
    });
    expect(state.requests).toHaveLength(3);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect(state.effects).toHaveLength(1);
    const events = await trace(runId);
    expect(events.find((e) => e.type === "resolved")).toMatchObject({
      outcome: "resend",
      reason: "the ledger shows nothing; send it again",
    });
    expect(events.filter((e) => e.type === "attempt_started").map((e) => e.attempt)).toEqual([
      1, 2, 3,
    ]);
    expect(await observed(runId)).toEqual(["timeout", "http_error", "ok"]);

    const again = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "twice",
    });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe("not_outcome_unknown");
  });

  it("resend is refused for a tool without an idempotency key", async () => {
    const up = upstream();
    const { name, runId } = await setup(
      manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } }),
    );
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    expect(first.body.results[0].message).toMatch(/no safe way to check or to repeat it/);
    const operationId = first.body.results[0].operation_id as string;
    const refused = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "try again",
    });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("resend_not_allowed");
    expect((await operation(operationId)).body.phase).toBe("outcome_unknown");
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("a resend is a new execution: refused once the run no longer allows it (scope revoked)", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      max_attempts: 1,
      requires_scopes: ["payments:charge"],
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: [tool.name],
    });
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(run.body.run_id, [{ id: "c1", name: tool.name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;
    expect(
      (await api("PATCH", `/v1/runs/${run.body.run_id}`, { user: { scopes: [] } })).status,
    ).toBe(200);
    const refused = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "send it again",
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      code: "resend_not_allowed",
      detail: expect.stringMatching(/forbidden/),
    });
    expect((await operation(operationId)).body.phase).toBe("outcome_unknown");
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("keyed: slow commit outliving the timeout, then 409 'in progress' until exhaustion → outcome_unknown, one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, max_attempts: 2 }),
    );
    await up.script({ kind: "hang" }); // holds the key "in progress" for good
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // resend: 409 for the same key
    const final = await operation(operationId);
    expect(final.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    expect(JSON.stringify(final.body)).not.toMatch(NOT_APPLIED);
    const state = await up.state();
    expect(state.requests).toHaveLength(2);
    expect(await observed(runId)).toEqual(["timeout", "http_error"]);
  });
});

describe("(b) lookup-only write whose slow answer outlives the timeout and commits later", () => {
  it("a 404 inside the settle window does not trigger a resend; the later lookup finds the one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      lookupOnly(up.url, {
        reconcile: {
          url: `${up.url}/effects?idempotency_key={idempotency_key}`,
          settle_ms: 600_000,
        },
      }),
    );
    await up.script({ kind: "slow", delayMs: 3_000 }); // commits long after the 300 ms timeout and the first lookup
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }], 1);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;

    expect(await fireAlarm(operationId)).toBe(true); // another lookup, still inside the window
    await up.waitForEffects(1); // the abandoned request commits
    expect(await fireAlarm(operationId)).toBe(true);
    const done = await operation(operationId);
    const state = await up.state();
    expect(done.body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.requests.filter((r) => r.method === "POST")).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
    const events = await trace(runId);
    expect(events.filter((e) => e.type === "reconcile_deferred").length).toBeGreaterThanOrEqual(1);
    expect(events.filter((e) => e.type === "attempt_started")).toHaveLength(1);
  });

  it("settle_ms is a manifest field: negative values are refused at PUT", async () => {
    const up = upstream();
    const bad = lookupOnly(up.url, {
      reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}`, settle_ms: -1 },
    });
    const put = await api("PUT", `/v1/tools/${bad.name}`, bad);
    expect(put.status).toBe(422);
  });
});

describe("(c, d) 200 headers, then the body stalls or drops", () => {
  it("(c) keyed, body stalls: one body_lost observation, never stuck executing; the resend with the same key gets the stored result", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 300 }));
    await up.script({ kind: "headers_then_stall" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }], 2);
    const operationId = first.body.results[0].operation_id as string;
    await fireAlarm(operationId); // the watchdog or the resend: whichever is due, nothing stays executing
    const done = await operation(operationId, 5);
    expect(done.body.phase).toBe("recorded");
    const state = await up.state();
    expect(done.body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect(await observed(runId)).toEqual(["body_lost", "ok"]);
  });

  it("(c) no key, body stalls: failed/invalid_output that says it took effect; one request, nothing scheduled", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } }),
    );
    await up.script({ kind: "headers_then_stall" });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }], 5);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: "failed", code: "invalid_output" });
    expect(res.body.results[0].message).toMatch(/took effect/);
    expect(res.body.results[0].message).not.toMatch(NOT_APPLIED);
    expect(await automaticWork(res.body.results[0].operation_id)).toBe(false);
    expect((await up.state()).requests).toHaveLength(1);
    expect(await observed(runId)).toEqual(["body_lost"]);
  });

  it("(d) keyed, body drops mid-stream: resent with the same key, one effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 2_000 }));
    await up.script({ kind: "headers_then_drop" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }], 5);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "connection_lost",
    });
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    const state = await up.state();
    expect((await operation(operationId)).body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    expect(await observed(runId)).toEqual(["body_lost", "ok"]);
  });

  it("(d) read, body drops mid-stream: retried", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({
        url: up.url,
        risk: "read",
        request: { method: "GET", url: `${up.url}/orders/{currency}` },
        timeout_ms: 2_000,
      }),
    );
    await up.script({ kind: "headers_then_drop" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }], 5);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    expect(await fireAlarm(first.body.results[0].operation_id)).toBe(true);
    expect((await operation(first.body.results[0].operation_id)).body.result).toMatchObject({
      status: "succeeded",
      result: { path: "/orders/usd" },
    });
    expect(await observed(runId)).toEqual(["body_lost", "ok"]);
  });
});

describe("(e) nothing sent, proven by Cloudflare's 521/522/523", () => {
  it("a write with neither key nor lookup is retried, and exhaustion says nothing was sent", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, idempotency: { mode: "none" }, max_attempts: 3 }),
    );
    await up.script(
      { kind: "gateway", status: 521 },
      { kind: "gateway", status: 522 },
      { kind: "gateway", status: 523 },
    );
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.status).toBe(202);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    expect(await fireAlarm(operationId)).toBe(true);
    const final = await operation(operationId);
    expect(final.body.result).toMatchObject({
      status: "budget_exhausted",
      code: "attempts_exhausted",
    });
    expect(final.body.result.message).toMatch(/nothing was sent/);
    expect(final.body.result.message).toMatch(/did not take effect/);
    expect((await up.state()).effects).toHaveLength(0);
    expect(await automaticWork(operationId)).toBe(false);
  });
});

describe("a refused connection is not proof that nothing was sent (workerd reports it like a reset)", () => {
  it("keyed: outcome_unknown, resent with the same key", async () => {
    const { runId, name } = await setup(manifest({ url: REFUSED_URL }));
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "connection_lost",
    });
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    const events = await trace(runId);
    expect(events.filter((e) => e.type === "attempt_finished").map((e) => e.observed.kind)).toEqual(
      ["connection_lost", "connection_lost"],
    );
    expect(
      new Set(events.filter((e) => e.type === "attempt_started").map((e) => e.idempotency_key))
        .size,
    ).toBe(1);
    expect((await operation(operationId)).body.phase).toBe("outcome_unknown");
  });

  it("neither key nor lookup: outcome_unknown for a person, not retried", async () => {
    const { runId, name } = await setup(
      manifest({ url: REFUSED_URL, idempotency: { mode: "none" } }),
    );
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.status).toBe(200);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "connection_lost",
    });
    expect(await fireAlarm(first.body.results[0].operation_id)).toBe(false);
  });

  it("read: retried", async () => {
    const { runId, name } = await setup(
      manifest({
        url: REFUSED_URL,
        risk: "read",
        request: { method: "GET", url: `${REFUSED_URL}/orders/{currency}` },
      }),
    );
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
  });
});

describe("3xx after a write", () => {
  it("a 303 See Other after a POST is outcome_unknown (a person decides), not 'definitely did not succeed'", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "redirect", status: 303, location: "/charges/eff_1", commit: true });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "redirect_unknown",
    });
    expect(JSON.stringify(res.body)).not.toMatch(NOT_APPLIED);
    expect(await fireAlarm(res.body.results[0].operation_id)).toBe(false);
    expect((await up.state()).requests).toHaveLength(1);
    void runId;
  });

  it("a lookup-only write that was redirected is settled by the status lookup", async () => {
    const up = upstream();
    const { runId, name } = await setup(lookupOnly(up.url));
    await up.script({ kind: "redirect", status: 303, location: "/charges/x", commit: true });
    const res = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const state = await up.state();
    expect(res.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.requests.map((r) => r.method)).toEqual(["POST", "GET"]);
  });
});

describe("(g) a stored tool that no longer compiles (e.g. the upstream allow-list shrank)", () => {
  // A redeploy with a shorter TOOLGATE_UPSTREAM_ALLOWLIST cannot happen inside a test, so the
  // operation's frozen tool is rewritten in storage to a host the deployment does not allow.
  async function breakStoredTool(operationId: string) {
    await runInDurableObject(opStub(operationId), (_instance: unknown, state: DurableObjectState) =>
      state.abort("reload"),
    ).catch(() => {});
    await runInDurableObject(
      opStub(operationId),
      (_instance: unknown, state: DurableObjectState) => {
        const row = state.storage.sql
          .exec<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1")
          .one();
        const frozen = JSON.parse(row.frozen);
        frozen.source.manifest.request.url = "https://not-allowed.example/charges";
        state.storage.sql.exec(
          "UPDATE op_log SET frozen = ? WHERE seq = 1",
          JSON.stringify(frozen),
        );
      },
    );
  }

  it("a retry that cannot be built → failed/permanent_failure naming the configuration; GET never 500s", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    await up.script({ kind: "status", status: 429 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    const operationId = first.body.results[0].operation_id as string;
    await breakStoredTool(operationId);

    const view = await operation(operationId);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ tool: name, phase: "retry_scheduled" });
    expect(await fireAlarm(operationId)).toBe(true);
    const final = await operation(operationId);
    expect(final.status).toBe(200);
    expect(final.body.result).toMatchObject({
      status: "failed",
      code: "permanent_failure",
      message: expect.stringMatching(/not-allowed\.example/),
    });
    const replay = await turn(runId, [{ id: "c2", name, arguments: charge }]);
    expect(replay.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect((await up.state()).requests).toHaveLength(1);
  });

  it("after an ambiguous attempt it stays outcome_unknown: the first attempt may have applied", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 300 }));
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    await breakStoredTool(operationId);
    expect(await fireAlarm(operationId)).toBe(true);
    const final = await operation(operationId);
    expect(final.status).toBe(200);
    expect(final.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    expect(JSON.stringify(final.body)).not.toMatch(NOT_APPLIED);
    expect((await up.state()).effects).toHaveLength(1);
    void runId;
  });
});

describe("denial and cancellation after an ambiguous attempt", () => {
  it("cancel while a keyed resend is pending → outcome_unknown for a person; the turn never says it did not take effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, timeout_ms: 300 }));
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;
    const cancelled = await api("POST", `/v1/operations/${operationId}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    const polled = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(JSON.stringify([cancelled.body, polled.body])).not.toMatch(NOT_APPLIED);
    expect(await fireAlarm(operationId)).toBe(false); // nothing is resent after a cancel
    const refused = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "r",
    });
    expect(refused.body.code).toBe("resend_not_allowed");
    expect((await up.state()).requests).toHaveLength(1);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("scope revoked while a resend waits (after timeout, then 503) → outcome_unknown, not rejected 'did not take effect'", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, timeout_ms: 300, requires_scopes: ["payments:charge"] });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: [tool.name],
    });
    await up.script({ kind: "commit_then_hang" }, { kind: "gateway", status: 503 });
    const first = await turn(run.body.run_id, [{ id: "c1", name: tool.name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // resend → 503: retry scheduled, flag set
    expect((await operation(operationId)).body.phase).toBe("retry_scheduled");
    expect(
      (await api("PATCH", `/v1/runs/${run.body.run_id}`, { user: { scopes: [] } })).status,
    ).toBe(200);
    expect(await fireAlarm(operationId)).toBe(true); // the run denies the next send
    const final = await operation(operationId);
    expect(final.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown" },
    });
    expect(JSON.stringify(final.body)).not.toMatch(NOT_APPLIED);
    expect((await trace(run.body.run_id)).find((e) => e.type === "denied")).toMatchObject({
      code: "forbidden",
    });
    expect((await up.state()).requests).toHaveLength(2);
  });
});
