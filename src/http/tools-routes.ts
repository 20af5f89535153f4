// /v1/tools: the tenant's HTTP tool manifests, and POST /v1/tools/{name}/verify: does the
// upstream really deduplicate by the tool's idempotency header? (tools/verify.ts sends the checks
// from this Worker; the tenant stores the verdict only if the tool still has the checked settings.)
// A PUT or DELETE that would break the tenant's Cedar policy set is refused (422
// tool_breaks_policy_set) unless `?force=1`, which stores it and marks the set invalid.
import { Hono } from "hono";
import { ulid } from "ulid";
import { z } from "zod";
import { hostPolicy } from "../config.ts";
import { prepareVerification, runVerification, VerifyTool } from "../tools/verify.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { forced, readJson, tenantStub, unwrap } from "./request.ts";

export const toolRoutes = new Hono<AppEnv>()
  .put("/:name", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    const force = forced(c);
    const manifest = await readJson(c, z.record(z.string(), z.unknown()));
    const stub = tenantStub(c, tenantId);
    const saved = unwrap(await stub.putTool(c.req.param("name"), manifest, force));
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
    const stub = tenantStub(c, requireScope(c, "tools:write"));
    const { warnings } = unwrap(await stub.deleteTool(c.req.param("name"), forced(c)));
    // A forced delete that marked the Cedar set invalid says so in its answer, as the forced PUT does.
    return warnings.length > 0 ? c.json({ deleted: true, warnings }, 200) : c.body(null, 204);
  })
  .post("/:name/verify", async (c) => {
    const tenantId = requireScope(c, "tools:write");
    const body = await readJson(c, VerifyTool);
    const stub = tenantStub(c, tenantId);
    const tool = unwrap(await stub.getTool(c.req.param("name")));
    // Everything is checked before the first byte goes upstream: tool, base_url, arguments, secrets.
    const principal = c.get("principal");
    const mayDecide = principal.kind === "key" && principal.scopes.includes("approvals:decide");
    const prepared = unwrap(
      await prepareVerification(tool.manifest, body, hostPolicy(c.env), mayDecide),
    );
    const secrets = unwrap(await stub.secretsFor(tenantId, prepared.spec.secretNames));
    const verification = await runVerification(
      prepared,
      secrets,
      () => `tgv_${ulid().toLowerCase()}`,
      () => new Date().toISOString(),
    );
    return c.json({
      name: tool.name,
      verification: unwrap(await stub.recordVerification(tool.name, verification)),
    });
  });
