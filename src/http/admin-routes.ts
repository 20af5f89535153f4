// /v1/admin: tenants and their API keys, with the deployment admin token only.
import { Hono } from "hono";
import { SQL_ROWS } from "../durable/store/sql-store.ts";
import { indexStub } from "../durable/stubs.ts";
import { ulid } from "ulid";
import { sealApiKey } from "./api-keys.ts";
import { requireAdminToken, signingKey, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { CreateTenant, IssueKey } from "./schemas.ts";
import { checkId, readJson, tenantStub, unwrap } from "./request.ts";
import { isDevelopment } from "../config.ts";

const TENANT_ID = /^ten_[0-9A-Z]{26}$/;

export const adminRoutes = new Hono<AppEnv>()
  .use(async (c, next) => {
    requireAdminToken(c);
    await next();
  })
  // For the benchmark (rows read and written per operation): this isolate's SQLite row counters.
  // Development only: in production an isolate's counters describe an arbitrary slice of tenants.
  .get("/stats", (c) => {
    if (!isDevelopment(c.env)) throw new ApiProblem({ code: "not_found", detail: "no such route" });
    return c.json({ sql_rows: { read: SQL_ROWS.read, written: SQL_ROWS.written } });
  })
  .post("/tenants", async (c) => {
    const { name } = await readJson(c, CreateTenant);
    const tenantId = `ten_${ulid()}`;
    return c.json(unwrap(await tenantStub(c, tenantId).init(tenantId, name)), 201);
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
  // Rebuild the tenant index from the objects (issue 20; `npm run reindex`): its rows go, then
  // every run it knows and their operations are read again.
  .post("/tenants/:tenant_id/reindex", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    return c.json(await indexStub(c.env, tenantId).rebuild(tenantId));
  })
  .delete("/tenants/:tenant_id/keys/:key_id", async (c) => {
    const tenantId = checkId(c.req.param("tenant_id"), TENANT_ID, "tenant");
    unwrap(await tenantStub(c, tenantId).revokeKey(c.req.param("key_id")));
    return c.body(null, 204);
  });
