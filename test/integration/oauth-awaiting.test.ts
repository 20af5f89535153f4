// Issue 36, awaiting_credential: a call whose end user has no usable token (never connected, the
// refresh answered invalid_grant) sends nothing and waits durably — pending, code
// credential_required, the connect link in the model's envelope, the credential.required event —
// then, once the user connects, the same operation continues under the same idempotency key and
// its effect happens once. A transient refresh failure only retries, like a 503.
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { CREDENTIAL_WAIT_MS } from "../../src/domain/operation/credential.ts";
import { consolePage } from "../support/console-page.ts";
import { api, fireAlarm, operation, trace, unique, upstream, until } from "../support/api.ts";
import { MERCHANT_PAY_TO, TEST_ASSET } from "../../demo/x402-merchant.ts";
import {
  authServer,
  call,
  completeConsent,
  connect,
  credentialObject,
  everything,
  registerProvider,
  sentAndLatest,
  settled,
  runAs,
  userTool,
} from "../support/oauth.ts";

const credentialEvents = async (operationId: string) =>
  until(
    async () =>
      (
        (await api("GET", "/v1/events?type=credential.required&limit=500")).body.events as Array<{
          operation_id: string;
          data: Record<string, unknown>;
        }>
      ).filter((e) => e.operation_id === operationId),
    (events) => events.length > 0,
  );

describe("awaiting_credential", { timeout: 30_000 }, () => {
  it("a revoked refresh token: nothing sent, the event stored; connect → the call completes once", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "erin");
    await server.revoke("erin");
    const runId = await runAs("erin", tool);
    const first = await call(runId, tool);
    const result = first.body.results[0];
    expect(result).toMatchObject({
      status: "pending",
      code: "credential_required",
      allowed_next_actions: ["ask_user_to_connect", "wait", "tell_user"],
    });
    expect(result.message).toContain("revoked");
    expect((await up.state()).requests).toHaveLength(0);
    const [event] = await credentialEvents(result.operation_id);
    expect(event!.data).toMatchObject({ user: "erin", provider, reason: "invalid_grant" });
    expect(event!.data.connect_url).toBe(result.connect_url);
    const health = await api("GET", "/v1/connections?user=erin");
    expect(
      health.body.connections.find((c: { provider: string }) => c.provider === provider),
    ).toMatchObject({
      health: "needs_consent",
      reason: "invalid_grant",
    });
    // The console's operation page says what the call waits for, with the link.
    const page = await consolePage(`/console/operations/${result.operation_id}`);
    expect(page).toContain('data-awaiting="credential"');
    expect(page).toContain(result.connect_url.replaceAll("&", "&amp;"));
    // The console's queue lists it below the approvals, with the link.
    const queue = (html: string) =>
      html.slice(html.indexOf('data-list="credential-waits"'), html.indexOf("</table>"));
    const waitingRow = queue(await consolePage("/console/approvals"));
    expect(waitingRow).toContain(`data-operation="${result.operation_id}"`);
    expect(waitingRow).toContain(result.connect_url.replaceAll("&", "&amp;"));
    expect(waitingRow).toContain("erin");
    // The user opens the link from the envelope: the callback wakes the waiting operation.
    const consent = await completeConsent(result.connect_url, "erin");
    expect(consent.status).toBe(200);
    expect((await settled(result.operation_id)).result.status).toBe("succeeded");
    const after = await consolePage("/console/approvals");
    expect(after).not.toContain(`data-operation="${result.operation_id}"`);
    const again = await call(runId, tool);
    expect(again.body.results[0]).toMatchObject({
      status: "succeeded",
      operation_id: result.operation_id,
    });
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    const token = (await server.state()).access_tokens.at(-1)!.token;
    expect(state.requests.map((r) => r.authorization)).toEqual([`Bearer ${token}`]);
    const events = (await trace(runId)).map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(["credential_required", "credential_ready"]));
    const read = (await everything([runId], [result.operation_id])) + waitingRow + after;
    for (const t of (await server.state()).access_tokens) expect(read).not.toContain(t.token);
  });

  it("never connected: waits; a lost wake is found by the recheck alarm", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    const runId = await runAs("frank", tool);
    const first = await call(runId, tool);
    const opId = first.body.results[0].operation_id;
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "credential_required" });
    // The wake is lost (the waiting list emptied, as if the object had failed to tell it): the
    // connect alone does not move the call; its recheck alarm finds the connection.
    await (runInDurableObject as any)(
      await credentialObject("frank", provider),
      (_: unknown, state: DurableObjectState) =>
        void state.storage.sql.exec("DELETE FROM cred_waiters"),
    );
    await connect(provider, "frank");
    expect((await operation(opId)).body.phase).toBe("awaiting_credential");
    await fireAlarm(opId);
    expect((await settled(opId)).result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("nobody connects in time: the wait ends not sent (rejected / credential_required); a late connect sends nothing", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    const runId = await runAs("lena", tool);
    const opId = (await call(runId, tool)).body.results[0].operation_id;
    expect((await operation(opId)).body.phase).toBe("awaiting_credential");
    // An early recheck keeps waiting; one past the bound (an approval's default expiry) ends it.
    await fireAlarm(opId);
    expect((await operation(opId)).body.phase).toBe("awaiting_credential");
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + CREDENTIAL_WAIT_MS + 1_000);
      await fireAlarm(opId);
    } finally {
      vi.useRealTimers();
    }
    expect((await settled(opId)).result).toMatchObject({
      status: "rejected",
      code: "credential_required",
    });
    await connect(provider, "lena");
    expect((await call(runId, tool)).body.results[0]).toMatchObject({
      operation_id: opId,
      status: "rejected",
      code: "credential_required",
    });
    expect((await up.state()).requests).toHaveLength(0);
    expect((await trace(runId)).map((e) => e.type)).toContain("credential_expired");
  });

  it("a transient refresh failure retries like a 503, and is not awaiting_credential", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "gina");
    await server.tokenFaults(503);
    const runId = await runAs("gina", tool);
    const first = await call(runId, tool);
    const opId = first.body.results[0].operation_id;
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    expect((await up.state()).requests).toHaveLength(0);
    await fireAlarm(opId);
    expect((await settled(opId)).result.status).toBe("succeeded");
    expect((await server.state()).refreshes).toBe(2);
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("deleting a provider tools still act with", { timeout: 30_000 }, () => {
  it("refused with 409 naming the tools; forced, their calls wait for a connection, never retry as transient", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "mona");
    const refused = await api("DELETE", `/v1/oauth-providers/${provider}`);
    expect([refused.status, refused.body.code, refused.body.tools]).toEqual([
      409,
      "oauth_provider_in_use",
      [tool],
    ]);
    expect((await api("GET", `/v1/oauth-providers/${provider}`)).status).toBe(200);
    expect((await api("DELETE", `/v1/oauth-providers/${provider}?force=yes`)).status).toBe(400);
    const forced = await api("DELETE", `/v1/oauth-providers/${provider}?force=1`);
    expect([forced.status, forced.body]).toEqual([
      200,
      { deleted: true, tools_without_provider: [tool] },
    ]);
    // The user's access token is due: its refresh finds no provider — a wait, not a retry.
    const runId = await runAs("mona", tool);
    const result = (await call(runId, tool)).body.results[0];
    expect(result).toMatchObject({ status: "pending", code: "credential_required" });
    expect(result.message).toContain("deleted");
    expect((await up.state()).requests).toHaveLength(0);
    expect((await server.state()).refreshes).toBe(0);
  });
});

describe("scopes", { timeout: 30_000 }, () => {
  it("a connection lacking the tool's scope waits; the envelope's link asks for it", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url, ["calendar.write"]);
    await connect(provider, "ivan");
    const runId = await runAs("ivan", tool);
    const first = (await call(runId, tool)).body.results[0];
    expect(first).toMatchObject({ status: "pending", code: "credential_required" });
    expect(first.message).toContain("lacks a scope");
    expect(new URL(first.connect_url).searchParams.get("scope")).toBe(
      "calendar.read calendar.write",
    );
    expect((await up.state()).requests).toHaveLength(0);
    await completeConsent(first.connect_url, "ivan");
    expect((await settled(first.operation_id)).result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("approvals of calls acting as the user", { timeout: 30_000 }, () => {
  it("the inbox says the user must reconnect first; the refresh happens after the approval", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url, [], {
      approval: { mode: "always", four_eyes: false },
    });
    const runId = await runAs("hana", tool);
    const first = await call(runId, tool, 1, 0);
    const opId = first.body.results[0].operation_id;
    expect(first.body.results[0].status).toBe("awaiting_approval");
    const item = async () =>
      (await api("GET", "/v1/approvals?state=pending&limit=100")).body.items.find(
        (i: { operation_id: string }) => i.operation_id === opId,
      );
    expect((await item()).credential).toMatchObject({
      provider,
      user: "hana",
      health: "needs_consent",
      must_reconnect: true,
    });
    // The single request says it too.
    const one = async () => (await api("GET", `/v1/approvals/${opId}`)).body.credential;
    expect(await one()).toMatchObject({ provider, user: "hana", must_reconnect: true });
    await connect(provider, "hana");
    expect((await item()).credential).toMatchObject({ health: "connected", must_reconnect: false });
    expect(await one()).toMatchObject({ health: "connected", must_reconnect: false });
    // Connected with a token about to expire: nothing refreshed while the approval waits.
    expect((await server.state()).refreshes).toBe(0);
    const approved = await api("POST", `/v1/operations/${opId}/approve`, {
      input_hash: (await api("GET", `/v1/approvals/${opId}`)).body.input_hash,
    });
    expect(approved.status).toBe(200);
    expect((await settled(opId)).result.status).toBe("succeeded");
    const { state, sent, latest } = await sentAndLatest(server, up);
    expect(state.refreshes).toBe(1);
    expect(sent).toEqual([latest]);
  });

  it("approved while the user is not connected: dispatch checks again and waits, nothing sent", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url, [], {
      approval: { mode: "always", four_eyes: false },
    });
    const runId = await runAs("jules", tool);
    const opId = (await call(runId, tool, 1, 0)).body.results[0].operation_id;
    const inputHash = (await api("GET", `/v1/approvals/${opId}`)).body.input_hash;
    expect(
      (await api("POST", `/v1/operations/${opId}/approve`, { input_hash: inputHash })).status,
    ).toBe(200);
    const waiting = await until(
      () => operation(opId),
      (r) => r.body.phase === "awaiting_credential",
    );
    expect(waiting.body.result).toMatchObject({ status: "pending", code: "credential_required" });
    expect((await up.state()).requests).toHaveLength(0);
    await completeConsent(waiting.body.result.connect_url, "jules");
    expect((await settled(opId)).result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("a paid tool acting as the user", { timeout: 30_000 }, () => {
  it("no token at the paid send: nothing signed, nothing paid; once connected, signed once and paid once", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const secretName = unique("SIGNER").toUpperCase();
    const secret = `whsec_${btoa("a signer secret of 32 bytes long")}`;
    expect((await api("PUT", `/v1/secrets/${secretName}`, { value: secret })).status).toBe(201);
    const tool = await userTool(provider, up.url, [], {
      request: {
        method: "POST",
        url: `${up.url}/x402/reports`,
        headers: { Authorization: "Bearer {credential}" },
      },
      payment: {
        protocol: "x402",
        max_amount: "50000",
        asset: TEST_ASSET,
        pay_to: MERCHANT_PAY_TO,
        signer: { url: `${up.url}/webhooks/x402-signer`, secret: secretName },
        approval_over: "5000",
      },
    });
    await connect(provider, "kim");
    const runId = await runAs("kim", tool);
    const opId = (await call(runId, tool, 1, 0)).body.results[0].operation_id;
    // The 402 asked a person; meanwhile the user disconnects.
    await until(
      () => operation(opId),
      (r) => r.body.phase === "awaiting_approval",
    );
    expect((await api("DELETE", `/v1/connections/${provider}?user=kim`)).status).toBe(204);
    expect((await api("POST", `/v1/operations/${opId}/approve`, {})).status).toBe(200);
    const waiting = await until(
      () => operation(opId),
      (r) => r.body.phase === "awaiting_credential",
    );
    const signed = async () =>
      (await up.state()).requests.filter((r) => r.path === "/webhooks/x402-signer").length;
    expect(await signed()).toBe(0);
    expect((await up.state()).effects).toHaveLength(0);
    await completeConsent(waiting.body.result.connect_url, "kim");
    expect((await settled(opId)).result.status).toBe("succeeded");
    expect(await signed()).toBe(1);
    expect((await up.state()).effects).toHaveLength(1);
  });
});
