// /v1/admin: tenants and their API keys, with the deployment admin token only.
import { Hono } from "hono";
import { SQL_ROWS } from "../durable/store/sql-store.ts";
import { allRpcCounts } from "../durable/rpc-model.ts";
import { EVENT_QUEUES, eventQueuesBound } from "../durable/placement.ts";
import { indexStub } from "../durable/stubs.ts";
import { ulid } from "ulid";
import { sealApiKey } from "./api-keys.ts";
import { requireAdminToken, signingKey, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { CreateTenant, IssueKey, TenantSettings } from "./schemas.ts";
import { checkId, readJson, tenantStub, unwrap } from "./request.ts";
import { isDevelopment } from "../config.ts";
import { show } from "../domain/invalid-input.ts";
import {
  idPrefix,
  isJurisdiction,
  JURISDICTIONS,
  TENANT_ID,
  type Jurisdiction,
} from "../domain/jurisdiction.ts";

export const adminRoutes = new Hono<AppEnv>()
  .use(async (c, next) => {
    requireAdminToken(c);
    await next();
  })
  // For the benchmark (rows read and written per operation): this isolate's SQLite row counters.
  // Development only: in production an isolate's counters describe an arbitrary slice of tenants.
  .get("/stats", (c) => {
    if (!isDevelopment(c.env)) throw new ApiProblem({ code: "not_found", detail: "no such route" });
    return c.json({
      sql_rows: { read: SQL_ROWS.read, written: SQL_ROWS.written },
      // By "Class.method" (durable/rpc-model.ts): e.g. the bench's TenantObject RPCs per new write.
      rpc_calls: allRpcCounts(),
    });
  })
  .post("/tenants", async (c) => {
    const { name, jurisdiction = null } = await readJson(c, CreateTenant);
    if (jurisdiction !== null && !isJurisdiction(jurisdiction))
      throw new ApiProblem({
        code: "unsupported_jurisdiction",
        detail: `jurisdiction ${show(jurisdiction)} is not one of ${JURISDICTIONS.map(show).join(", ")} (or left out for none); nothing was created`,
      });
    // Its events must have a queue in the jurisdiction too (durable/placement.ts EVENT_QUEUES): a
    // deployment without one refuses the tenant rather than send its events anywhere else.
    if (jurisdiction !== null && !eventQueuesBound(c.env, jurisdiction))
      throw new ApiProblem({
        code: "unsupported_jurisdiction",
        detail: `this deployment has no events queues in "${jurisdiction}" (${EVENT_QUEUES[jurisdiction].events} and ${EVENT_QUEUES[jurisdiction].deadLetters} in wrangler.toml, created with --jurisdiction ${jurisdiction}): its events would have to leave it; nothing was created`,
      });
    // The id carries the jurisdiction (ten_eu_…): every object of the tenant is found, and made,
    // there from its id alone (durable/placement.ts), with no lookup on any request's path.
    const placed: Jurisdiction | null = jurisdiction;
    const tenantId = `${idPrefix("ten", placed)}${ulid()}`;
    const created = unwrap(await tenantStub(c, tenantId).init(tenantId, name));
    return c.json({ ...created, jurisdiction: placed }, 201);
  })
  .post("/tenants/:tenant_id/keys", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    const { name, scopes } = await readJson(c, IssueKey);
    // Before the key exists: a deployment without a signing key cannot issue keys it could check.
    const signing = signingKey(c.env);
    const issued = unwrap(
      await tenantStub(c, tenantId).issueKey(tenantId, name, [...new Set(scopes)]),
    );
    // The edge's tag lets the Worker refuse made-up keys without waking the tenant (api-keys.ts).
    const key = await sealApiKey(signing, tenantId, issued.key_id, issued.key);
    return c.json({ ...issued, key }, 201);
  })
  // Rebuild the tenant index from the objects (issue 20; `npm run reindex`): every run of the
  // tenant's list and of the index is read again and its rows replaced in place (never emptied
  // first). Each call takes one step: `state: "running"` until every run was read (the index's
  // alarm goes on by itself; calling again takes another step).
  .post("/tenants/:tenant_id/reindex", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    return c.json(await indexStub(c.env, tenantId).rebuild(tenantId));
  })
  // The tenant's settings (issue 35): `grant_four_eyes` — a standing grant is made proposed and a
  // second person confirms it. Set by the deployment's admin, so no single tenant key can switch
  // off the check it is subject to.
  .get("/tenants/:tenant_id/settings", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    return c.json(unwrap(await tenantStub(c, tenantId).grantSettings()));
  })
  .put("/tenants/:tenant_id/settings", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    const settings = await readJson(c, TenantSettings);
    return c.json(unwrap(await tenantStub(c, tenantId).putGrantSettings(settings)));
  })
  .delete("/tenants/:tenant_id/keys/:key_id", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    unwrap(await tenantStub(c, tenantId).revokeKey(c.req.param("key_id")));
    return c.body(null, 204);
  });
