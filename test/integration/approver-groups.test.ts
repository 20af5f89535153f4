// Approver groups by attribute (issue 35 item 3), through the public API with Access JWTs signed by
// a test team's key and counted at the upstream: a route's group named by a claim of the verified
// token (`groups`, a custom claim) or by the email's domain; a person without the attribute, an API
// key (never verified by Access) and a key named like a member of the domain are typed 403s with
// nothing sent.
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  api,
  manifest,
  operation,
  testTenant,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { ACCESS, accessTeam } from "../support/access.ts";

const team = accessTeam();

async function routedCall(group: Record<string, unknown>, quorum = 1) {
  await testTenant();
  const up = upstream();
  const approval = { mode: "always", quorum, route: [{ group }] };
  const tool = manifest({ url: up.url, risk: "irreversible_write", approval });
  const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
  expect(put.status, JSON.stringify(put.body)).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: [tool.name] });
  const res = await turn(
    run.body.run_id,
    [{ id: unique("call"), name: tool.name, arguments: { amount: 100, currency: "usd" } }],
    0,
  );
  expect(res.body.results[0].status).toBe("awaiting_approval");
  return { up, op: res.body.results[0].operation_id as string };
}

const approveAs = async (op: string, claims: Parameters<typeof team.token>[0]) =>
  api("POST", `/v1/operations/${op}/approve`, {}, { [ACCESS]: await team.token(claims) });

describe("approver groups by Access attribute", { timeout: 30_000 }, () => {
  it("a `groups` claim: a person in finance approves and it runs once; one in sales, or a key without Access, is 403 with nothing sent", async () => {
    const { up, op } = await routedCall({ name: "finance", claims: { groups: ["finance"] } });
    const sales = await approveAs(op, { email: "sam@example.com", extra: { groups: ["sales"] } });
    expect(sales).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    const key = await api("POST", `/v1/operations/${op}/approve`, {});
    expect(key).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    expect((await operation(op)).body.phase).toBe("awaiting_approval");
    expect((await up.state()).requests).toHaveLength(0);
    // The inbox says who may vote: the group by its claim.
    const item = (await api("GET", "/v1/approvals?state=pending")).body.items.find(
      (i: any) => i.operation_id === op,
    );
    expect(item.route.may_vote).toEqual([
      { group: "finance", scopes: [], members: [], claims: { groups: ["finance"] } },
    ]);
    const fin = await approveAs(op, {
      email: "fiona@example.com",
      extra: { groups: ["staff", "finance"] },
    });
    expect(fin.status).toBe(200);
    expect(fin.body.approval).toMatchObject({
      state: "approved",
      decided_by: "fiona@example.com",
      decided_via: "access",
    });
    await operation(op, 5);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a custom claim (an IdP's OIDC claim under `custom`), and 2-of-2 by attribute: distinct people each count once", async () => {
    const group = { name: "treasury", claims: { "custom.department": ["treasury"] } };
    const { up, op } = await routedCall(group, 2);
    const custom = { custom: { department: "treasury" } };
    // The same claim at the top level is another claim: not in the group.
    const top = await approveAs(op, {
      email: "tom@example.com",
      extra: { department: "treasury" },
    });
    expect(top).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    const first = await approveAs(op, { email: "tia@example.com", extra: custom });
    expect(first.body).toMatchObject({ phase: "awaiting_approval" });
    const again = await approveAs(op, { email: "tia@example.com", extra: custom });
    expect(again.body.approval.route.votes).toHaveLength(1);
    expect((await up.state()).requests).toHaveLength(0);
    const second = await approveAs(op, { email: "ted@example.com", extra: custom });
    expect(second.body.approval.state).toBe("approved");
    await operation(op, 5);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("an email domain: a verified address of the domain approves; another domain, or a key NAMED like one, is 403", async () => {
    const { up, op } = await routedCall({ name: "ops", email_domains: ["ops.example.com"] });
    const other = await approveAs(op, { email: "olga@example.com" });
    expect(other).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    const { tenantId } = await testTenant();
    const named = await api(
      "POST",
      `/v1/admin/tenants/${tenantId}/keys`,
      { name: "oscar@ops.example.com", scopes: ["approvals:decide"] },
      { Authorization: `Bearer ${ADMIN}` },
    );
    const spoof = await api(
      "POST",
      `/v1/operations/${op}/approve`,
      {},
      { Authorization: `Bearer ${named.body.key}` },
    );
    expect(spoof).toMatchObject({ status: 403, body: { code: "not_an_approver" } });
    expect((await up.state()).requests).toHaveLength(0);
    const ok = await approveAs(op, { email: "Otto@OPS.example.com" });
    expect(ok.body.approval).toMatchObject({ state: "approved", decided_via: "access" });
    await operation(op, 5);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a group by attribute is checked at PUT: a malformed claim name or domain, or an empty group, is 422", async () => {
    await testTenant();
    const up = upstream();
    for (const group of [
      { name: "bad", claims: { "groups;drop": ["x"] } },
      { name: "bad", email_domains: ["not a domain"] },
      { name: "bad", claims: { groups: [] } },
      { name: "empty" },
    ]) {
      const tool = manifest({
        url: up.url,
        risk: "irreversible_write",
        approval: { mode: "always", route: [{ group }] },
      });
      const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
      expect(put.status, JSON.stringify(group)).toBe(422);
    }
  });
});
