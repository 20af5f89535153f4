// grant.* events (issue 35): a standing grant made (proposed under four eyes), confirmed, each call
// it let through, used up, and revoked reach a subscribed webhook endpoint through the tenant's
// outbox and the EVENTS queue, signed, each once; counted at the upstream's receiver.
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { ADMIN, ALL_SCOPES, api, newTenant, unique, upstream } from "../support/api.ts";
import { as, call, grant, newRun, one, refundGrant, registered } from "../support/grants.ts";

const admin = { Authorization: `Bearer ${ADMIN}` };
const GRANT_TYPES = [
  "grant.created",
  "grant.confirmed",
  "grant.revoked",
  "grant.used",
  "grant.exhausted",
];

type Got = { webhookId: string; type: string; data: any };

/** The signed grant events the receiver got (each checked with its endpoint's secret). */
async function received(up: ReturnType<typeof upstream>, secret: string): Promise<Got[]> {
  return (await up.state()).requests
    .filter((r) => r.path.startsWith("/webhooks"))
    .map((r) => {
      const headers = r.headers as Record<string, string>;
      const payload = new Webhook(secret).verify(r.raw!, headers) as { type: string; data: any };
      return { webhookId: headers["webhook-id"]!, type: payload.type, data: payload.data };
    });
}

/** Polls the receiver (bounded, 25 ms apart: the queue consumer runs in the pool) until `done`. */
async function until(
  up: ReturnType<typeof upstream>,
  secret: string,
  done: (got: Got[]) => boolean,
): Promise<Got[]> {
  let got = await received(up, secret);
  for (let i = 0; i < 400 && !done(got); i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    got = await received(up, secret);
  }
  return got;
}

describe("grant.* webhook events", { timeout: 30_000 }, () => {
  it("created (proposed), confirmed, each use, exhausted once, revoked: each delivered once, signed", async () => {
    const up = upstream();
    const alice = await newTenant(ALL_SCOPES);
    const bob = await api(
      "POST",
      `/v1/admin/tenants/${alice.tenantId}/keys`,
      { name: "bob", scopes: ALL_SCOPES },
      admin,
    );
    const settings = { grant_four_eyes: true };
    await api("PUT", `/v1/admin/tenants/${alice.tenantId}/settings`, settings, admin);
    const hook = await api(
      "PUT",
      "/v1/webhooks/grants",
      { url: `${up.url}/webhooks/grants`, events: GRANT_TYPES, format: "standard" },
      as(alice.key),
    );
    expect(hook.status).toBe(201);
    const secret = hook.body.secret as string;

    const tool = await registered(up.url, {}, alice.key);
    const id = await grant(refundGrant(tool, "any"), alice.key);
    const confirmed = await api("POST", `/v1/grants/${id}/confirm`, {}, as(bob.body.key));
    expect(confirmed.status).toBe(200);
    const runId = await newRun(tool, unique("cus"), alice.key);
    // Two refunds (other orders: another operation each) fill the grant's total.
    const first = await one(runId, call(tool, 50, unique("c"), { order_id: "o1" }), 5, alice.key);
    const second = await one(runId, call(tool, 50, unique("c"), { order_id: "o2" }), 5, alice.key);
    expect([first.status, second.status]).toEqual(["succeeded", "succeeded"]);
    // Used up: the next call asks a person, and is no use.
    expect(await one(runId, call(tool, 10), 0, alice.key)).toMatchObject({
      status: "awaiting_approval",
    });
    expect((await api("DELETE", `/v1/grants/${id}`, undefined, as(alice.key))).status).toBe(200);

    const got = await until(up, secret, (all) => all.length >= 6);
    const of = (type: string) => got.filter((g) => g.type === type);
    expect(got.map((g) => g.type).sort()).toEqual(
      [
        "grant.created",
        "grant.confirmed",
        "grant.used",
        "grant.used",
        "grant.exhausted",
        "grant.revoked",
      ].sort(),
    );
    expect(new Set(got.map((g) => g.webhookId)).size).toBe(6);
    expect(of("grant.created")[0]!.data).toMatchObject({
      grant_id: id,
      state: "proposed",
      by: "test",
      tools: [tool],
      per_call_max: 50,
      total_max: 100,
    });
    expect(of("grant.confirmed")[0]!.data).toMatchObject({ state: "live", by: "bob" });
    expect(
      of("grant.used")
        .map((g) => g.data.use.operation_id)
        .sort(),
    ).toEqual([first.operation_id, second.operation_id].sort());
    expect(of("grant.exhausted")[0]!.data).toMatchObject({ used: { calls: 2, sum: 100 } });
    expect(of("grant.revoked")[0]!.data).toMatchObject({
      state: "revoked",
      by: expect.any(String),
    });
    // The same events are in the pull feed; the upstream saw two refunds.
    const feed = await api("GET", "/v1/events?type=grant.used", undefined, as(alice.key));
    expect(feed.body.events).toHaveLength(2);
    expect(
      (await up.state()).effects.filter((e) => e.path.endsWith("/refunds")).map((e) => e.body),
    ).toEqual([expect.objectContaining({ amount: 50 }), expect.objectContaining({ amount: 50 })]);
  });
});
