// The console's grant pages (issue 35 item 1) through the public HTTP surface, counted at the
// upstream: the Grants page makes a grant through the API's schema (bad input or a missing CSRF
// token makes none), a call runs under it once, the grant's page lists the use with a link to its
// operation and its chain entries, Revoke stops it; under four eyes the proposer's Confirm changes
// nothing and another person's makes it live.
import { describe, expect, it } from "vitest";
import { ADMIN, ALL_SCOPES, api, newTenant, testTenant, unique, upstream } from "../support/api.ts";
import { consoleAs } from "../support/console-page.ts";
import { call, grant, inAnHour, newRun, one, registered, shown } from "../support/grants.ts";

const grantIds = async (key?: string) =>
  (
    await api("GET", "/v1/grants", undefined, key ? { Authorization: `Bearer ${key}` } : {})
  ).body.grants.map((g: { id: string }) => g.id) as string[];
const inAnHourLocal = () => inAnHour().slice(0, 16); // datetime-local, read as UTC

describe("console: grants", { timeout: 30_000 }, () => {
  it("the Grants page makes a grant; a call runs under it once; its page links the use to its operation; Revoke stops it", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const customer = unique("cus");
    const people = await consoleAs((await testTenant()).key);
    expect((await people.get("/console")).text).toContain('href="/console/grants"');

    const made = await people.post("/console/grants", {
      tools: tool,
      subject_field: "customer_id",
      subject_value: customer,
      field: "amount",
      per_call_max: "50",
      total_max: "100",
      expires_at: inAnHourLocal(),
      reason: "goodwill refunds",
    });
    expect(made.status).toBe(303);
    const id = /\/console\/grants\/(gr_[0-9A-Z]{26})/.exec(made.headers.get("Location") ?? "")?.[1];
    expect(id).toBeDefined();
    expect(await shown(id!)).toMatchObject({
      state: "live",
      tools: [tool],
      subject: { "context.customer_id": customer },
      total_max: 100,
      created_via: "console",
    });

    const runId = await newRun(tool, customer);
    const used = await one(runId, call(tool, 30));
    expect(used).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);

    const list = await people.get("/console/grants");
    expect(list.text).toContain(`data-grant="${id}"`);
    expect(list.text).toContain("1 calls, 30 of 100 (70 left)");
    const page = await people.get(`/console/grants/${id}`);
    expect(page.text).toContain(`data-use="${used.operation_id}"`);
    expect(page.text).toContain(`href="/console/operations/${used.operation_id}"`);
    expect(page.text).toContain('data-chain="ok"');
    expect(page.text).toContain(`use — ${used.operation_id}`);
    expect(page.text).toContain(`action="/console/grants/${id}/revoke"`);
    expect(page.text).not.toContain(`action="/console/grants/${id}/confirm"`);

    expect((await people.post(`/console/grants/${id}/revoke`, {})).status).toBe(303);
    const after = await people.get(`/console/grants/${id}`);
    expect(after.text).toContain(`Grant ${id} is revoked`);
    expect(after.text).not.toContain(`action="/console/grants/${id}/revoke"`);
    expect(await shown(id!)).toMatchObject({ state: "revoked" });
    expect(await one(runId, call(tool, 10), 0)).toMatchObject({ status: "awaiting_approval" });
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("bad input makes no grant: no bound in all, a past expiry, no CSRF token, a read-only key", async () => {
    const up = upstream();
    const tool = await registered(up.url);
    const people = await consoleAs((await testTenant()).key);
    const before = await grantIds();
    const common = { tools: tool, expires_at: inAnHourLocal(), reason: unique("r") };
    await people.post("/console/grants", { ...common, field: "amount", per_call_max: "5" });
    expect((await people.get("/console/grants")).text).toContain("No grant was made");
    await people.post("/console/grants", { ...common, count: "3", expires_at: "2001-01-01T00:00" });
    expect((await people.get("/console/grants")).text).toContain("must be in the future");
    const noToken = await people.post("/console/grants", { ...common, count: "3" }, false);
    expect(noToken.status).toBe(403);
    const reader = await newTenant(["runs:read"]);
    const readOnly = await consoleAs(reader.key);
    const seen = await readOnly.get("/console/grants");
    expect(seen.status).toBe(200);
    expect(seen.text).not.toContain('action="/console/grants"');
    expect((await readOnly.post("/console/grants", { ...common, count: "3" })).status).toBe(403);
    expect(await grantIds()).toEqual(before);
    expect(await grantIds(reader.key)).toEqual([]);
  });

  it("four eyes: the proposer's Confirm changes nothing; another person's makes the grant live", async () => {
    const alice = await newTenant(ALL_SCOPES);
    const admin = { Authorization: `Bearer ${ADMIN}` };
    const bobKey = await api(
      "POST",
      `/v1/admin/tenants/${alice.tenantId}/keys`,
      { name: "bob", scopes: ALL_SCOPES },
      admin,
    );
    await api(
      "PUT",
      `/v1/admin/tenants/${alice.tenantId}/settings`,
      { grant_four_eyes: true },
      admin,
    );
    const up = upstream();
    const tool = await registered(up.url, {}, alice.key);
    const id = await grant(
      { tools: [tool], subject: "any", count: 3, expires_at: inAnHour(), reason: "r" },
      alice.key,
    );
    const asAlice = await consoleAs(alice.key);
    const proposed = await asAlice.get(`/console/grants/${id}`);
    expect(proposed.text).toContain(`action="/console/grants/${id}/confirm"`);
    await asAlice.post(`/console/grants/${id}/confirm`, {});
    expect((await asAlice.get(`/console/grants/${id}`)).text).toContain("Not confirmed");
    expect(await shown(id, alice.key)).toMatchObject({ state: "proposed", confirmed_by: null });

    const asBob = await consoleAs(bobKey.body.key);
    await asBob.post(`/console/grants/${id}/confirm`, {});
    expect((await asBob.get(`/console/grants/${id}`)).text).toContain("confirmed by bob");
    expect(await shown(id, alice.key)).toMatchObject({ state: "live", confirmed_by: "bob" });
  });
});
