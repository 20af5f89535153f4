// POST /v1/tools/{name}/verify against the real demo upstream: a Stripe-like namespace passes every
// check; namespaces that break one promise each (demo/upstream.ts misbehaviours) fail with that
// check named and its evidence. Bad input is a typed problem with nothing sent upstream. The
// verdict is stored with the tool, bound to its settings, and flagged on runs and traces.
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  api,
  manifest,
  newTenant,
  pastFactsBound,
  setup,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";

afterEach(() => {
  vi.useRealTimers();
});

const SECRET = "sk_test_verify_0123456789";

async function keyedTool(url: string, overrides: Record<string, unknown> = {}) {
  await api("PUT", "/v1/secrets/VERIFY_KEY", { value: SECRET });
  const tool = manifest({
    url,
    request: {
      method: "POST",
      url: `${url}/charges`,
      headers: { Authorization: "Bearer {secret:VERIFY_KEY}" },
    },
    reconcile: {
      method: "GET",
      url: `${url}/effects?idempotency_key={idempotency_key}`,
      headers: { Authorization: "Bearer {secret:VERIFY_KEY}" },
    },
    ...overrides,
  });
  const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
  expect(put.status).toBe(201);
  expect(put.body.verification).toEqual({
    status: "unverified",
    counts_for_runs: false,
    summary: "not verified: runs treat it as unverified",
    checked_at: null,
    settings_hash: null,
    base_url: null,
    checks: [],
  });
  return tool;
}

const verify = (name: string, body: unknown) => api("POST", `/v1/tools/${name}/verify`, body);
const ARGS = { arguments: { amount: 500, currency: "usd" } };
const checkNamed = (verification: any, name: string) =>
  verification.checks.find((c: any) => c.name === name);
const statuses = (verification: any) =>
  Object.fromEntries(verification.checks.map((c: any) => [c.name, c.status]));

describe("verify against a Stripe-like upstream", () => {
  it("passes every check, stores the verdict with the tool, and never shows the secret", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url);
    const res = await verify(tool.name, ARGS);
    expect(res.status).toBe(200);
    const v = res.body.verification;
    expect(v.status).toBe("verified");
    expect(statuses(v)).toEqual({
      first_send: "passed",
      same_key_replay: "passed",
      changed_body_refused: "passed",
      concurrent_duplicate: "passed",
      lookup_finds_effect: "passed",
      lookup_unknown_key: "passed",
    });
    // Evidence: what was sent and what came back, with the credential scrubbed.
    const first = checkNamed(v, "first_send").exchanges[0];
    expect(first.sent).toMatchObject({
      method: "POST",
      url: `${up.url}/charges`,
      body: { amount: 500, currency: "usd" },
    });
    expect(first.sent.headers.Authorization).toBe("Bearer [redacted]");
    expect(first.sent.headers["Idempotency-Key"]).toMatch(/^tgv_/);
    expect(first.received).toMatchObject({ kind: "response", status: 200, valid_output: true });
    const replay = checkNamed(v, "same_key_replay").exchanges[0];
    expect(replay.idempotency_key).toBe(first.idempotency_key);
    expect(replay.received.body).toEqual(first.received.body);
    const changed = checkNamed(v, "changed_body_refused");
    expect(changed.observed).toBe("amount changed: refused, HTTP 422");
    expect(changed.exchanges[0].sent.body).toEqual({ amount: 501, currency: "usd" });
    expect(JSON.stringify(res.body)).not.toContain(SECRET);

    // Upstream's own ledger: one effect for K, one for K2 (the concurrent pair), no others.
    const state = await up.state();
    expect(state.effects).toHaveLength(2);
    expect(state.requests.filter((r) => r.method === "POST")).toHaveLength(5);
    expect(state.requests.every((r) => r.authorization === `Bearer ${SECRET}`)).toBe(true);

    const got = await api("GET", `/v1/tools/${tool.name}`);
    expect(got.body.verification).toEqual(v);
    expect(JSON.stringify(got.body)).not.toContain(SECRET);
    const listed = (await api("GET", "/v1/tools")).body.tools.find(
      (t: any) => t.name === tool.name,
    );
    expect(listed.verification.status).toBe("verified");
    expect(listed.verification.checks.map((c: any) => c.exchanges)).toEqual(v.checks.map(() => []));
  });

  it("keeps the verdict on an identical re-PUT or a new description, resets it when the request or idempotency settings change", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url);
    expect((await verify(tool.name, ARGS)).body.verification.status).toBe("verified");
    const same = await api("PUT", `/v1/tools/${tool.name}`, tool);
    expect(same.body.verification.status).toBe("verified");
    const reworded = await api("PUT", `/v1/tools/${tool.name}`, {
      ...tool,
      description: "Charge the card (reworded).",
    });
    expect(reworded.body.verification.status).toBe("verified");
    const renamedHeader = await api("PUT", `/v1/tools/${tool.name}`, {
      ...tool,
      idempotency: { mode: "header", header: "X-Request-Key" },
    });
    expect(renamedHeader.body.verification.status).toBe("unverified");
    // Back to the verified settings: the old verdict was dropped, not resurrected.
    await api("PUT", `/v1/tools/${tool.name}`, tool);
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.verification.status).toBe(
      "unverified",
    );
  });

  it("a verify that finishes after a re-PUT does not vouch for the new version", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url);
    await up.script({ kind: "slow", delayMs: 400 });
    const pending = verify(tool.name, ARGS);
    await up.waitForRequests(1);
    const changed = await api("PUT", `/v1/tools/${tool.name}`, {
      ...tool,
      request: { ...(tool.request as object), url: `${up.url}/charges/v2` },
    });
    expect(changed.status).toBe(200);
    const res = await pending;
    expect(res.status).toBe(409);
    expect(res.body.code).toBe("tool_changed");
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.verification.status).toBe(
      "unverified",
    );
  });

  it("fills bound arguments from `context`, and verifies against a sandbox base_url", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url, {
      input_schema: {
        type: "object",
        properties: {
          amount: { type: "integer", exclusiveMinimum: 0 },
          customer_id: { type: "string" },
        },
        required: ["amount", "customer_id"],
      },
      bind: { customer_id: "context.customer_id" },
    });
    // Another origin (loopback by name) in front of the same upstream: the path is kept.
    const base = new URL(up.url.replace("127.0.0.1", "localhost")).origin;
    const res = await verify(tool.name, {
      arguments: { amount: 700 },
      context: { customer_id: "cus_v" },
      base_url: base,
    });
    expect(res.status).toBe(200);
    expect(res.body.verification.status).toBe("verified_sandbox_only");
    expect(res.body.verification.base_url).toBe(base);
    const first = checkNamed(res.body.verification, "first_send").exchanges[0];
    expect(first.sent.url).toBe(`${up.url.replace("127.0.0.1", "localhost")}/charges`);
    expect(first.sent.body).toEqual({ amount: 700, customer_id: "cus_v" });
    expect((await up.state()).requests.map((r) => r.path)).toContain("/charges");
  });
});

describe("upstreams that break one promise each → failed, the check named, the evidence shown", () => {
  it("ignores the key: the replay is a second effect", async () => {
    const up = upstream();
    await up.misbehave("ignores_key");
    const tool = await keyedTool(up.url);
    const v = (await verify(tool.name, ARGS)).body.verification;
    expect(v.status).toBe("failed");
    const replay = checkNamed(v, "same_key_replay");
    expect(replay.status).toBe("failed");
    const firstId = checkNamed(v, "first_send").exchanges[0].received.body.id;
    const replayId = replay.exchanges[0].received.body.id;
    expect(replayId).not.toBe(firstId);
    expect(replay.observed).toContain(`id ${replayId}`);
    expect(replay.observed).toContain("second effect");
    expect((await up.state()).effectsByKey[replay.exchanges[0].idempotency_key]).toBe(3);
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.verification.status).toBe("failed");
  });

  it("accepts a changed body under the same key", async () => {
    const up = upstream();
    await up.misbehave("accepts_changed_body");
    const tool = await keyedTool(up.url);
    const v = (await verify(tool.name, ARGS)).body.verification;
    expect(v.status).toBe("failed");
    expect(statuses(v)).toMatchObject({
      same_key_replay: "passed",
      changed_body_refused: "failed",
      concurrent_duplicate: "passed",
    });
    const changed = checkNamed(v, "changed_body_refused");
    expect(changed.observed).toMatch(/^amount changed: accepted, HTTP 200 \(id eff_\d+\)/);
    expect(changed.exchanges[0].received.body).toMatchObject({ amount: 501 });
  });

  it("answers a concurrent duplicate with a second effect", async () => {
    const up = upstream();
    await up.misbehave("races_concurrent_duplicates");
    // A lone write waits up to 1 s for a duplicate to race with: more than the helper's timeout.
    const tool = await keyedTool(up.url, { timeout_ms: 5000 });
    const v = (await verify(tool.name, ARGS)).body.verification;
    expect(v.status).toBe("failed");
    expect(statuses(v)).toMatchObject({
      same_key_replay: "passed",
      changed_body_refused: "passed",
      concurrent_duplicate: "failed",
    });
    const concurrent = checkNamed(v, "concurrent_duplicate");
    expect(concurrent.observed).toContain("two effects for one key");
    const [a, b] = concurrent.exchanges;
    expect(a.idempotency_key).toBe(b.idempotency_key);
    expect(a.received.body.id).not.toBe(b.received.body.id);
    expect((await up.state()).effectsByKey[a.idempotency_key]).toBe(2);
  });

  it("has a status lookup that never finds anything", async () => {
    const up = upstream();
    await up.misbehave("lookup_never_finds");
    const tool = await keyedTool(up.url);
    const v = (await verify(tool.name, ARGS)).body.verification;
    expect(v.status).toBe("failed");
    expect(statuses(v)).toMatchObject({
      same_key_replay: "passed",
      lookup_finds_effect: "failed",
      lookup_unknown_key: "passed",
    });
    const found = checkNamed(v, "lookup_finds_effect");
    expect(found.observed).toContain("HTTP 404");
    expect(found.exchanges[0].sent.url).toBe(
      `${up.url}/effects?idempotency_key=${found.exchanges[0].idempotency_key}`,
    );
  });

  it("a first send that fails sends nothing more and proves nothing", async () => {
    const up = upstream();
    await up.script({ kind: "status", status: 500 });
    const tool = await keyedTool(up.url);
    const v = (await verify(tool.name, ARGS)).body.verification;
    expect(v.status).toBe("failed");
    expect(statuses(v)).toEqual({
      first_send: "failed",
      same_key_replay: "skipped",
      changed_body_refused: "skipped",
      concurrent_duplicate: "skipped",
      lookup_finds_effect: "skipped",
      lookup_unknown_key: "skipped",
    });
    expect((await up.state()).requests).toHaveLength(1);
  });
});

describe("bad input: a typed problem, nothing sent", () => {
  it.each([
    [
      "arguments failing the schema",
      { arguments: { amount: -1, currency: "usd" } },
      422,
      "invalid_arguments",
    ],
    [
      "an undeclared argument",
      { arguments: { ...ARGS.arguments, note: "x" } },
      422,
      "invalid_arguments",
    ],
    [
      "base_url off the allow-list",
      { ...ARGS, base_url: "https://evil.example.net" },
      403,
      "upstream_not_allowed",
    ],
    [
      "base_url with a path",
      { ...ARGS, base_url: "https://api.example.test/v2" },
      400,
      "invalid_request",
    ],
    ["an unknown body field", { ...ARGS, dry_run: true }, 400, "invalid_request"],
  ])("%s", async (_what, body, status, code) => {
    const up = upstream();
    const tool = await keyedTool(up.url);
    const res = await verify(tool.name, body);
    expect(res.status).toBe(status);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(res.body.code).toBe(code);
    expect((await up.state()).requests).toHaveLength(0);
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.verification.status).toBe(
      "unverified",
    );
  });

  it("an unknown tool is 404; a tool without an idempotency header is not verifiable", async () => {
    const unknown = await verify(unique("nope"), ARGS);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    const up = upstream();
    const plain = manifest({ url: up.url, idempotency: { mode: "none" } });
    await api("PUT", `/v1/tools/${plain.name}`, plain);
    const res = await verify(plain.name, ARGS);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe("not_verifiable");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a missing bound argument's context is invalid_arguments", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url, {
      input_schema: {
        type: "object",
        properties: { amount: { type: "integer" }, customer_id: { type: "string" } },
        required: ["amount", "customer_id"],
      },
      bind: { customer_id: "context.customer_id" },
    });
    const res = await verify(tool.name, { arguments: { amount: 5 } });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe("invalid_arguments");
    expect(res.body.detail).toContain("context.customer_id");
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("verify does not bypass approvals", () => {
  it("a tools:write key cannot send an approval-requiring tool's writes to its own origin; a sandbox, or a key that may approve, can", async () => {
    const up = upstream();
    const writer = await newTenant(["tools:write", "secrets:write"]);
    const approver = await newTenant(["tools:write", "approvals:decide"]);
    const as = (key: string) => ({ Authorization: `Bearer ${key}` });
    const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
    for (const t of [writer, approver])
      expect((await api("PUT", `/v1/tools/${tool.name}`, tool, as(t.key))).status).toBe(201);

    const refused = await api("POST", `/v1/tools/${tool.name}/verify`, ARGS, as(writer.key));
    expect(refused.status).toBe(403);
    expect(refused.headers.get("Content-Type")).toBe("application/problem+json");
    expect(refused.body.code).toBe("forbidden");
    expect(refused.body.detail).toContain("approvals:decide");
    // Naming the tool's own origin as base_url is still production.
    const own = await api(
      "POST",
      `/v1/tools/${tool.name}/verify`,
      { ...ARGS, base_url: new URL(up.url).origin },
      as(writer.key),
    );
    expect(own.body.code).toBe("forbidden");
    expect((await up.state()).requests).toHaveLength(0);

    const sandbox = new URL(up.url.replace("127.0.0.1", "localhost")).origin;
    const inSandbox = await api(
      "POST",
      `/v1/tools/${tool.name}/verify`,
      { ...ARGS, base_url: sandbox },
      as(writer.key),
    );
    expect(inSandbox.body.verification).toMatchObject({
      status: "verified_sandbox_only",
      base_url: sandbox,
    });
    const byApprover = await api("POST", `/v1/tools/${tool.name}/verify`, ARGS, as(approver.key));
    expect(byApprover.body.verification).toMatchObject({ status: "verified", base_url: null });
  });
});

describe("unverified tools are flagged (the policy is off in this project)", () => {
  it("the run's tool export and the operation's trace say so; a verified tool is not flagged", async () => {
    const up = upstream();
    const tool = await keyedTool(up.url);
    const { runId } = await setup(tool);
    const tools = await api("GET", `/v1/runs/${runId}/tools?format=anthropic`);
    expect(tools.body.warnings).toEqual([
      {
        tool: tool.name,
        code: "idempotency_unverified",
        status: "unverified",
        enforced: false,
        detail: expect.stringContaining("unverified"),
      },
    ]);
    // The provider-format definitions themselves stay exactly what the provider accepts.
    expect(tools.body.tools.map((t: any) => t.name)).toEqual([tool.name, "toolgate_check_status"]);
    expect(JSON.stringify(tools.body.tools)).not.toMatch(/verif|warning/);
    const res = await turn(runId, [{ id: "c1", name: tool.name, arguments: ARGS.arguments }]);
    expect(res.body.results[0].status).toBe("succeeded");
    const flagged = (await trace(runId)).find((e) => e.type === "idempotency_unverified");
    expect(flagged).toMatchObject({ status: "unverified", enforced: false });

    expect((await verify(tool.name, ARGS)).body.verification.status).toBe("verified");
    // The run's tenant facts hold the old verdict until their bound (issue 19).
    pastFactsBound();
    const after = await api("GET", `/v1/runs/${runId}/tools`);
    expect(after.body.warnings).toEqual([]);
    const second = await turn(runId, [
      { id: "c2", name: tool.name, arguments: { amount: 42, currency: "eur" } },
    ]);
    const op = second.body.results[0].operation_id;
    const events = (await trace(runId)).filter((e) => e.operation_id === op);
    expect(events.map((e) => e.type)).toContain("recorded");
    expect(events.map((e) => e.type)).not.toContain("idempotency_unverified");
  });
});
