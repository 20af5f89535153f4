// Four eyes on standing grants (issue 35 item 1): when the deployment's admin sets the tenant's
// `grant_four_eyes`, POST /v1/grants stores the grant proposed — it covers no call (they ask a
// person) — until a second, different person confirms it; the proposer's own confirm is refused
// typed (403 self_approval) and changes nothing; a confirm of a grant not proposed is 409.
import { describe, expect, it } from "vitest";
import { ADMIN, ALL_SCOPES, api, newTenant, unique, upstream } from "../support/api.ts";
import { as, call, grant, newRun, one, refundGrant, registered, shown } from "../support/grants.ts";

const admin = { Authorization: `Bearer ${ADMIN}` };
const settings = (tenantId: string, body: unknown) =>
  api("PUT", `/v1/admin/tenants/${tenantId}/settings`, body, admin);

/** A tenant with two people's keys: alice (the test key) and bob. */
async function twoPeople() {
  const alice = await newTenant(ALL_SCOPES);
  const issued = await api(
    "POST",
    `/v1/admin/tenants/${alice.tenantId}/keys`,
    { name: "bob", scopes: ALL_SCOPES },
    admin,
  );
  expect(issued.status).toBe(201);
  return { tenantId: alice.tenantId, alice: alice.key, bob: issued.body.key as string };
}

const body = (tool: string) => refundGrant(tool, "any");

describe("four eyes on standing grants", { timeout: 30_000 }, () => {
  it("a proposed grant covers nothing; its proposer cannot confirm it (403, nothing changed); another person can; then calls run under it", async () => {
    const up = upstream();
    const { tenantId, alice, bob } = await twoPeople();
    expect((await settings(tenantId, { grant_four_eyes: true })).body).toEqual({
      grant_four_eyes: true,
    });
    const tool = await registered(up.url, {}, alice);
    const id = await grant(body(tool), alice);
    const proposed = await shown(id, alice);
    expect(proposed).toMatchObject({ state: "proposed", four_eyes: true, confirmed_by: null });
    expect(proposed.chain.entries).toMatchObject([{ type: "grant_created", proposed: true }]);

    // Not usable yet: the call asks a person, nothing sent.
    const runId = await newRun(tool, unique("cus"), alice);
    expect(await one(runId, call(tool, 10), 5, alice)).toMatchObject({
      status: "awaiting_approval",
    });
    expect((await up.state()).effects).toHaveLength(0);

    const self = await api("POST", `/v1/grants/${id}/confirm`, {}, as(alice));
    expect(self.status).toBe(403);
    expect(self.body.code).toBe("self_approval");
    const still = await shown(id, alice);
    expect(still).toMatchObject({ state: "proposed", confirmed_by: null });
    expect(still.chain.entries).toHaveLength(1);

    const confirmed = await api("POST", `/v1/grants/${id}/confirm`, {}, as(bob));
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.grant).toMatchObject({ state: "live", confirmed_by: "bob" });
    const again = await api("POST", `/v1/grants/${id}/confirm`, {}, as(bob));
    expect(again.status).toBe(409);
    expect(again.body.code).toBe("grant_not_proposed");

    const run2 = await newRun(tool, unique("cus"), alice);
    expect(await one(run2, call(tool, 10), 5, alice)).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);
    const live = await shown(id, alice);
    expect(live.chain.entries.map((e: any) => e.type)).toEqual([
      "grant_created",
      "grant_confirmed",
      "grant_use",
    ]);
    expect(live.chain.check).toMatchObject({ ok: true });
  });

  it("without the setting a grant is live at once and there is nothing to confirm; a bad settings body is refused, nothing changed", async () => {
    const up = upstream();
    const { tenantId, alice, bob } = await twoPeople();
    const bad = await settings(tenantId, { grant_four_eye: true });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_request");
    expect(
      (await api("GET", `/v1/admin/tenants/${tenantId}/settings`, undefined, admin)).body,
    ).toEqual({ grant_four_eyes: false });
    const tool = await registered(up.url, {}, alice);
    const id = await grant(body(tool), alice);
    expect(await shown(id, alice)).toMatchObject({ state: "live", four_eyes: false });
    const confirm = await api("POST", `/v1/grants/${id}/confirm`, {}, as(bob));
    expect(confirm.status).toBe(409);
    expect(confirm.body.code).toBe("grant_not_proposed");
    // Only the deployment's admin sets it: a tenant key cannot switch four eyes off (or on).
    expect((await settings(tenantId, { grant_four_eyes: true })).status).toBe(200);
    const byKey = await api(
      "PUT",
      `/v1/admin/tenants/${tenantId}/settings`,
      { grant_four_eyes: false },
      as(alice),
    );
    expect(byKey.status).toBe(403);
    expect(
      (await api("GET", `/v1/admin/tenants/${tenantId}/settings`, undefined, admin)).body,
    ).toEqual({ grant_four_eyes: true });
  });
});
