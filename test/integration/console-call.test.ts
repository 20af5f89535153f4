// The call, whole (issue 33), through the public HTTP API: the run page and the operation page show
// the frozen arguments, the request as sent (its secret by name) and the upstream's answer, what the
// model got and a replay marker, while neither the page HTML nor the trace JSON ever holds the
// secret or a redacted argument; the run page shows the run's jurisdiction and notify endpoint; the
// index search matches prefixes; shadow calls are counted apart from live ones.
import { describe, expect, it } from "vitest";
import { api, manifest, testTenant, turn, unique, until, upstream } from "../support/api.ts";
import { consolePage } from "../support/console-page.ts";

const SECRET_VALUE = "sk_live_console_call_4242424242";
const CARD = "tok_visa_secret_0001";

/** A charge tool with a secret header and a redacted argument; `trace` opts in to keeping the body. */
function chargeTool(url: string, secretName: string, extra: Record<string, unknown> = {}) {
  return manifest({
    url,
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
        customer_id: { type: "string" },
        card_token: { type: "string" },
      },
      required: ["amount", "currency", "customer_id", "card_token"],
    },
    request: {
      method: "POST",
      url: `${url}/charges`,
      headers: { Authorization: `Bearer {secret:${secretName}}` },
    },
    redact: ["/card_token"],
    trace: { arguments: true, result: true },
    ...extra,
  });
}

async function register(tool: Record<string, unknown>) {
  const put = await api("PUT", `/v1/tools/${tool.name as string}`, tool);
  expect(put.status, JSON.stringify(put.body)).toBeLessThan(300);
}

describe("the call, whole, on the console", () => {
  it("shows arguments, the request as sent with its secret masked, the answer, the result and a replay, and never the secret or a redacted value", async () => {
    const up = upstream();
    const secretName = unique("SHOP")
      .toUpperCase()
      .replace(/[^A-Z0-9_]/g, "_");
    expect((await api("PUT", `/v1/secrets/${secretName}`, { value: SECRET_VALUE })).status).toBe(
      201,
    );
    const tool = chargeTool(up.url, secretName);
    await register(tool);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
    });
    expect(run.status).toBe(201);
    const runId = run.body.run_id as string;
    const args = { amount: 731, currency: "usd", customer_id: "cus_whole", card_token: CARD };
    const first = await turn(runId, [{ id: "c1", name: tool.name as string, arguments: args }]);
    expect(first.body.results[0]).toMatchObject({ status: "succeeded" });
    const opId = first.body.results[0].operation_id as string;
    // The model proposes it again under a new call id: answered from the stored outcome.
    const again = await turn(runId, [{ id: "c2", name: tool.name as string, arguments: args }]);
    expect(again.body.results[0]).toMatchObject({ status: "succeeded", operation_id: opId });
    const state = await up.state();
    // One effect; the upstream really got the secret and the card (the masking is only in copies).
    expect(state.effects).toHaveLength(1);
    expect(state.requests[0]!.authorization).toBe(`Bearer ${SECRET_VALUE}`);
    expect(state.requests[0]!.body.card_token).toBe(CARD);

    // The trace keeps the request as sent and the answer, masked.
    const traced = await api("GET", `/v1/runs/${runId}/trace`);
    const traceText = JSON.stringify(traced.body);
    expect(traceText).not.toContain(SECRET_VALUE);
    expect(traceText).not.toContain(CARD);
    const finished = traced.body.events.find(
      (e: { type: string; operation_id?: string }) =>
        e.type === "attempt_finished" && e.operation_id === opId,
    );
    expect(finished.request).toMatchObject({
      method: "POST",
      url: `${up.url}/charges`,
      headers: { Authorization: `Bearer {secret:${secretName}}` },
    });
    expect(JSON.parse(finished.request.body)).toMatchObject({
      amount: 731,
      card_token: "[redacted]",
    });
    expect(finished.response).toMatchObject({ status: 200 });
    expect(finished.response.headers["content-type"]).toContain("application/json");

    const effectId = state.effects[0]!.id;
    for (const path of [`/console/runs/${runId}`, `/console/operations/${opId}`]) {
      const html = await consolePage(path);
      expect(html, path).not.toContain(SECRET_VALUE);
      expect(html, path).not.toContain(CARD);
      // The frozen arguments, redacted.
      expect(html, path).toMatch(/data-role="arguments">[^<]*&quot;amount&quot;: 731/);
      expect(html, path).toContain("&quot;card_token&quot;: &quot;[redacted]&quot;");
      // The request as sent, secret by name, and the upstream's answer.
      const sent = /data-role="sent-request">([^<]*)</.exec(html)?.[1] ?? "";
      expect(sent, path).toContain(`POST ${up.url}/charges`);
      expect(sent, path).toContain(`Authorization: Bearer {secret:${secretName}}`);
      expect(sent, path).toContain("Idempotency-Key: tg_");
      expect(html, path).toMatch(
        /data-role="upstream-answer">HTTP 200\ncontent-type: application\/json/,
      );
      // What the model got, and the replay by c2.
      expect(html, path).toMatch(new RegExp(`data-role="result">[^<]*${effectId}`));
      expect(html, path).toMatch(/data-role="replay">[^<]*call c2/);
    }
  });

  it("shows the run's and tenant's jurisdiction and the run's own notify endpoint", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    await register(tool);
    const run = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [tool.name],
      notify: { url: `${up.url}/webhooks/agent` },
    });
    expect(run.status).toBe(201);
    const runId = run.body.run_id as string;
    const endpoint = run.body.notify.webhook_id as string;
    expect((await api("GET", `/v1/runs/${runId}`)).body).toMatchObject({
      jurisdiction: null,
      notify_webhook_id: endpoint,
    });
    const html = await consolePage(`/console/runs/${runId}`);
    expect(html).toMatch(new RegExp(`data-role="notify"><span class="mono">${endpoint}</span>`));
    expect(html).toMatch(/data-role="jurisdiction">run none · tenant none/);

    // An EU tenant's run says eu.
    const eu = await api(
      "POST",
      "/v1/admin/tenants",
      { name: unique("eu"), jurisdiction: "eu" },
      { Authorization: "Bearer test-admin-token" },
    );
    expect(eu.status).toBe(201);
    const key = await api(
      "POST",
      `/v1/admin/tenants/${eu.body.tenant_id}/keys`,
      { name: "eu", scopes: ["runs:read", "traces:read", "runs:write", "tools:write"] },
      { Authorization: "Bearer test-admin-token" },
    );
    const auth = { Authorization: `Bearer ${key.body.key}` };
    const euTool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${euTool.name as string}`, euTool, auth)).status).toBe(201);
    const euRun = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [euTool.name] }, auth);
    expect(euRun.status, JSON.stringify(euRun.body)).toBe(201);
    expect(euRun.body.run_id).toMatch(/^run_eu_/);
    const euHtml = await consolePage(`/console/runs/${euRun.body.run_id}`, key.body.key);
    expect(euHtml).toMatch(/data-role="jurisdiction">run eu · tenant eu/);
  });

  it(
    "finds an operation by a prefix of its subject, run id and operation id, in the API and the console",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const secretName = unique("PFX")
        .toUpperCase()
        .replace(/[^A-Z0-9_]/g, "_");
      await api("PUT", `/v1/secrets/${secretName}`, { value: SECRET_VALUE });
      const tool = chargeTool(up.url, secretName);
      await register(tool);
      const run = await api("POST", "/v1/runs", {
        user: { id: "u1", scopes: [] },
        tools: [tool.name],
      });
      const runId = run.body.run_id as string;
      const customer = unique("cus_prefixdemo");
      const done = await turn(runId, [
        {
          id: "p1",
          name: tool.name as string,
          arguments: { amount: 5, currency: "usd", customer_id: customer, card_token: CARD },
        },
      ]);
      const opId = done.body.results[0].operation_id as string;
      const search = (q: string) =>
        until(
          () => api("GET", `/v1/operations?q=${encodeURIComponent(q)}`),
          (r) => r.body.operations?.some((i: { operation_id: string }) => i.operation_id === opId),
        );
      const prefix = customer.slice(0, "cus_prefixde".length);
      for (const q of [prefix, runId.slice(0, 12), opId.slice(0, 10)])
        expect(
          (await search(q)).body.operations.map((i: { operation_id: string }) => i.operation_id),
          q,
        ).toContain(opId);
      // A prefix of nothing finds nothing; runs are found by prefix too.
      expect((await api("GET", `/v1/operations?q=${customer}x`)).body.operations).toHaveLength(0);
      const runs = await api("GET", `/v1/runs?q=${encodeURIComponent(prefix)}`);
      expect(runs.body.runs.map((r: { run_id: string }) => r.run_id)).toContain(runId);
      const html = await consolePage(`/console?q=${encodeURIComponent(prefix)}`);
      expect(html).toContain(opId);
    },
  );

  it("counts a shadow run's calls apart from live ones in the overview and on the console home", async () => {
    const { key } = await testTenant();
    expect(key).toBeTruthy();
    const prod = upstream();
    const sandbox = upstream();
    const tool = manifest({ url: prod.url, sandbox: { base_url: sandbox.url } });
    await register(tool);
    const name = tool.name as string;
    const shadowRun = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [name],
      mode: "shadow",
    });
    expect(shadowRun.status, JSON.stringify(shadowRun.body)).toBe(201);
    const shadowed = await turn(shadowRun.body.run_id, [
      { id: "s1", name, arguments: { amount: 9, currency: "usd" } },
    ]);
    expect(shadowed.body.results[0]).toMatchObject({ status: "succeeded" });
    expect((await prod.state()).effects).toHaveLength(0);
    const overview = await until(
      () => api("GET", "/v1/overview"),
      (r) => r.body.shadow?.tools?.some((t: { tool: string }) => t.tool === name),
    );
    expect(overview.body.shadow.tools).toContainEqual(
      expect.objectContaining({ tool: name, calls: 1 }),
    );
    expect(overview.body.tools.map((t: { tool: string }) => t.tool)).not.toContain(name);
    const html = await consolePage("/console");
    expect(html).toMatch(new RegExp(`data-role="shadow-calls"[\\s\\S]*${name} 1`));
  });
});
