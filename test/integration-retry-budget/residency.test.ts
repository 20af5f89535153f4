// Data residency (issue 19 item 3) for the retry budget, which is on only in this project: an EU
// tenant's first attempts are counted by a RetryBudgetObject made through the EU namespace (its
// name begins with the tenant id, which carries the jurisdiction); a default tenant's is not. What
// is observed is the placement (durable/placement.ts's test-only observer): workerd does not
// implement jurisdictions, so the object is made in the development emulation's EU name space.
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { budgetKey } from "../../src/domain/retry-budget.ts";
import { observePlacements, type Placement } from "../../src/durable/placement.ts";
import { ADMIN, ALL_SCOPES, api, manifest, unique, upstream } from "../support/api.ts";

const upstreamBase = (env as unknown as { UPSTREAM_URL: string }).UPSTREAM_URL;
const admin = { Authorization: `Bearer ${ADMIN}` };

async function oneWrite(jurisdiction: string | null) {
  const created = await api(
    "POST",
    "/v1/admin/tenants",
    { name: unique("t"), jurisdiction },
    admin,
  );
  const tenantId = created.body.tenant_id as string;
  const issued = await api(
    "POST",
    `/v1/admin/tenants/${tenantId}/keys`,
    { name: "k", scopes: ALL_SCOPES },
    admin,
  );
  const auth = { Authorization: `Bearer ${issued.body.key as string}` };
  const up = upstream();
  const tool = manifest({ url: up.url });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name] }, auth);
  const turn = await api(
    "POST",
    `/v1/runs/${run.body.run_id}/turns?format=native`,
    { calls: [{ id: "c1", name: tool.name, arguments: { amount: 1, currency: "usd" } }] },
    { ...auth, Prefer: "wait=5" },
  );
  expect(turn.body.results[0]).toMatchObject({ status: "succeeded" });
  return tenantId;
}

let stop: (() => void) | null = null;
afterEach(() => stop?.());

describe("retry budget placement", () => {
  it("an EU tenant's retry budget is made through the EU namespace; a default tenant's through the default one", async () => {
    const seen: Placement[] = [];
    stop = observePlacements((p) => seen.push(p));
    const eu = await oneWrite("eu");
    const plain = await oneWrite(null);
    const budgets = seen.filter((p) => p.binding === "BUDGETS");
    expect(budgets.map((p) => [p.name, p.jurisdiction, p.via])).toEqual([
      [budgetKey(eu, upstreamBase), "eu", "emulated"],
      [budgetKey(plain, upstreamBase), null, "default"],
    ]);
  }, 30_000);
});
