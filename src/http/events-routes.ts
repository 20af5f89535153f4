// /v1/events: the tenant's event feed (issue 18), oldest first after a cursor (`since` = the last
// event id read, or an ISO time), filtered by type; the same redacted events webhooks carry.
// Stored as the queue consumer hands them over, so eventually consistent (within seconds).
import { Hono } from "hono";
import { requireScope, type AppEnv } from "./auth.ts";
import { readQuery, tenantStub, unwrap } from "./request.ts";
import { EventsQuery } from "./schemas.ts";

export const eventRoutes = new Hono<AppEnv>().get("/", async (c) => {
  const tenantId = requireScope(c, "events:read");
  const { since, type, limit } = readQuery(c, EventsQuery);
  const from =
    since === undefined
      ? null
      : since.startsWith("evt_")
        ? { afterId: since }
        : { atMs: Date.parse(since) };
  return c.json(
    unwrap(await tenantStub(c, tenantId).listEvents({ since: from, type: type ?? null, limit })),
  );
});
