// /v1/policies: the tenant's Cedar policy set (issue 21 part 2). PUT replaces it whole after Cedar
// validated it against the schema generated from the tenant's tools (422 `invalid_policy` with
// Cedar's message otherwise); GET shows it with its version, that schema and whether a forced tool
// change marked it invalid (every call refused until it is PUT again); DELETE removes it. No set:
// every call is decided as before (scopes, limits, approval).
import { Hono } from "hono";
import { z } from "zod";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readJson, tenantStub, unwrap } from "./request.ts";

export const PutPolicies = z.strictObject({
  /** Cedar policy text; `@id("…")` names a policy in decisions, traces and refusals. */
  policies: z
    .string()
    .min(1)
    .max(64 * 1024),
});

export const policyRoutes = new Hono<AppEnv>()
  .put("/", async (c) => {
    const tenantId = requireScope(c, "policies:write");
    const { policies } = await readJson(c, PutPolicies);
    const { created, ...record } = unwrap(await tenantStub(c, tenantId).putPolicies(policies));
    return c.json(record, created ? 201 : 200);
  })
  .get("/", async (c) => {
    const record = await tenantStub(c, requireScope(c, "policies:write")).getPolicies();
    if (!record) throw new ApiProblem({ code: "not_found", detail: "no policy set" });
    return c.json(record);
  })
  .delete("/", async (c) => {
    unwrap(await tenantStub(c, requireScope(c, "policies:write")).deletePolicies());
    return c.body(null, 204);
  });
