// /v1/runs: create a run (snapshotting its offered tools), post and poll turns, read the trace.
import { Hono } from "hono";
import { ulid } from "ulid";
import { z } from "zod";
import { parseNativeTurn } from "../providers/native.ts";
import { requireRunAccess, requireScope, signRunToken, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { checkId, DEFAULT_TURN_WAIT_MS, readJson, RUN_ID, runStub, tenantStub, TURN_ID, unwrap, waitMs } from "./request.ts";
import type { TurnReply } from "../durable/run-object.ts";

const RUN_TTL_MS = 24 * 60 * 60_000;

const CreateRun = z.object({
  user: z.object({ id: z.string().min(1).max(256), scopes: z.array(z.string()).default([]) }),
  tools: z.array(z.string()).min(1).max(128),
  context: z.record(z.string(), z.unknown()).default({}),
  budgets: z.object({ max_turns: z.number().int().positive(), max_tool_calls: z.number().int().positive(), max_duration_ms: z.number().int().positive(), max_cost: z.number().positive() }).partial().default({}),
});

export const runRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const tenantId = requireScope(c, "runs:write");
    const body = await readJson(c, CreateRun);
    const sources = unwrap(await tenantStub(c, tenantId).sources([...new Set(body.tools)]));
    const runId = `run_${ulid()}`;
    const expiresAtMs = Date.now() + RUN_TTL_MS;
    const run = unwrap(await runStub(c, runId).create({ runId, tenantId, user: body.user, tools: sources, context: body.context, budgets: body.budgets, expiresAtMs }));
    return c.json({ run_id: runId, run_token: await signRunToken(c.env, tenantId, runId, expiresAtMs), expires_at: run.expires_at, tools: run.tools }, 201);
  })
  .get("/:run_id", async (c) => {
    const runId = checkId(c.req.param("run_id"), RUN_ID, "run");
    return c.json(unwrap(await runStub(c, runId).get(requireRunAccess(c, runId, "runs:read"))));
  })
  .post("/:run_id/turns", async (c) => {
    const runId = checkId(c.req.param("run_id"), RUN_ID, "run");
    const tenantId = requireRunAccess(c, runId, "runs:write");
    const format = c.req.query("format") ?? "native";
    if (format !== "native") throw new ApiProblem({ code: "invalid_request", detail: `unsupported format ${format}; this deployment speaks native` });
    const parsed = parseNativeTurn(await readJson(c, z.unknown()));
    if (!parsed.ok) throw new ApiProblem({ code: "invalid_request", detail: parsed.detail });
    const turn = unwrap(await runStub(c, runId).postTurn(tenantId, parsed.calls, waitMs(c, DEFAULT_TURN_WAIT_MS)));
    return turnResponse(c.req.url, runId, turn);
  })
  .get("/:run_id/turns/:turn_id", async (c) => {
    const runId = checkId(c.req.param("run_id"), RUN_ID, "run");
    const turnId = checkId(c.req.param("turn_id"), TURN_ID, "turn");
    const turn = unwrap(await runStub(c, runId).getTurn(requireRunAccess(c, runId, "runs:read"), turnId, waitMs(c, 0)));
    return turnResponse(c.req.url, runId, turn);
  })
  .get("/:run_id/trace", async (c) => {
    const runId = checkId(c.req.param("run_id"), RUN_ID, "run");
    return c.json(unwrap(await runStub(c, runId).traceFor(requireScope(c, "traces:read"))));
  });

function turnResponse(requestUrl: string, runId: string, turn: TurnReply): Response {
  const pollUrl = new URL(`/v1/runs/${runId}/turns/${turn.turn_id}`, requestUrl).toString();
  const body = { turn_id: turn.turn_id, status: turn.status, results: turn.results, ...(turn.status === "pending" ? { poll_url: pollUrl } : {}) };
  const headers: Record<string, string> = { "Content-Type": "application/json", "Toolgate-Rows-Written": String(turn.rowsWritten) };
  if (turn.status === "pending") headers["Location"] = pollUrl;
  return new Response(JSON.stringify(body), { status: turn.status === "settled" ? 200 : 202, headers });
}
