// /v1/delegations (issue 35): delegation while away. A person (the verified decider: Access email,
// else the key's name) names one delegate for a period — PUT replaces theirs, DELETE ends it, GET
// lists the tenant's. Inside the period the delegate may vote on routed approvals as them
// (`on_behalf_of` on approve/reject): the vote counts as the delegator's, recorded with who cast it.
// Scope approvals:decide. The delegator's key scopes are kept with it: a route's groups by scope
// judge a delegated vote by the delegator's scopes, never the delegate's.
import { Hono } from "hono";
import { z } from "zod";
import { decider, requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readJson, tenantStub } from "./request.ts";

const MAX_DELEGATION_MS = 90 * 24 * 60 * 60_000;

export const PutDelegation = z.strictObject({
  to: z.string().min(1).max(256),
  /** ISO 8601; default now. */
  starts_at: z.iso.datetime({ offset: true }).optional(),
  ends_at: z.iso.datetime({ offset: true }),
});

export const delegationRoutes = new Hono<AppEnv>()
  .put("/", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    const body = await readJson(c, PutDelegation);
    const by = await decider(c, undefined);
    const nowMs = Date.now();
    const startsMs = body.starts_at ? Date.parse(body.starts_at) : nowMs;
    const endsMs = Date.parse(body.ends_at);
    const refuse = (detail: string) => {
      throw new ApiProblem({ code: "invalid_request", detail: `${detail}; nothing was stored` });
    };
    if (body.to === by.id) refuse("a delegate is someone else than the delegator");
    if (endsMs <= Math.max(nowMs, startsMs))
      refuse("ends_at must be after now and after starts_at");
    if (endsMs - nowMs > MAX_DELEGATION_MS) refuse("a delegation lasts at most 90 days");
    const delegation = {
      from: by.id,
      to: body.to,
      starts_at_ms: startsMs,
      ends_at_ms: endsMs,
      scopes: by.scopes,
      created_at_ms: nowMs,
    };
    await tenantStub(c, tenantId).putDelegation(delegation);
    return c.json(delegation);
  })
  .delete("/", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    const by = await decider(c, undefined);
    return c.json({ from: by.id, ended: await tenantStub(c, tenantId).endDelegation(by.id) });
  })
  .get("/", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    return c.json({ delegations: await tenantStub(c, tenantId).listDelegations() });
  });
