// /v1/tripwires (issue 34 item 2): an automatic stop. PUT stores a tripwire (domain/tripwire.ts,
// strict: a misspelt field is refused, nothing stored) and tells the tenant's runs to drop their
// facts snapshot; DELETE removes it (a freeze it made stays until lifted at /v1/freezes); GET lists
// them. Scope freezes:write (GET also runs:read). A tenant sees and deletes only its own.
import { Hono } from "hono";
import { TripwireBody, tripwireOf } from "../domain/tripwire.ts";
import { err, ok } from "../domain/result.ts";
import { principalName, requireScope, type AppEnv } from "./auth.ts";
import { FREEZE_ID } from "./freezes-routes.ts";
import { checkId, readJson, tenantStub, unwrap } from "./request.ts";

export const tripwireRoutes = new Hono<AppEnv>()
  .put("/:id", async (c) => {
    const id = checkId(c.req.param("id"), FREEZE_ID, "tripwire");
    const tenantId = requireScope(c, "freezes:write");
    const body = await readJson(c, TripwireBody);
    const wire = tripwireOf(id, body, principalName(c), Date.now());
    const { created, ...answer } = await tenantStub(c, tenantId).putTripwire(tenantId, wire);
    return c.json(answer, created ? 201 : 200);
  })
  .delete("/:id", async (c) => {
    const id = checkId(c.req.param("id"), FREEZE_ID, "tripwire");
    const tenantId = requireScope(c, "freezes:write");
    const gone = await tenantStub(c, tenantId).deleteTripwire(tenantId, id);
    return c.json(
      unwrap(gone ? ok(gone) : err({ code: "not_found" as const, detail: `no tripwire ${id}` })),
    );
  })
  .get("/", async (c) => {
    const principal = c.get("principal");
    const reads = principal.kind === "key" && principal.scopes.includes("runs:read");
    const tenantId = reads ? principal.tenantId : requireScope(c, "freezes:write");
    return c.json(await tenantStub(c, tenantId).listTripwires());
  });
