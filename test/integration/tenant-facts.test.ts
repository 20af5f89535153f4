// Issue 19: nothing per tenant on a turn's path. A run holds its tenant's facts (sealed secrets,
// verdicts) as one snapshot read with its tools, so a new write asks no TenantObject; rotation,
// deletion and a changed verdict still reach it within the bound (FACTS_MAX_AGE_MS, scripted clock
// here), and at once after the upstream refuses the credentials (401/403).
import { afterEach, describe, expect, it, vi } from "vitest";
import { rpcCounts } from "../../src/durable/rpc-model.ts";
import {
  api,
  manifest,
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

const secretName = () =>
  unique("PAY")
    .toUpperCase()
    .replace(/[^A-Z0-9_]/g, "_");
const putSecret = async (name: string, value: string) => {
  const put = await api("PUT", `/v1/secrets/${name}`, { value });
  expect([200, 201]).toContain(put.status);
};
/** A keyed write whose Authorization header carries the tenant secret `secret`. */
const secretTool = (url: string, secret: string) =>
  manifest({
    url,
    request: {
      method: "POST",
      url: `${url}/charges`,
      headers: { Authorization: `Bearer {secret:${secret}}` },
    },
  });
const call = (id: string, name: string, amount: number) => ({
  id,
  name,
  arguments: { amount, currency: "usd" },
});
/** A turn as an agent posts it: with the run's own token (no API key, so no key check at the tenant). */
const agentTurn = (run: { runId: string; runToken: string }, calls: unknown[]) =>
  api(
    "POST",
    `/v1/runs/${run.runId}/turns?format=native`,
    { calls },
    { Authorization: `Bearer ${run.runToken}`, Prefer: "wait=5" },
  );
/** Another run offering an already registered tool (setup would register it again). */
const runOf = async (tool: string) => {
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: [tool] });
  expect(run.status).toBe(201);
  return run.body.run_id as string;
};
const sentAuthorizations = async (up: ReturnType<typeof upstream>) =>
  (await up.state()).requests.map((r) => r.authorization);
/** The queue consumer's deliveries of the tenant plane's events: off every call's path (issue 18). */
const EVENT_PLANE = new Set([
  "receiveEvents",
  "webhookTargets",
  "deliveryTargets",
  "recordDeliveries",
]);
const pathRpcs = () =>
  Object.fromEntries(
    Object.entries(rpcCounts("TenantObject")).filter(([method]) => !EVENT_PLANE.has(method)),
  );

describe("tenant facts: no TenantObject RPC on a turn's path", () => {
  it("20 new writes of a warm run make no TenantObject RPC, and each sends the tenant secret", async () => {
    const up = upstream();
    const secret = secretName();
    const value = `sk_${unique("v")}`;
    await putSecret(secret, value);
    const tool = secretTool(up.url, secret);
    const run = await setup(tool);
    const name = run.name;
    // Warm: the run's first turn (the snapshot came with the run's creation).
    expect((await agentTurn(run, [call("warm", name, 1)])).body.results[0].status).toBe(
      "succeeded",
    );

    const before = pathRpcs();
    for (let i = 0; i < 20; i++) {
      const res = await agentTurn(run, [call(`w${i}`, name, 10 + i)]);
      expect(res.body.results[0].status).toBe("succeeded");
    }
    expect(pathRpcs()).toEqual(before);
    const sent = await sentAuthorizations(up);
    expect(sent).toHaveLength(21);
    expect(new Set(sent)).toEqual(new Set([`Bearer ${value}`]));
  }, 30_000);

  it("5 writes under a resource lock of a warm run make no TenantObject RPC either", async () => {
    const up = upstream();
    const secret = secretName();
    const value = `sk_${unique("v")}`;
    await putSecret(secret, value);
    const tool = { ...secretTool(up.url, secret), resource: "account:{currency}" };
    const run = await setup(tool);
    await agentTurn(run, [call("warm", run.name, 1)]);
    const before = pathRpcs();
    for (let i = 0; i < 5; i++) {
      const res = await agentTurn(run, [call(`l${i}`, run.name, 10 + i)]);
      expect(res.body.results[0].status).toBe("succeeded");
    }
    expect(pathRpcs()).toEqual(before);
    expect(new Set(await sentAuthorizations(up))).toEqual(new Set([`Bearer ${value}`]));
  });

  it("a stale snapshot is never used: past the bound the call asks the tenant itself and a refresh follows", async () => {
    const up = upstream();
    const secret = secretName();
    await putSecret(secret, `sk_${unique("one")}`);
    const run = await setup(secretTool(up.url, secret));
    pastFactsBound();
    const before = rpcCounts("TenantObject");
    await agentTurn(run, [call("c1", run.name, 1)]);
    const after = rpcCounts("TenantObject");
    // The operation read the secret itself (secretsFor); the run refreshed its snapshot (facts).
    expect((after.secretsFor ?? 0) - (before.secretsFor ?? 0)).toBe(1);
    expect((after.facts ?? 0) - (before.facts ?? 0)).toBe(1);
  });
});

describe("tenant facts: rotation and revocation stay honest", () => {
  it("a rotated secret: new runs send it at once, an existing run once its snapshot is past the bound, never the old value after that", async () => {
    const up = upstream();
    const secret = secretName();
    const [oldValue, newValue] = [`sk_${unique("old")}`, `sk_${unique("new")}`];
    await putSecret(secret, oldValue);
    const tool = secretTool(up.url, secret);
    const existing = await setup(tool);
    await turn(existing.runId, [call("c1", tool.name, 1)]);
    await putSecret(secret, newValue);

    const fresh = await setup(tool);
    await turn(fresh.runId, [call("n1", tool.name, 2)]);
    expect((await sentAuthorizations(up)).slice(1)).toEqual([`Bearer ${newValue}`]);

    pastFactsBound();
    for (let i = 0; i < 3; i++) await turn(existing.runId, [call(`c${i + 2}`, tool.name, 3 + i)]);
    expect((await sentAuthorizations(up)).slice(2)).toEqual(Array(3).fill(`Bearer ${newValue}`));
  });

  it("after an upstream 401 the run re-reads the tenant once: the next call sends the rotated value, within the bound", async () => {
    const up = upstream();
    const secret = secretName();
    const [oldValue, newValue] = [`sk_${unique("old")}`, `sk_${unique("new")}`];
    await putSecret(secret, oldValue);
    const { runId, name } = await setup(secretTool(up.url, secret));
    await turn(runId, [call("c1", name, 1)]);
    await putSecret(secret, newValue);
    // The upstream has revoked the old key: its next request is refused.
    await up.script({ kind: "status", status: 401 });
    const refused = await turn(runId, [call("c2", name, 2)]);
    expect(refused.body.results[0]).toMatchObject({ status: "failed", code: "upstream_forbidden" });

    // Same clock (well inside the bound): the refusal alone made the run stop using its copy.
    for (let i = 0; i < 3; i++) await turn(runId, [call(`c${i + 3}`, name, 3 + i)]);
    const sent = await sentAuthorizations(up);
    expect(sent).toHaveLength(5);
    expect(sent.slice(2)).toEqual(Array(3).fill(`Bearer ${newValue}`));
  });

  it("a deleted secret: a new run's call fails typed at once and an existing run's past the bound; nothing is sent", async () => {
    const up = upstream();
    const secret = secretName();
    await putSecret(secret, `sk_${unique("v")}`);
    const tool = secretTool(up.url, secret);
    const existing = await setup(tool);
    expect((await api("DELETE", `/v1/secrets/${secret}`)).status).toBe(204);

    const fresh = await runOf(tool.name);
    const now = await turn(fresh, [call("n1", tool.name, 1)]);
    expect(now.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(now.body.results[0].message).toContain(secret);

    pastFactsBound();
    const later = await turn(existing.runId, [call("c1", tool.name, 2)]);
    expect(later.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(later.body.results[0].message).toContain(secret);
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a verdict that no longer holds (the tool's settings re-PUT) is honoured by an existing run past the bound", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    const { runId, name } = await setup(tool);
    const args = { arguments: { amount: 5, currency: "usd" } };
    expect((await api("POST", `/v1/tools/${name}/verify`, args)).body.verification.status).toBe(
      "verified",
    );
    // A verdict recorded after the run was created reaches it past the bound too.
    pastFactsBound();
    const verified = await turn(runId, [call("c1", name, 1)]);
    const flagged = async (operationId: string) =>
      (await trace(runId)).some(
        (e) => e.operation_id === operationId && e.type === "idempotency_unverified",
      );
    expect(await flagged(verified.body.results[0].operation_id)).toBe(false);

    // Other idempotency settings: the stored verdict no longer vouches for the run's version.
    const put = await api("PUT", `/v1/tools/${name}`, {
      ...tool,
      idempotency: { mode: "header", header: "X-Request-Key" },
    });
    expect(put.status).toBe(200);
    pastFactsBound();
    const unverified = await turn(runId, [call("c2", name, 2)]);
    expect(await flagged(unverified.body.results[0].operation_id)).toBe(true);
    const warnings = (await api("GET", `/v1/runs/${runId}/tools`)).body.warnings;
    expect(warnings).toMatchObject([{ tool: name, status: "unverified" }]);
  });
});
