// Tenancy: every read and write is scoped by tenant, another tenant's ids are indistinguishable
// from missing ones (404), scopes gate each route, and revoked keys stop working at once.
import { describe, expect, it } from "vitest";
import { ADMIN, api, manifest, newTenant, setup, turn, upstream } from "../support/api.ts";

const as = (key: string) => ({ Authorization: `Bearer ${key}` });

describe("tenancy and keys", () => {
  it("another tenant's run, operation, trace, turn and tool are 404s", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    const { runId, name } = await setup(tool);
    const res = await turn(runId, [{ id: "c1", name, arguments: { amount: 3, currency: "usd" } }]);
    const operationId = res.body.results[0].operation_id as string;
    const other = await newTenant([
      "runs:write",
      "runs:read",
      "tools:write",
      "traces:read",
      "operations:resolve",
    ]);
    const checks = [
      await api("GET", `/v1/runs/${runId}`, undefined, as(other.key)),
      await api("GET", `/v1/runs/${runId}/trace`, undefined, as(other.key)),
      await api("GET", `/v1/runs/${runId}/turns/${res.body.turn_id}`, undefined, as(other.key)),
      await api(
        "POST",
        `/v1/runs/${runId}/turns`,
        { calls: [{ id: "c2", name, arguments: { amount: 4, currency: "usd" } }] },
        as(other.key),
      ),
      await api("GET", `/v1/operations/${operationId}`, undefined, as(other.key)),
      await api(
        "POST",
        `/v1/operations/${operationId}/resolve`,
        { outcome: "failed", reason: "x" },
        as(other.key),
      ),
      await api("GET", `/v1/tools/${name}`, undefined, as(other.key)),
      await api("POST", "/v1/runs", { user: { id: "u" }, tools: [name] }, as(other.key)),
    ];
    expect(checks.map((c) => c.status)).toEqual([404, 404, 404, 404, 404, 404, 404, 404]);
    expect(checks.every((c) => c.body.code === "not_found")).toBe(true);
    // A missing id answers exactly the same way.
    const missing = await api("GET", "/v1/operations/op_00000000000000000000000000000000");
    expect(missing.status).toBe(404);
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("403 for a missing scope; the admin token only administers", async () => {
    const readOnly = await newTenant(["runs:read"]);
    const up = upstream();
    const tool = manifest({ url: up.url });
    const put = await api("PUT", `/v1/tools/${tool.name}`, tool, as(readOnly.key));
    expect(put.status).toBe(403);
    expect(put.body).toMatchObject({
      code: "forbidden",
      detail: expect.stringContaining("tools:write"),
    });
    expect(
      (await api("POST", "/v1/runs", { user: { id: "u" }, tools: ["x"] }, as(readOnly.key))).status,
    ).toBe(403);
    expect((await api("GET", "/v1/tools", undefined, as(ADMIN))).status).toBe(403);
    expect((await api("POST", "/v1/admin/tenants", { name: "x" }, as(readOnly.key))).status).toBe(
      403,
    );
  });

  it("keys are shown once, work until revoked, then 401", async () => {
    const t = await newTenant(["tools:write"]);
    expect(t.key.startsWith(`tgk.${t.tenantId}.`)).toBe(true);
    expect((await api("GET", "/v1/tools", undefined, as(t.key))).status).toBe(200);
    const revoke = await api(
      "DELETE",
      `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`,
      undefined,
      as(ADMIN),
    );
    expect(revoke.status).toBe(204);
    expect((await api("GET", "/v1/tools", undefined, as(t.key))).status).toBe(401);
    expect(
      (await api("DELETE", `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`, undefined, as(ADMIN)))
        .status,
    ).toBe(404);
    const parts = t.key.split(".");
    parts[3] = "not-the-secret";
    const wrongSecret = parts.join(".");
    expect((await api("GET", "/v1/tools", undefined, as(wrongSecret))).status).toBe(401);
  });

  it("rejects bad admin input", async () => {
    expect((await api("POST", "/v1/admin/tenants", {}, as(ADMIN))).body.code).toBe(
      "invalid_request",
    );
    const t = await newTenant(["runs:read"]);
    const badScope = await api(
      "POST",
      `/v1/admin/tenants/${t.tenantId}/keys`,
      { name: "k", scopes: ["root"] },
      as(ADMIN),
    );
    expect(badScope.status).toBe(400);
    expect(
      (
        await api(
          "POST",
          "/v1/admin/tenants/ten_01M8WCZ1504KEP70F8BRJDTEY0/keys",
          { name: "k", scopes: ["runs:read"] },
          as(ADMIN),
        )
      ).status,
    ).toBe(404);
  });
});
