// /v1/limits/{name}/{subject}: how much of a limit across runs (issue 21) a subject has used in
// its rolling window — held reservations (applied, unknown or not yet sent), what remains, and
// when the oldest can leave. The subject is named with its kind (`context.customer_id:cus_1`,
// `user:u1`, `tenant`: audit N7). Read-only; a limit never reserved is "not found".
import { Hono } from "hono";
import { SUBJECT_KEY } from "../domain/limit/claims.ts";
import { limitStub } from "../durable/stubs.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { unwrap } from "./request.ts";

const NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

export const limitRoutes = new Hono<AppEnv>().get("/:name/:subject", async (c) => {
  const tenantId = requireScope(c, "runs:read");
  const name = c.req.param("name");
  const subject = c.req.param("subject");
  if (!NAME.test(name) || subject.length > 512)
    throw new ApiProblem({ code: "not_found", detail: "no such limit" });
  if (!SUBJECT_KEY.test(subject))
    throw new ApiProblem({
      code: "not_found",
      detail: `no such limit subject: a subject is named with its kind, as context.<field>:<value> (e.g. context.customer_id:cus_1), user:<user id> or tenant`,
    });
  return c.json(unwrap(await limitStub(c.env, tenantId, name, subject).usage(tenantId)));
});
