// /v1/grants (issue 35 item 1): standing grants. POST stores one (domain/grant.ts, strict: a
// misspelt field is refused, nothing stored) made by the deciding person (auth.ts `decider`: the
// Access identity, else the key's name — as approvals record it) and tells the tenant's runs to
// drop their facts snapshot; GET lists them; GET /{id} shows one with each use; DELETE revokes it
// (every call not yet sent that relied on it asks a person). Under the tenant's four eyes
// (`grant_four_eyes`, set by the deployment admin) POST stores it proposed and POST /{id}/confirm
// by another person makes it live. Scope approvals:decide (GET also runs:read). A tenant sees,
// uses and revokes only its own.
import { Hono } from "hono";
import { ulid } from "ulid";
import { GRANT_ID, GrantBody, grantOf } from "../domain/grant.ts";
import { err, ok } from "../domain/result.ts";
import { decider, requireScope, type AppEnv } from "./auth.ts";
import { checkId, readJson, tenantStub, unwrap } from "./request.ts";
import type { Context } from "hono";

const noGrant = (id: string) => err({ code: "not_found" as const, detail: `no grant ${id}` });

/** A reader: approvals:decide, or runs:read (as freezes and tripwires). */
function reader(c: Context<AppEnv>): string {
  const principal = c.get("principal");
  const reads = principal.kind === "key" && principal.scopes.includes("runs:read");
  return reads ? principal.tenantId : requireScope(c, "approvals:decide");
}

export const grantRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    const body = await readJson(c, GrantBody);
    const by = await decider(c, undefined);
    const grant = unwrap(grantOf(`gr_${ulid()}`, body, by, Date.now()));
    return c.json(await tenantStub(c, tenantId).createGrant(tenantId, grant), 201);
  })
  .post("/:id/confirm", async (c) => {
    const id = checkId(c.req.param("id"), GRANT_ID, "grant");
    const tenantId = requireScope(c, "approvals:decide");
    const by = await decider(c, undefined);
    return c.json(unwrap(await tenantStub(c, tenantId).confirmGrant(tenantId, id, by.id)));
  })
  .delete("/:id", async (c) => {
    const id = checkId(c.req.param("id"), GRANT_ID, "grant");
    const tenantId = requireScope(c, "approvals:decide");
    const by = await decider(c, undefined);
    const revoked = await tenantStub(c, tenantId).revokeGrant(tenantId, id, by.id);
    return c.json(unwrap(revoked ? ok(revoked) : noGrant(id)));
  })
  .get("/:id", async (c) => {
    const id = checkId(c.req.param("id"), GRANT_ID, "grant");
    const tenantId = reader(c);
    const shown = await tenantStub(c, tenantId).showGrant(tenantId, id);
    return c.json(unwrap(shown ? ok(shown) : noGrant(id)));
  })
  .get("/", async (c) => c.json(await tenantStub(c, reader(c)).listGrants()));
