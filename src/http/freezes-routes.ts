// /v1/freezes (issue 34): an operator's kill switch. PUT stores a freeze (domain/freeze.ts, strict:
// a misspelt field is refused), tells the tenant's runs to drop their facts snapshot and answers how
// many were told; DELETE lifts it and its held operations continue, a batch at a time; GET lists
// the freezes that apply now with the tenant's chain of freezes and lifts, checked. Scope
// freezes:write (GET also runs:read). A tenant sees and lifts only its own.
import { Hono } from "hono";
import { FreezeBody, freezeOf } from "../domain/freeze.ts";
import { principalName, requireScope, type AppEnv } from "./auth.ts";
import { checkId, readJson, tenantStub, unwrap } from "./request.ts";
import { err, ok } from "../domain/result.ts";

/** A freeze id: what a person or a tripwire names it. */
export const FREEZE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export const freezeRoutes = new Hono<AppEnv>()
  .put("/:id", async (c) => {
    const id = checkId(c.req.param("id"), FREEZE_ID, "freeze");
    const tenantId = requireScope(c, "freezes:write");
    const body = await readJson(c, FreezeBody);
    const freeze = unwrap(freezeOf(id, body, principalName(c), Date.now()));
    const { created, ...answer } = await tenantStub(c, tenantId).putFreeze(tenantId, freeze);
    return c.json(answer, created ? 201 : 200);
  })
  .delete("/:id", async (c) => {
    const id = checkId(c.req.param("id"), FREEZE_ID, "freeze");
    const tenantId = requireScope(c, "freezes:write");
    const lifted = await tenantStub(c, tenantId).deleteFreeze(tenantId, id, principalName(c));
    return c.json(
      unwrap(
        lifted
          ? ok(lifted)
          : err({ code: "not_found" as const, detail: `no freeze ${id} in force` }),
      ),
    );
  })
  .get("/", async (c) => {
    const principal = c.get("principal");
    const reads = principal.kind === "key" && principal.scopes.includes("runs:read");
    const tenantId = reads ? principal.tenantId : requireScope(c, "freezes:write");
    return c.json(await tenantStub(c, tenantId).listFreezes());
  });
