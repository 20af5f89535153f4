// Issue 18 item 6: an agent that does not wait names one of its tenant's webhook endpoints at run
// creation (`notify.webhook_id`) and gets that run's turn.settled there, signed, even when the
// endpoint's events filter does not include turn.settled; other runs' turns are not sent there.
// notify.url (the URL form): an endpoint for that run only, made with the webhook URL rules, whose
// secret is in the creating answer only; it is not listed, not replaceable, not nameable by another
// run, and the tenant's alarm deletes it with the run's retention.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { ALL_SCOPES, api, manifest, newTenant, turn, upstream } from "../support/api.ts";

type Payload = { type: string; data: { run_id: string | null } };

async function hook(id: string, url: string, events: string[]): Promise<string> {
  const put = await api("PUT", `/v1/webhooks/${id}`, { url, events, format: "standard" });
  expect(put.status).toBe(201);
  return put.body.secret as string;
}

describe("a run's notify webhook", () => {
  it(
    "gets the run's turn.settled, signed, though its filter names only another type; another run's turns are not sent there",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
      const secret = await hook(id, `${up.url}/webhooks/n`, ["approval.expired"]);
      const tool = manifest({ url: `${up.url}/charges` });
      expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBeLessThan(300);
      const other = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] });
      expect(other.status).toBe(201);
      const mine = await api("POST", "/v1/runs", {
        user: { id: "u1" },
        tools: [tool.name],
        notify: { webhook_id: id },
      });
      expect(mine.status).toBe(201);
      const call = (runId: string) =>
        turn(runId, [
          { id: "c1", name: tool.name as string, arguments: { amount: 1, currency: "usd" } },
        ]);
      // The other run's turn settles first: had it gone to this endpoint, it would arrive first.
      expect((await call(other.body.run_id)).body.results[0].status).toBe("succeeded");
      expect((await call(mine.body.run_id)).body.results[0].status).toBe("succeeded");

      let got: Payload[] = [];
      for (let i = 0; i < 400 && got.length === 0; i++) {
        got = (await up.state()).requests
          .filter((request) => request.path === "/webhooks/n")
          .map(
            (request) =>
              new Webhook(secret).verify(
                request.raw!,
                request.headers as Record<string, string>,
              ) as Payload,
          );
        if (got.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(got.length).toBeGreaterThan(0);
      for (const payload of got) {
        expect(payload.type).toBe("turn.settled");
        expect(payload.data.run_id).toBe(mine.body.run_id);
      }
    },
  );

  it("an unknown webhook id is refused at POST /v1/runs, and no run is created", async () => {
    const up = upstream();
    const tool = manifest({ url: `${up.url}/charges` });
    expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBeLessThan(300);
    const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
    const body = {
      user: { id: "u1" },
      tools: [tool.name],
      notify: { webhook_id: id },
      request_id: crypto.randomUUID(),
    };
    const refused = await api("POST", "/v1/runs", body);
    expect(refused.status).toBe(404);
    expect(refused.body.code).toBe("not_found");
    // Nothing was created under that request_id: once the endpoint exists, the same request
    // creates the run (201), not a replay of an earlier one (200).
    await hook(id, `${up.url}/webhooks/x`, ["turn.settled"]);
    expect((await api("POST", "/v1/runs", body)).status).toBe(201);
    const bad = await api("POST", "/v1/runs", { ...body, notify: { webhook_id: id, url: "x" } });
    expect(bad.status).toBe(400);
  });
});

const tenantObject = (tenantId: string) =>
  (env as any).TENANTS.get((env as any).TENANTS.idFromName(tenantId)) as DurableObjectStub;

/** Rows of the tenant's webhook tables (0 when a table was never created). */
const stored = (tenantId: string) =>
  runInDurableObject(tenantObject(tenantId), (_: unknown, state: DurableObjectState) => {
    const count = (table: string) =>
      state.storage.sql
        .exec<{ n: number }>("SELECT COUNT(*) AS n FROM sqlite_master WHERE name = ?", table)
        .one().n === 0
        ? 0
        : state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n;
    return { webhooks: count("webhooks"), runEndpoints: count("run_endpoints") };
  });

/** A tenant of its own (its tables start empty) and a tool registered in it. */
async function notifyTenant() {
  const t = await newTenant(ALL_SCOPES);
  const auth = { Authorization: `Bearer ${t.key}` };
  const call = (method: string, path: string, body?: unknown, headers = {}) =>
    api(method, path, body, { ...auth, ...headers });
  const up = upstream();
  const tool = manifest({ url: `${up.url}/charges` });
  expect((await call("PUT", `/v1/tools/${tool.name as string}`, tool)).status).toBeLessThan(300);
  return { ...t, call, up, tool: tool.name as string };
}

describe("a run's notify.url", () => {
  it(
    "gets the run's turn.settled signed with the secret from the create response, and nothing of another run; the secret is never shown again",
    { timeout: 30_000 },
    async () => {
      const { call, up, tool } = await notifyTenant();
      const url = `${up.url}/webhooks/agent`;
      const mine = await call("POST", "/v1/runs", {
        user: { id: "u1" },
        tools: [tool],
        notify: { url },
      });
      expect(mine.status).toBe(201);
      const secret = mine.body.notify.secret as string;
      const endpoint = mine.body.notify.webhook_id as string;
      expect(secret).toMatch(/^whsec_/);
      const runId = mine.body.run_id as string;
      // Another run cannot name this endpoint: its turns never go there.
      const borrow = await call("POST", "/v1/runs", {
        user: { id: "u1" },
        tools: [tool],
        notify: { webhook_id: endpoint },
      });
      expect(borrow.status).toBe(404);
      const other = await call("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool] });
      const callTool = (id: string) =>
        call(
          "POST",
          `/v1/runs/${id}/turns?format=native`,
          { calls: [{ id: "c1", name: tool, arguments: { amount: 1, currency: "usd" } }] },
          { Prefer: "wait=5" },
        );
      // The other run settles first: had its turn gone to this URL, it would arrive first.
      expect((await callTool(other.body.run_id)).body.results[0].status).toBe("succeeded");
      const settled = await callTool(runId);
      expect(settled.body.results[0].status).toBe("succeeded");

      type Payload = { type: string; data: { run_id: string; turn_id: string } };
      let got: Payload[] = [];
      for (let i = 0; i < 400 && got.length === 0; i++) {
        got = (await up.state()).requests
          .filter((request) => request.path === "/webhooks/agent")
          .map(
            (request) =>
              new Webhook(secret).verify(
                request.raw!,
                request.headers as Record<string, string>,
              ) as Payload,
          );
        if (got.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(got).toEqual([
        expect.objectContaining({
          type: "turn.settled",
          data: expect.objectContaining({ run_id: runId, turn_id: settled.body.turn_id }),
        }),
      ]);
      // A wrong secret does not verify the same delivery.
      const request = (await up.state()).requests.find((r) => r.path === "/webhooks/agent")!;
      expect(() =>
        new Webhook(`whsec_${btoa("x".repeat(32))}`).verify(
          request.raw!,
          request.headers as Record<string, string>,
        ),
      ).toThrow();

      // Its deliveries are logged like any endpoint's; the tenant's list does not show it.
      const log = await call("GET", `/v1/webhooks/${endpoint}/deliveries`);
      expect(log.status).toBe(200);
      expect(log.body.deliveries).toEqual([
        expect.objectContaining({ event_type: "turn.settled", delivered: true, status: 200 }),
      ]);
      const list = await call("GET", "/v1/webhooks");
      expect(list.body.webhooks.map((w: { id: string }) => w.id)).not.toContain(endpoint);
      // It is the run's: PUT cannot replace it (nor take over its URL or secret).
      const takeover = await call("PUT", `/v1/webhooks/${endpoint}`, {
        url: `${up.url}/webhooks/elsewhere`,
        events: ["*"],
        format: "standard",
      });
      expect(takeover.status).toBe(400);
      expect(takeover.body.code).toBe("invalid_request");
      expect(takeover.body.secret).toBeUndefined();

      const key = secret.slice("whsec_".length);
      for (const path of [
        "/v1/webhooks",
        `/v1/webhooks/${endpoint}/deliveries`,
        `/v1/runs/${runId}`,
        `/v1/runs/${runId}/turns/${settled.body.turn_id}`,
        `/v1/runs/${runId}/trace`,
        "/v1/events?limit=500",
      ]) {
        const read = await call("GET", path);
        expect(read.status, path).toBe(200);
        expect(JSON.stringify(read.body), path).not.toContain(key.slice(0, 24));
      }
    },
  );

  it.each([
    ["http://10.0.0.1/hook"],
    ["https://169.254.169.254/latest/meta-data"],
    ["https://hooks.evil.example/in"],
  ])("%s is refused with 422 and nothing is stored (no run, no endpoint)", async (url) => {
    const { call, tool, tenantId } = await notifyTenant();
    const body = {
      user: { id: "u1" },
      tools: [tool],
      notify: { url },
      request_id: crypto.randomUUID(),
    };
    const refused = await call("POST", "/v1/runs", body);
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("webhook_url_not_allowed");
    expect(JSON.stringify(refused.body)).not.toContain("whsec_");
    expect(await stored(tenantId)).toEqual({ webhooks: 0, runEndpoints: 0 });
    // No run under that request_id: without notify, the same request_id creates one (201).
    const { notify: _, ...plain } = body;
    expect((await call("POST", "/v1/runs", plain)).status).toBe(201);
  });

  it("a resend with the same request_id answers the same run without the secret, and makes no second endpoint", async () => {
    const { call, tool, tenantId, up } = await notifyTenant();
    const body = {
      user: { id: "u1" },
      tools: [tool],
      notify: { url: `${up.url}/webhooks/again` },
      request_id: crypto.randomUUID(),
    };
    const first = await call("POST", "/v1/runs", body);
    expect(first.status).toBe(201);
    expect(first.body.notify.secret).toMatch(/^whsec_/);
    const again = await call("POST", "/v1/runs", body);
    expect(again.status).toBe(200);
    expect(again.body.run_id).toBe(first.body.run_id);
    expect(JSON.stringify(again.body)).not.toContain(first.body.notify.secret.slice(6, 30));
    expect(await stored(tenantId)).toEqual({ webhooks: 1, runEndpoints: 1 });
  });

  it("notify with both url and webhook_id is refused (invalid_request), nothing stored", async () => {
    const { call, tool, tenantId, up } = await notifyTenant();
    const both = await call("POST", "/v1/runs", {
      user: { id: "u1" },
      tools: [tool],
      notify: { url: `${up.url}/webhooks/both`, webhook_id: "x" },
    });
    expect(both.status).toBe(400);
    expect(both.body.code).toBe("invalid_request");
    expect(both.body.detail).toContain("exactly one of url or webhook_id");
    expect(await stored(tenantId)).toEqual({ webhooks: 0, runEndpoints: 0 });
  });

  it("the endpoint and its log are deleted by the tenant's alarm once the run's retention has passed", async () => {
    const { call, tool, tenantId, up } = await notifyTenant();
    const made = await call("POST", "/v1/runs", {
      user: { id: "u1" },
      tools: [tool],
      notify: { url: `${up.url}/webhooks/gone` },
    });
    expect(made.status).toBe(201);
    const endpoint = made.body.notify.webhook_id as string;
    expect(await stored(tenantId)).toEqual({ webhooks: 1, runEndpoints: 1 });
    const tenant = tenantObject(tenantId);
    // Not yet due: the alarm keeps it.
    await runInDurableObject(tenant, async (_: unknown, state: DurableObjectState) => {
      const at = state.storage.sql
        .exec<{ prune_at: number }>("SELECT prune_at FROM run_endpoints")
        .one().prune_at;
      // The run's expiry (24 h) plus the retention period, and the alarm armed no later.
      expect(at).toBeGreaterThan(Date.now() + 24 * 3_600_000 - 60_000);
      expect(await state.storage.getAlarm()).toBeLessThanOrEqual(at);
      await state.storage.setAlarm(Date.now() + 60_000);
    });
    await runDurableObjectAlarm(tenant);
    expect((await call("GET", `/v1/webhooks/${endpoint}/deliveries`)).status).toBe(200);
    // Its retention has passed (the clock cannot be moved: the due time is).
    await runInDurableObject(tenant, async (_: unknown, state: DurableObjectState) => {
      state.storage.sql.exec("UPDATE run_endpoints SET prune_at = ?", Date.now() - 1);
      await state.storage.setAlarm(Date.now() + 60_000);
    });
    await runDurableObjectAlarm(tenant);
    expect((await call("GET", `/v1/webhooks/${endpoint}/deliveries`)).status).toBe(404);
    expect(await stored(tenantId)).toEqual({ webhooks: 0, runEndpoints: 0 });
  });
});
