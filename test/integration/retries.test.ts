// Retries through the public API: one operation id, one idempotency key, one effect, backoff
// delays exactly as the pure policy computes them; alarms are fired by the test, never waited for.
import { describe, expect, it, vi } from "vitest";
import { nextDelayMs } from "../../src/domain/retry.ts";
import {
  ALL_SCOPES,
  api,
  newTenant,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  upstream,
  automaticWork,
} from "../support/api.ts";

const charge = { amount: 500, currency: "usd" };

describe("retries", () => {
  it("rejects schema-invalid arguments without touching the upstream", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, [{ id: "c1", name, arguments: { amount: -5, currency: "gbp" } }]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
      allowed_next_actions: ["fix_arguments", "tell_user"],
    });
    expect((await up.state()).requests).toHaveLength(0);
    const events = await trace(runId);
    expect(events.filter((e) => e.type === "attempt_started")).toHaveLength(0);
    expect(events.find((e) => e.type === "turn_received")?.calls[0]).toMatchObject({
      fixed: "rejected",
      code: "invalid_arguments",
    });
  });

  // A 5xx may come after the effect (DESIGN: "5xx: outcome_unknown" for a write without a key), so
  // while a keyed write is being resent the model is told the outcome is not yet known.
  it("503, 503, 200: three attempts, one key, one effect, policy delays", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    const { runId, name } = await setup(tool);
    await up.script({ kind: "status", status: 503 }, { kind: "status", status: 503 });

    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.status).toBe(202);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "upstream_error_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;
    expect((await operation(operationId)).body.phase).toBe("retry_scheduled");

    expect(await fireAlarm(operationId)).toBe(true); // attempt 2 → 503
    expect((await operation(operationId)).body.phase).toBe("retry_scheduled");
    expect(await fireAlarm(operationId)).toBe(true); // attempt 3 → 200

    const done = await api("GET", `/v1/runs/${runId}/turns/${first.body.turn_id}`);
    expect(done.status).toBe(200);
    expect(done.body.results[0]).toMatchObject({
      status: "succeeded",
      operation_id: operationId,
      result: { id: expect.any(String) },
    });

    const state = await up.state();
    expect(state.requests).toHaveLength(3);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
    expect(state.requests[0]!.key).toMatch(/^tg_/);
    expect(state.effects).toHaveLength(1);

    const events = await trace(runId);
    expect(events.filter((e) => e.type === "attempt_started").map((e) => e.attempt)).toEqual([
      1, 2, 3,
    ]);
    expect(
      new Set(events.filter((e) => e.type === "attempt_started").map((e) => e.idempotency_key))
        .size,
    ).toBe(1);
    const policy = {
      maxAttempts: 4,
      minDelayMs: 30_000,
      initialDelayMs: 60_000,
      maxDelayMs: 600_000,
      maxElapsedMs: 3_600_000,
    };
    const delays = events.filter((e) => e.type === "retry_scheduled").map((e) => e.delay_ms);
    expect(delays).toEqual([
      nextDelayMs(policy, operationId, 1, null),
      nextDelayMs(policy, operationId, 2, null),
    ]);
    expect(delays[0]).toBeGreaterThanOrEqual(30_000);
    expect(delays[0]).toBeLessThanOrEqual(60_000);
    expect(delays[1]).toBeLessThanOrEqual(120_000);
  });

  // Issue 34: a Retry-After also pauses the origin for the tenant (domain/quota/upstream.ts), so a
  // retry clamped to the policy's cap still waits for the pause, pending, under the same key. Its own
  // tenant: the pause is the tenant's, and every test here calls the same upstream origin.
  it("honours Retry-After on 429: the delay clamped to the policy's cap, the send held until the pause ends", async () => {
    const { key } = await newTenant(ALL_SCOPES);
    const auth = { Authorization: `Bearer ${key}` };
    const up = upstream();
    const tool = manifest({
      url: up.url,
      retry: {
        min_delay_ms: 0,
        initial_delay_ms: 10,
        max_delay_ms: 5_000,
        max_elapsed_ms: 600_000,
      },
    });
    await api("PUT", `/v1/tools/${tool.name}`, tool, auth);
    const run = await api(
      "POST",
      "/v1/runs",
      { user: { id: "u1", scopes: [] }, tools: [tool.name] },
      auth,
    );
    const runId = run.body.run_id as string;
    await up.script(
      { kind: "status", status: 429, retryAfter: "3" },
      { kind: "status", status: 429, retryAfter: "3600" },
    );
    const calls = [{ id: "c1", name: tool.name, arguments: charge }];
    const first = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      { calls },
      { ...auth, Prefer: "wait=0" },
    );
    const operationId = first.body.results[0].operation_id as string;
    const view = () => api("GET", `/v1/operations/${operationId}?wait=1`, undefined, auth);
    await view(); // returns once the retry is scheduled beyond the wait
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 3_001);
      expect(await fireAlarm(operationId)).toBe(true);
      await view();
      const events = (await api("GET", `/v1/runs/${runId}/trace`, undefined, auth)).body
        .events as any[];
      expect(events.filter((e) => e.type === "retry_scheduled").map((e) => e.delay_ms)).toEqual([
        3_000, 5_000,
      ]);
      // Past the clamped delay the pause still holds it: pending, a long pause, nothing sent.
      vi.setSystemTime(Date.now() + 5_001);
      expect(await fireAlarm(operationId)).toBe(true);
      expect((await view()).body.result).toMatchObject({
        status: "pending",
        code: "quota_exhausted",
      });
      expect((await up.state()).requests).toHaveLength(2);
      vi.setSystemTime(Date.now() + 3_600_000);
      expect(await fireAlarm(operationId)).toBe(true);
      await up.waitForEffects(1);
      expect((await view()).body.result.status).toBe("succeeded");
    } finally {
      vi.useRealTimers();
    }
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(new Set(state.requests.map((r) => r.key)).size).toBe(1);
  });

  it("exhausts attempts into budget_exhausted when every failure was definite (429: not processed)", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, max_attempts: 2 }));
    await up.script({ kind: "status", status: 429 }, { kind: "status", status: 429 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    const final = await operation(operationId);
    expect(final.body.result).toMatchObject({
      status: "budget_exhausted",
      code: "attempts_exhausted",
      message: expect.stringMatching(/did not take effect/),
    });
    expect(await automaticWork(operationId)).toBe(false);
    expect((await up.state()).requests).toHaveLength(2);
  });

  it("exhausts attempts after 503s on a keyed write into outcome_unknown: a 5xx may come after the effect", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url, max_attempts: 2 }));
    await up.script({ kind: "status", status: 503 }, { kind: "status", status: 503 });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true);
    const final = await operation(operationId);
    expect(final.body).toMatchObject({
      phase: "outcome_unknown",
      result: { status: "outcome_unknown", code: "upstream_error_unknown" },
      settling: { next_try_at: expect.any(String) },
    });
    expect(final.body.result.message).not.toMatch(/did not take effect/);
    // Settled late by itself (issue 24): a resend with the same key once the upstream is back.
    expect(await fireAlarm(operationId)).toBe(true);
    expect((await operation(operationId)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
    void runId;
  });

  it("stays outcome_unknown when the last attempt was ambiguous", async () => {
    const up = upstream();
    const { runId, name } = await setup(
      manifest({ url: up.url, max_attempts: 2, timeout_ms: 300 }),
    );
    await up.script({ kind: "status", status: 503 }, { kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(true); // attempt 2 commits, then times out
    const final = await operation(operationId);
    expect(final.body.phase).toBe("outcome_unknown");
    expect(final.body.result).toMatchObject({ status: "outcome_unknown", code: "timeout_unknown" });
    // Attempts spent: the late resend with the same key gets the stored result (issue 24).
    expect(await fireAlarm(operationId)).toBe(true);
    const state = await up.state();
    expect((await operation(operationId)).body.result).toMatchObject({
      status: "succeeded",
      result: { id: state.effects[0]!.id },
    });
    expect(state.effects).toHaveLength(1);
    void runId;
  });
});
