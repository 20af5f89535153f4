// /v1/tools: the tenant's HTTP tool manifests.
import { Hono } from "hono";
import { z } from "zod";
import { requireScope, type AppEnv } from "./auth.ts";
import { readJson, tenantStub, unwrap } from "./request.ts";

export const toolRoutes = new Hono<AppEnv>()
  .put("/:name", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    const manifest = await readJson(c, z.record(z.string(), z.unknown()));
    const saved = unwrap(await tenantStub(c, tenantId).putTool(c.req.param("name"), manifest));
    const { created, ...record } = saved;
    return c.json(record, created ? 201 : 200);
  })
  .get("/", async (c) =>
    c.json({ tools: await tenantStub(c, requireScope(c, "tools:write")).listTools() }),
  )
  .get("/:name", async (c) =>
    c.json(
      unwrap(await tenantStub(c, requireScope(c, "tools:write")).getTool(c.req.param("name"))),
    ),
  )
  .delete("/:name", async (c) => {
    unwrap(await tenantStub(c, requireScope(c, "tools:write")).deleteTool(c.req.param("name")));
    return c.body(null, 204);
  });
