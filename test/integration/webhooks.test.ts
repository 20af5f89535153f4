// Webhooks (issue 18): endpoints through the public API (secret once, URL rules, scopes), and
// delivery through the queue consumer (driven by hand, test/support/event-queue.ts) or
// deliverToEndpoints — a first fan-out, as the consumer makes it — to a real receiver (the
// fault-injecting upstream, paths under /webhooks) that verifies every signature with the
// `standardwebhooks` package and counts deliveries by webhook-id.
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { DeliveryMessage } from "../../src/domain/journal/events.ts";
import type { Env } from "../../src/durable/env.ts";
import { deliverToEndpoints } from "../../src/events/deliver.ts";
import { api, newTenant, upstream, type UpstreamState } from "../support/api.ts";
import { consume, recordingEnv, runSchedule, testEvent } from "../support/event-queue.ts";

const typedEnv = env as unknown as Env;

async function webhookTenant(scopes = ["webhooks:write"]) {
  const t = await newTenant(scopes);
  const auth = { Authorization: `Bearer ${t.key}` };
  return {
    tenantId: t.tenantId,
    call: (method: string, path: string, body?: unknown) => api(method, path, body, auth),
  };
}

const event = testEvent;

/** What the receiver got: requests to /webhooks/…, each signature checked with the endpoint's secret. */
function received(state: UpstreamState, secret: string) {
  return state.requests
    .filter((request) => request.path.startsWith("/webhooks"))
    .map((request) => {
      const headers = request.headers as Record<string, string>;
      let verified: unknown = null;
      try {
        verified = new Webhook(secret).verify(request.raw!, headers);
      } catch (error) {
        verified = `refused: ${String(error)}`;
      }
      return { webhookId: headers["webhook-id"], verified, fault: request.fault };
    });
}

async function endpoint(
  call: Awaited<ReturnType<typeof webhookTenant>>["call"],
  url: string,
  extra: Record<string, unknown> = {},
) {
  const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
  const put = await call("PUT", `/v1/webhooks/${id}`, {
    url,
    events: ["*"],
    format: "standard",
    ...extra,
  });
  expect(put.status).toBe(201);
  return { id, secret: put.body.secret as string };
}

describe("webhook endpoints", () => {
  it("returns the whsec_ secret once, on creation and on rotation, and never lists it", async () => {
    const { call } = await webhookTenant();
    const up = upstream();
    const put = await call("PUT", "/v1/webhooks/pager", {
      url: `${up.url}/webhooks/pager`,
      events: ["approval.requested", "operation.outcome_unknown"],
      format: "standard",
      description: "on-call",
    });
    expect(put.status).toBe(201);
    expect(put.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{42}[A-Za-z0-9+/=]{2}$/);
    expect(put.body).toMatchObject({ id: "pager", state: "healthy", format: "standard" });
    const secret = put.body.secret as string;

    const again = await call("PUT", "/v1/webhooks/pager", {
      url: `${up.url}/webhooks/pager`,
      events: ["*"],
      format: "slack",
    });
    expect(again.status).toBe(200);
    expect(again.body.secret).toBeUndefined();
    expect(again.body).toMatchObject({ events: ["*"], format: "slack", description: null });

    const list = await call("GET", "/v1/webhooks");
    expect(list.status).toBe(200);
    expect(list.body.webhooks.map((w: { id: string }) => w.id)).toEqual(["pager"]);
    expect(JSON.stringify(list.body)).not.toContain("whsec_");
    expect(JSON.stringify(list.body)).not.toContain(secret.slice(6, 30));

    const rotated = await call("POST", "/v1/webhooks/pager/rotate-secret");
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(secret);

    expect((await call("DELETE", "/v1/webhooks/pager")).status).toBe(204);
    expect((await call("GET", "/v1/webhooks")).body.webhooks).toEqual([]);
    expect((await call("DELETE", "/v1/webhooks/pager")).body.code).toBe("not_found");
    expect((await call("GET", "/v1/webhooks/pager/deliveries")).status).toBe(404);
  });

  it("needs webhooks:write to change endpoints; webhooks:read only lists them", async () => {
    const reader = await webhookTenant(["webhooks:read"]);
    const put = await reader.call("PUT", "/v1/webhooks/x", {
      url: "https://api.example.test/hook",
      events: ["*"],
      format: "standard",
    });
    expect(put.status).toBe(403);
    expect((await reader.call("GET", "/v1/webhooks")).status).toBe(200);
    const stranger = await webhookTenant(["runs:read"]);
    expect((await stranger.call("GET", "/v1/webhooks")).status).toBe(403);
  });

  it.each([
    ["http://10.0.0.1/hook"],
    ["https://10.0.0.1/hook"],
    ["https://169.254.169.254/latest/meta-data"],
    ["https://hooks.evil.example/in"],
    ["http://api.example.test/hook"],
    ["https://api.example.test:8443/hook"],
  ])("refuses %s at PUT and stores nothing", async (url) => {
    const { call } = await webhookTenant();
    const put = await call("PUT", "/v1/webhooks/bad", { url, events: ["*"], format: "standard" });
    expect(put.status).toBe(422);
    expect(put.body.code).toBe("webhook_url_not_allowed");
    expect(put.body.secret).toBeUndefined();
    expect((await call("GET", "/v1/webhooks")).body.webhooks).toEqual([]);
  });

  // Audit 2026-12-05 N6: the test deployment allow-lists these literals, as a careless operator might.
  it.each([["https://[::7f00:1]/hook"], ["https://[64:ff9b::a9fe:a9fe]/latest/meta-data"]])(
    "refuses the allow-listed IPv6 literal of a private IPv4 address %s at PUT, and stores nothing",
    async (url) => {
      const { call } = await webhookTenant();
      const put = await call("PUT", "/v1/webhooks/v6", { url, events: ["*"], format: "standard" });
      expect(put.status, JSON.stringify(put.body)).toBe(422);
      expect(put.body).toMatchObject({ code: "webhook_url_not_allowed" });
      expect(put.body.detail).toMatch(/private/);
      expect((await call("GET", "/v1/webhooks")).body.webhooks).toEqual([]);
      // A public allow-listed IPv6 literal is accepted: the rule is about the address, not IPv6.
      const ok = await call("PUT", "/v1/webhooks/v6", {
        url: "https://[2606:4700:4700::1111]/hook",
        events: ["approval.requested"],
        format: "standard",
      });
      expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    },
  );

  it("accepts an allow-listed https host and refuses unknown fields and event types (webhook.test too: it is never routed)", async () => {
    const { call } = await webhookTenant();
    const ok = await call("PUT", "/v1/webhooks/prod", {
      url: "https://api.example.test/hooks/toolgate",
      events: ["approval.requested"],
      format: "standard",
    });
    expect(ok.status).toBe(201);
    const unknownType = await call("PUT", "/v1/webhooks/p2", {
      url: "https://api.example.test/h",
      events: ["approval.maybe"],
      format: "standard",
    });
    expect(unknownType.body.code).toBe("invalid_request");
    // A hand-sent ping is never stored or routed: a filter naming it could never match.
    const ping = await call("PUT", "/v1/webhooks/p4", {
      url: "https://api.example.test/h",
      events: ["approval.requested", "webhook.test"],
      format: "standard",
    });
    expect(ping.status).toBe(400);
    expect(ping.body.code).toBe("invalid_request");
    expect((await call("GET", "/v1/webhooks/p4")).status).toBe(404);
    const extra = await call("PUT", "/v1/webhooks/p3", {
      url: "https://api.example.test/h",
      events: ["*"],
      format: "standard",
      follow_redirects: true,
    });
    expect(extra.body.code).toBe("invalid_request");
  });
});

describe("delivery", () => {
  it("signs each delivery (Standard Webhooks), sends { type, timestamp, data } and logs the attempt", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    const hook = await endpoint(call, `${up.url}/webhooks/a`);
    const evt = event(tenantId);

    const outcomes = await deliverToEndpoints(typedEnv, tenantId, evt);
    expect(outcomes).toEqual({
      ok: true,
      value: [
        {
          endpoint_id: hook.id,
          delivered: true,
          status: 200,
          attempt: 1,
          state: "healthy",
          retry: null,
          error: null,
          recorded: true,
          first_attempt_at_ms: expect.any(Number),
        },
      ],
    });
    const got = received(await up.state(), hook.secret);
    expect(got).toHaveLength(1);
    expect(got[0]!.webhookId).toBe(evt.id);
    expect(got[0]!.verified).toEqual({
      type: "approval.requested",
      timestamp: new Date(evt.at_ms).toISOString(),
      data: {
        run_id: evt.run_id,
        operation_id: evt.operation_id,
        tool: "refund",
        ...evt.data,
      },
    });
    // Another secret does not verify it: the signature is really the endpoint's.
    expect(received(await up.state(), `whsec_${btoa("x".repeat(32))}`)[0]!.verified).toMatch(
      /^refused/,
    );
    const log = await call("GET", `/v1/webhooks/${hook.id}/deliveries`);
    expect(log.body.deliveries).toEqual([
      expect.objectContaining({
        event_id: evt.id,
        event_type: "approval.requested",
        attempt: 1,
        delivered: true,
        status: 200,
        error: null,
      }),
    ]);
  });

  it("500, 500, then 200: three attempts, numbered by the retry messages, one webhook-id, every signature verifies", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    await up.script(
      { kind: "status", status: 500, body: { error: "down" } },
      { kind: "status", status: 500, body: { error: "down" } },
    );
    const hook = await endpoint(call, `${up.url}/webhooks/retry`);
    const evt = event(tenantId, { type: "operation.outcome_unknown" });

    // The consumer, fed back what it queued: the event, then its two retry messages.
    const { rounds, did } = await runSchedule([{ kind: "event", event: evt }]);
    expect(did.every((d) => d.action === "ack")).toBe(true);
    expect(rounds.map((queued) => queued.map((q) => q.body))).toEqual([
      [expect.objectContaining({ kind: "delivery", endpoint_id: hook.id, attempt: 2 })],
      [expect.objectContaining({ kind: "delivery", endpoint_id: hook.id, attempt: 3 })],
      [],
    ]);
    // The first attempt's time travels with every retry of the event.
    const first = rounds[0]![0]!.body as DeliveryMessage;
    expect((rounds[1]![0]!.body as DeliveryMessage).first_attempt_at_ms).toBe(
      first.first_attempt_at_ms,
    );
    // The first retry waits for the 5 s step (jittered within [2.5 s, 5 s]).
    expect(rounds[0]![0]!.delaySeconds).toBeGreaterThanOrEqual(2);
    expect(rounds[0]![0]!.delaySeconds).toBeLessThanOrEqual(5);

    const got = received(await up.state(), hook.secret);
    expect(got.map((r) => r.webhookId)).toEqual([evt.id, evt.id, evt.id]);
    expect(got.every((r) => typeof r.verified === "object")).toBe(true);
    const log = (await call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(log.map((d: { attempt: number; status: number }) => [d.attempt, d.status])).toEqual([
      [3, 200],
      [2, 500],
      [1, 500],
    ]);
    expect(log[1].snippet).toContain("down");
    const [listed] = (await call("GET", "/v1/webhooks")).body.webhooks;
    expect(listed).toMatchObject({ state: "healthy", consecutive_failures: 0 });
  });

  it("one queue batch: every event once per endpoint (a copy sent twice is delivered once), each endpoint's attempts logged, a failure gets its own retry message", async () => {
    const { tenantId, call } = await webhookTenant();
    const flaky = upstream();
    const fine = upstream();
    await flaky.script({ kind: "status", status: 500, body: { error: "down" } });
    const a = await endpoint(call, `${flaky.url}/webhooks/a`);
    const b = await endpoint(call, `${fine.url}/webhooks/b`, { events: ["approval.requested"] });
    const events = [
      event(tenantId),
      event(tenantId, { type: "operation.recorded" }),
      event(tenantId),
    ];
    // The outbox alarm and the queue may both have sent the first event: two messages, one event.
    const bodies = [events[0], ...events].map((e) => ({ kind: "event" as const, event: e! }));
    const recording = recordingEnv();
    const did = await consume(recording.env, bodies);

    expect(did.map((d) => d.action)).toEqual(["ack", "ack", "ack", "ack"]);
    const toA = received(await flaky.state(), a.secret);
    expect(toA.map((r) => r.webhookId).sort()).toEqual(events.map((e) => e.id).sort());
    expect(toA.every((r) => r.fault === "status" || typeof r.verified === "object")).toBe(true);
    // b subscribed to approval.requested only: the two of them, each once.
    const toB = received(await fine.state(), b.secret);
    expect(toB.map((r) => r.webhookId).sort()).toEqual([events[0]!.id, events[2]!.id].sort());
    const logA = (await call("GET", `/v1/webhooks/${a.id}/deliveries`)).body.deliveries;
    expect(logA).toHaveLength(3);
    expect(logA.every((d: { attempt: number }) => d.attempt === 1)).toBe(true);
    const failed = logA.filter((d: { status: number }) => d.status === 500);
    expect(failed).toHaveLength(1);
    expect((await call("GET", `/v1/webhooks/${b.id}/deliveries`)).body.deliveries).toHaveLength(2);
    // Only the failed attempt is tried again, at its endpoint alone, as its attempt 2.
    expect(recording.queued.map((q) => q.body)).toEqual([
      {
        kind: "delivery",
        endpoint_id: a.id,
        event: events.find((e) => e.id === failed[0].event_id),
        attempt: 2,
        first_attempt_at_ms: expect.any(Number),
      },
    ]);
  });

  it("a hanging receiver times out as a failed attempt; the live endpoint beside it is delivered", async () => {
    const { tenantId, call } = await webhookTenant();
    const dead = upstream();
    const live = upstream();
    await dead.script({ kind: "hang" });
    const slow = await endpoint(call, `${dead.url}/webhooks/slow`);
    const fine = await endpoint(call, `${live.url}/webhooks/fine`);
    const evt = event(tenantId);

    const outcomes = await deliverToEndpoints(typedEnv, tenantId, evt, { timeoutMs: 300 });
    expect(outcomes.ok).toBe(true);
    const byId = Object.fromEntries(
      (outcomes.ok ? outcomes.value : []).map((o) => [o.endpoint_id, o]),
    );
    expect(byId[slow.id]).toMatchObject({
      delivered: false,
      status: null,
      attempt: 1,
      error: "no response within 300 ms",
    });
    expect(byId[slow.id]!.retry).toMatchObject({ kind: "retry" });
    expect(byId[fine.id]).toMatchObject({ delivered: true, status: 200 });
    expect(received(await live.state(), fine.secret).map((r) => r.webhookId)).toEqual([evt.id]);
    expect(received(await dead.state(), slow.secret)).toHaveLength(1);
    const log = (await call("GET", `/v1/webhooks/${slow.id}/deliveries`)).body.deliveries;
    expect(log).toEqual([
      expect.objectContaining({
        delivered: false,
        status: null,
        error: "no response within 300 ms",
      }),
    ]);
  });

  it("a receiver that answers 200 and then stalls its body does not hold the delivery past the timeout", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "headers_then_stall" });
    const hook = await endpoint(call, `${up.url}/webhooks/stall`);
    const outcomes = await deliverToEndpoints(typedEnv, tenantId, event(tenantId), {
      timeoutMs: 300,
    });
    expect(outcomes.ok && outcomes.value[0]).toMatchObject({
      endpoint_id: hook.id,
      delivered: true,
      status: 200,
    });
  });

  it("a redirect is not followed: a failed attempt, and nothing reaches the Location", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "redirect", location: `${up.url}/webhooks/elsewhere`, status: 307 });
    const hook = await endpoint(call, `${up.url}/webhooks/moved`);
    const outcomes = await deliverToEndpoints(typedEnv, tenantId, event(tenantId));
    expect(outcomes.ok && outcomes.value[0]).toMatchObject({
      delivered: false,
      status: 307,
      error: `redirect to ${up.url}/webhooks/elsewhere not followed`,
    });
    expect((await up.state()).requests.map((r) => r.path)).toEqual(["/webhooks/moved"]);
    expect(hook.secret).toMatch(/^whsec_/);
  });

  it("after the whole schedule of failed attempts the delivery is failed (given up, said in the log) and the endpoint failing; one success heals it", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    await up.script(...Array.from({ length: 8 }, () => ({ kind: "status", status: 500 })));
    const hook = await endpoint(call, `${up.url}/webhooks/dead`);
    const evt = event(tenantId);
    const { rounds } = await runSchedule([{ kind: "event", event: evt }]);
    // Seven retry messages (attempts 2 to 8), then nothing: the schedule ended.
    expect(rounds.map((queued) => queued.map((q) => (q.body as DeliveryMessage).attempt))).toEqual([
      [2],
      [3],
      [4],
      [5],
      [6],
      [7],
      [8],
      [],
    ]);
    const log = (await call("GET", `/v1/webhooks/${hook.id}/deliveries`)).body.deliveries;
    expect(
      log.map((d: Record<string, unknown>) => [d.attempt, d.given_up, d.next_attempt_at]),
    ).toEqual([[8, true, null], ...[7, 6, 5, 4, 3, 2, 1].map((n) => [n, false, null])]);
    const [listed] = (await call("GET", "/v1/webhooks")).body.webhooks;
    expect(listed).toMatchObject({ id: hook.id, state: "failing", consecutive_failures: 8 });
    expect(listed.failing_since).toEqual(log[0].at);
    expect(received(await up.state(), hook.secret).map((r) => r.webhookId)).toEqual(
      Array(8).fill(evt.id),
    );
    // Still redeliverable by hand; a delivered attempt heals the endpoint.
    const again = await call("POST", `/v1/webhooks/${hook.id}/redeliver`, { event_id: evt.id });
    expect(again.body).toMatchObject({ delivered: true, attempt: 9, state: "healthy" });
    const healed = (await call("GET", "/v1/webhooks")).body.webhooks[0];
    expect(healed).toMatchObject({ state: "healthy", failing_since: null });
  });

  it("tenant B's endpoint never receives tenant A's events", async () => {
    const a = await webhookTenant();
    const b = await webhookTenant();
    const upA = upstream();
    const upB = upstream();
    const hookA = await endpoint(a.call, `${upA.url}/webhooks/a`);
    const hookB = await endpoint(b.call, `${upB.url}/webhooks/b`);
    const evtA = event(a.tenantId);

    const forA = await deliverToEndpoints(typedEnv, a.tenantId, evtA);
    expect(forA.ok && forA.value.map((o) => o.endpoint_id)).toEqual([hookA.id]);
    // A's event handed to B's delivery (a mis-routed message) reaches none of B's endpoints.
    expect(await deliverToEndpoints(typedEnv, b.tenantId, evtA)).toEqual({ ok: true, value: [] });
    expect(received(await upA.state(), hookA.secret).map((r) => r.webhookId)).toEqual([evtA.id]);
    expect(received(await upB.state(), hookB.secret)).toEqual([]);
    expect((await b.call("GET", `/v1/webhooks/${hookB.id}/deliveries`)).body.deliveries).toEqual(
      [],
    );
    // B cannot read or redeliver to A's endpoint either.
    expect((await b.call("GET", `/v1/webhooks/${hookA.id}/deliveries`)).status).toBe(404);
  });

  it("sends only the event types an endpoint subscribed to", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    const id = "approvals-only";
    const put = await call("PUT", `/v1/webhooks/${id}`, {
      url: `${up.url}/webhooks/only`,
      events: ["approval.requested"],
      format: "standard",
    });
    expect(put.status).toBe(201);
    const skipped = await deliverToEndpoints(
      typedEnv,
      tenantId,
      event(tenantId, { type: "turn.settled" }),
    );
    expect(skipped).toEqual({ ok: true, value: [] });
    expect((await up.state()).requests).toEqual([]);
  });

  it("redeliver sends a logged event again with the same webhook-id; an unknown event is 404", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    await up.script({ kind: "status", status: 503 });
    const hook = await endpoint(call, `${up.url}/webhooks/re`);
    const evt = event(tenantId);
    await deliverToEndpoints(typedEnv, tenantId, evt);

    const again = await call("POST", `/v1/webhooks/${hook.id}/redeliver`, { event_id: evt.id });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      event_id: evt.id,
      delivered: true,
      status: 200,
      attempt: 2,
    });
    // A redeliver is one attempt by hand: no retry plan that nothing would carry out.
    expect(again.body).not.toHaveProperty("retry");
    const got = received(await up.state(), hook.secret);
    expect(got.map((r) => r.webhookId)).toEqual([evt.id, evt.id]);
    expect(typeof got[1]!.verified).toBe("object");

    const unknown = await call("POST", `/v1/webhooks/${hook.id}/redeliver`, {
      event_id: `evt_${"0".repeat(32)}`,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    expect(received(await up.state(), hook.secret)).toHaveLength(2);
  });

  it("the slack format posts a Block Kit message whose button opens the approval in the console", async () => {
    const { tenantId, call } = await webhookTenant();
    const up = upstream();
    const hook = await endpoint(call, `${up.url}/webhooks/slack`, { format: "slack" });
    const evt = event(tenantId);
    const outcomes = await deliverToEndpoints(typedEnv, tenantId, evt);
    expect(outcomes.ok && outcomes.value[0]!.delivered).toBe(true);
    const [request] = (await up.state()).requests;
    const message = JSON.parse(request!.raw!);
    expect(message.text).toBe("Approval needed: refund on order:ord_1");
    expect(message.blocks.map((b: { type: string }) => b.type)).toEqual([
      "section",
      "section",
      "context",
      "actions",
    ]);
    expect(message.blocks[1].text.text).toContain('"amount": 1200');
    expect(message.blocks[3].elements[0].url).toBe(
      `http://toolgate.test/console/approvals#${evt.operation_id}`,
    );
    expect(JSON.stringify(message)).not.toContain(hook.secret);
  });
});

describe("POST /v1/webhooks/{id}/test", () => {
  it("sends one signed webhook.test event to that endpoint whatever its filter, logs it, and is refused to readers and other tenants", async () => {
    const { call, tenantId } = await webhookTenant();
    const up = upstream();
    const hook = await endpoint(call, `${up.url}/webhooks/ping`, {
      events: ["approval.requested"],
    });
    const sent = await call("POST", `/v1/webhooks/${hook.id}/test`);
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ endpoint_id: hook.id, delivered: true, status: 200 });
    expect(sent.body.retry).toBeUndefined();
    const got = received(await up.state(), hook.secret);
    expect(got).toEqual([
      {
        webhookId: sent.body.event_id,
        verified: { type: "webhook.test", timestamp: expect.any(String), data: expect.any(Object) },
        fault: "ok",
      },
    ]);
    expect((got[0]!.verified as { data: { webhook_id: string } }).data.webhook_id).toBe(hook.id);
    const log = await call("GET", `/v1/webhooks/${hook.id}/deliveries`);
    expect(log.body.deliveries).toEqual([
      expect.objectContaining({
        event_id: sent.body.event_id,
        event_type: "webhook.test",
        delivered: true,
      }),
    ]);

    // A Slack endpoint gets a Block Kit message whose button opens the console.
    const slack = await endpoint(call, `${up.url}/webhooks/slack`, { format: "slack" });
    expect((await call("POST", `/v1/webhooks/${slack.id}/test`)).body.delivered).toBe(true);
    const message = (await up.state()).requests.find((r) => r.path === "/webhooks/slack")!.body;
    expect(message.text).toContain("Test message from toolgate");
    expect(message.blocks.at(-1)).toEqual({
      type: "actions",
      elements: [
        expect.objectContaining({ url: "http://toolgate.test/console/approvals", type: "button" }),
      ],
    });

    // A reader cannot send; another tenant cannot reach this endpoint; an unknown id is 404.
    const reader = await newTenant(["webhooks:read"]);
    const other = await webhookTenant();
    expect(
      (
        await api("POST", `/v1/webhooks/${hook.id}/test`, undefined, {
          Authorization: `Bearer ${reader.key}`,
        })
      ).status,
    ).toBe(403);
    expect((await other.call("POST", `/v1/webhooks/${hook.id}/test`)).status).toBe(404);
    expect((await call("POST", "/v1/webhooks/nope/test")).status).toBe(404);
    expect((await up.state()).requests).toHaveLength(2);
    expect(tenantId).not.toBe(other.tenantId);
  });
});
