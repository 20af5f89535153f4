// TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY on (this project's binding, vitest.config.ts): a header
// tool that is not verified runs as mode "none" — a timed-out write ends outcome_unknown with no
// resend, exactly one request upstream — and the trace and the export say why. A verified tool
// keeps its promise: the same fault is resent with the same key and settles with one effect.
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  upstream,
  pastFactsBound,
} from "../support/api.ts";

afterEach(() => {
  vi.useRealTimers();
});

const charge = { amount: 500, currency: "usd" };

describe("policy on: only a verified key is relied on", () => {
  it("an unverified tool's timed-out write ends outcome_unknown, never resent", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, timeout_ms: 300 });
    const { runId, name } = await setup(tool);
    const exported = await api("GET", `/v1/runs/${runId}/tools`);
    expect(exported.body.warnings).toEqual([
      expect.objectContaining({ tool: name, status: "unverified", enforced: true }),
    ]);

    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;
    const view = await operation(operationId);
    expect(view.body).toMatchObject({ phase: "outcome_unknown", repeat_safety: "neither" });
    expect(await fireAlarm(operationId)).toBe(false); // nothing automatic: a person resolves it
    const resend = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "try again",
    });
    expect(resend.status).toBe(409);
    expect(resend.body.code).toBe("resend_not_allowed");

    const state = await up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
    const why = (await trace(runId)).find((e) => e.type === "idempotency_unverified");
    expect(why).toMatchObject({ status: "unverified", enforced: true });
    expect(why!.detail).toContain("TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY");
  });

  it("a verified tool is resent with the same key after the same timeout: one effect", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, timeout_ms: 300 });
    const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
    expect(put.status).toBe(201);
    const verified = await api("POST", `/v1/tools/${tool.name}/verify`, { arguments: charge });
    expect(verified.body.verification.status).toBe("verified");
    const { runId, name } = await setup(tool);
    expect((await api("GET", `/v1/runs/${runId}/tools`)).body.warnings).toEqual([]);
    const before = (await up.state()).requests.length;

    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect((await operation(operationId)).body.repeat_safety).toBe("keyed");
    expect(await fireAlarm(operationId)).toBe(true); // the resend, same key: the stored answer
    const final = await operation(operationId);
    expect(final.body).toMatchObject({ phase: "recorded", result: { status: "succeeded" } });
    const state = await up.state();
    const sent = state.requests.slice(before);
    expect(sent).toHaveLength(2);
    expect(sent[0]!.key).toBe(sent[1]!.key);
    expect(state.effectsByKey[sent[0]!.key!]).toBe(1);
    expect((await trace(runId)).map((e) => e.type)).not.toContain("idempotency_unverified");
  });

  it('mode "natural" (which verify cannot check) is not trusted: a timed-out write is not resent', async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      timeout_ms: 300,
      request: { method: "PUT", url: `${up.url}/charges` },
      idempotency: { mode: "natural" },
    });
    const { runId, name } = await setup(tool);
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    expect(first.body.results[0]).toMatchObject({
      status: "outcome_unknown",
      code: "timeout_unknown",
    });
    const operationId = first.body.results[0].operation_id as string;
    // Fired anyway: whatever it does, the upstream must not see the write again.
    const automatic = await fireAlarm(operationId);
    expect((await up.state()).requests).toHaveLength(1);
    expect(automatic).toBe(false); // no automatic resend
    expect((await operation(operationId)).body).toMatchObject({
      phase: "outcome_unknown",
      repeat_safety: "neither",
    });
    const resend = await api("POST", `/v1/operations/${operationId}/resolve`, {
      outcome: "resend",
      reason: "try again",
    });
    expect(resend.body.code).toBe("resend_not_allowed");
    const state = await up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
    expect((await trace(runId)).find((e) => e.type === "idempotency_unverified")).toMatchObject({
      status: "unverified",
      enforced: true,
    });
    expect((await api("GET", `/v1/runs/${runId}/tools`)).body.warnings).toEqual([
      expect.objectContaining({ tool: name, status: "unverified", enforced: true }),
    ]);
  });

  it("a verdict from a sandbox base_url is shown but does not count; one from the tool's own origin does", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url, timeout_ms: 300 });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    // Another origin (loopback by name) in front of the same well-behaved upstream.
    const sandbox = new URL(up.url.replace("127.0.0.1", "localhost")).origin;
    const checked = await api("POST", `/v1/tools/${tool.name}/verify`, {
      arguments: charge,
      base_url: sandbox,
    });
    const sandboxOnly = {
      status: "verified_sandbox_only",
      counts_for_runs: false,
      base_url: sandbox,
    };
    expect(checked.body.verification).toMatchObject(sandboxOnly);
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.verification).toMatchObject(
      sandboxOnly,
    );
    const { runId, name } = await setup(tool);
    expect((await api("GET", `/v1/runs/${runId}/tools`)).body.warnings).toEqual([
      expect.objectContaining({ tool: name, status: "verified_sandbox_only", enforced: true }),
    ]);
    const before = (await up.state()).requests.length;
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(first.body.results[0].status).toBe("outcome_unknown");
    expect(await fireAlarm(operationId)).toBe(false);
    expect((await up.state()).requests.length - before).toBe(1);

    // base_url naming the tool's own origin is a check of production: it counts.
    const own = await api("POST", `/v1/tools/${tool.name}/verify`, {
      arguments: { amount: 501, currency: "usd" },
      base_url: new URL(up.url).origin,
    });
    expect(own.body.verification).toMatchObject({
      status: "verified",
      counts_for_runs: true,
      base_url: null,
    });
    // The run's tenant facts hold the old verdict until their bound (issue 19).
    pastFactsBound();
    expect((await api("GET", `/v1/runs/${runId}/tools`)).body.warnings).toEqual([]);
  });

  it("a failed verdict is not trusted either", async () => {
    const up = upstream();
    await up.misbehave("ignores_key");
    const tool = manifest({ url: up.url, timeout_ms: 300 });
    await api("PUT", `/v1/tools/${tool.name}`, tool);
    const verdict = await api("POST", `/v1/tools/${tool.name}/verify`, { arguments: charge });
    expect(verdict.body.verification.status).toBe("failed");
    const { runId, name } = await setup(tool);
    const before = (await up.state()).requests.length;
    await up.script({ kind: "commit_then_hang" });
    const first = await turn(runId, [{ id: "c1", name, arguments: charge }]);
    const operationId = first.body.results[0].operation_id as string;
    expect(await fireAlarm(operationId)).toBe(false);
    expect((await up.state()).requests.length - before).toBe(1);
    expect((await trace(runId)).find((e) => e.type === "idempotency_unverified")).toMatchObject({
      status: "failed",
      enforced: true,
    });
  });
});
