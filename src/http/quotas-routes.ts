// /v1/quotas (issue 34 item 4): quota shaping per (tenant, upstream origin) or per (user, tool) —
// a token bucket (`rate`, `burst`) and/or a concurrency cap — under the scope that guards the
// tenant's tool configuration (tools:write). PUT stores one by id (the strict schema of
// domain/quota/definition.ts: an unknown field is refused; a contradicting definition of the same
// key is `quota_conflict`, nothing stored); GET lists them; DELETE removes one. They reach existing
// runs with the tenant facts (within FACTS_MAX_AGE_MS), new runs at once.
import { Hono } from "hono";
import { QUOTA_ID, QuotaDefinition } from "../domain/quota/definition.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readJson, tenantStub, unwrap } from "./request.ts";

export const PutQuota = QuotaDefinition;

const idOf = (id: string) => {
  if (!QUOTA_ID.test(id))
    throw new ApiProblem({
      code: "invalid_request",
      detail:
        "a quota id is 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit",
    });
  return id;
};

export const quotaRoutes = new Hono<AppEnv>()
  .put("/:id", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    const id = idOf(c.req.param("id"));
    const definition = await readJson(c, PutQuota);
    const { created, ...record } = unwrap(await tenantStub(c, tenantId).putQuota(id, definition));
    return c.json(record, created ? 201 : 200);
  })
  .get("/", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    return c.json({ quotas: await tenantStub(c, tenantId).listQuotas() });
  })
  .delete("/:id", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    unwrap(await tenantStub(c, tenantId).deleteQuota(idOf(c.req.param("id"))));
    return c.body(null, 204);
  });
