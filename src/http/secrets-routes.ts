// /v1/secrets: the tenant's upstream credentials, write-only. A value goes in once and never comes
// back out: responses carry the name, a keyed fingerprint (to tell two values apart) and times.
import { Hono } from "hono";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readJson, tenantStub, unwrap } from "./request.ts";
import { PutSecret, SecretName } from "./schemas.ts";

const secretName = (name: string | undefined) => {
  const parsed = SecretName.safeParse(name);
  if (!parsed.success)
    throw new ApiProblem({ code: "invalid_request", detail: parsed.error.issues[0]!.message });
  return parsed.data;
};

export const secretRoutes = new Hono<AppEnv>()
  .put("/:name", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    const name = secretName(c.req.param("name"));
    const { value } = await readJson(c, PutSecret);
    const { created, ...record } = unwrap(
      await tenantStub(c, tenantId).putSecret(tenantId, name, value),
    );
    return c.json(record, created ? 201 : 200);
  })
  .get("/", async (c) =>
    c.json({ secrets: await tenantStub(c, requireScope(c, "secrets:write")).listSecrets() }),
  )
  .delete("/:name", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    unwrap(await tenantStub(c, tenantId).deleteSecret(secretName(c.req.param("name"))));
    return c.body(null, 204);
  });
