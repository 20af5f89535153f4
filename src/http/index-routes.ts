// The tenant index's read routes (issue 20): GET /v1/runs, GET /v1/operations (filters, cursor
// pagination, newest first) and GET /v1/overview (queue counts, counts by status, per-tool rates
// and latency percentiles, calls per 5 minutes). Scope runs:read, like reading one run or one
// operation. Eventually consistent: the index is fed by the EVENTS queue within seconds.
import { Hono } from "hono";
import { indexStub } from "../durable/stubs.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readQuery } from "./request.ts";
import { OperationsQuery, OverviewQuery, RunsQuery } from "./schemas.ts";

const DAY_MS = 24 * 60 * 60_000;
const MAX_OVERVIEW_MS = 7 * DAY_MS;

/** since/until as milliseconds; until before since is refused. */
function times(query: { since?: string; until?: string }) {
  const since_ms = query.since ? Date.parse(query.since) : undefined;
  const until_ms = query.until ? Date.parse(query.until) : undefined;
  if (since_ms !== undefined && until_ms !== undefined && until_ms < since_ms)
    throw new ApiProblem({ code: "invalid_request", detail: "until is before since" });
  return {
    ...(since_ms !== undefined ? { since_ms } : {}),
    ...(until_ms !== undefined ? { until_ms } : {}),
  };
}

const badCursor = () =>
  new ApiProblem({ code: "invalid_request", detail: "cursor is not one this list gave" });

/** Only the fields that were given (RPC arguments are structured clones: no undefined noise). */
const defined = <T extends Record<string, unknown>>(value: T) =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;

export const indexRoutes = new Hono<AppEnv>()
  .get("/runs", async (c) => {
    const tenantId = requireScope(c, "runs:read");
    const { since, until, ...rest } = readQuery(c, RunsQuery);
    const page = await indexStub(c.env, tenantId).listRuns(
      defined({ ...rest, ...times({ since, until }) }),
    );
    if (!page) throw badCursor();
    return c.json({ runs: page.items, next_cursor: page.next_cursor });
  })
  .get("/operations", async (c) => {
    const tenantId = requireScope(c, "runs:read");
    const { since, until, ...rest } = readQuery(c, OperationsQuery);
    const page = await indexStub(c.env, tenantId).listOperations(
      defined({ ...rest, ...times({ since, until }) }),
    );
    if (!page) throw badCursor();
    return c.json({ operations: page.items, next_cursor: page.next_cursor });
  })
  .get("/overview", async (c) => {
    const tenantId = requireScope(c, "runs:read");
    const query = readQuery(c, OverviewQuery);
    const nowMs = Date.now();
    const sinceMs = query.since ? Date.parse(query.since) : nowMs - DAY_MS;
    if (sinceMs < nowMs - MAX_OVERVIEW_MS)
      throw new ApiProblem({ code: "invalid_request", detail: "since is at most 7 days ago" });
    return c.json(await indexStub(c.env, tenantId).overview(sinceMs));
  });
