// /v1/runs: create a run (snapshotting its offered tools), change its scopes and tools, cancel it,
// post and poll turns in any provider format, export its tools, read its trace.
import { Hono, type Context } from "hono";
import { ulid } from "ulid";
import { z } from "zod";
import { modelCost } from "../domain/pricing.ts";
import { modelPrices } from "../config.ts";
import { adapters, exportTools } from "../providers/index.ts";
import { ToolsFormat, TurnFormat } from "../providers/types.ts";
import type { RunView, TurnReply } from "../durable/run/contracts.ts";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import {
  decider,
  principalName,
  requireRunAccess,
  requireScope,
  signRunToken,
  type AppEnv,
} from "./auth.ts";
import { ApiProblem, problemResponse, prunedProblem } from "./problem.ts";
import { ApproveRollbackPlan, CancelRun, CreateRun, PatchRun } from "./schemas.ts";
import { idPrefix, jurisdictionOf } from "../domain/jurisdiction.ts";
import { dropNotify, runNotify } from "./run-notify.ts";
import type { RunEndpoint } from "../durable/tenant/run-endpoints.ts";
import { RUN_TTL_MS } from "../durable/tenant/runs.ts";
import {
  checkId,
  DEFAULT_TURN_WAIT_MS,
  readJson,
  readQuery,
  requestedWait,
  RUN_ID,
  runStub,
  tenantStub,
  TURN_ID,
  unwrap,
} from "./request.ts";

/**
 * The run a client's request_id names, per tenant: `run_` (`run_eu_` for a tenant in a jurisdiction)
 * and 26 Crockford base32 characters of SHA-256(purpose, tenant, request_id), the shape of every
 * run id. Another tenant's same request_id names another run.
 */
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
async function requestedRunId(tenantId: string, requestId: string): Promise<string> {
  const text = `toolgate/run-request/v1\n${tenantId}\n${requestId}`;
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)),
  );
  const body = Array.from(digest.subarray(0, 26), (byte) => CROCKFORD[byte & 31]).join("");
  return `${idPrefix("run", jurisdictionOf(tenantId))}${body}`;
}

/** The answer to POST /v1/runs, for a new run (201) and for the same request sent again (200). */
async function created(
  c: Context<AppEnv>,
  tenantId: string,
  stub: ReturnType<typeof runStub>,
  run: RunView,
  status: 200 | 201,
  /** notify.url: the run's endpoint and its secret, in the creating answer only. */
  notify: RunEndpoint | null = null,
) {
  const [definitions, warnings] = await Promise.all([
    stub.toolDefinitions(tenantId),
    stub.warnings(tenantId),
  ]);
  return c.json(
    {
      run_id: run.run_id,
      run_token: await signRunToken(c.env, tenantId, run.run_id, Date.parse(run.expires_at)),
      expires_at: run.expires_at,
      // What the run is, as created (a shadow run must be visibly one: newcomer report).
      mode: run.mode,
      jurisdiction: run.jurisdiction,
      tools: exportTools(unwrap(definitions), toolsFormat(c)),
      warnings: unwrap(warnings),
      ...(notify ? { notify } : {}),
    },
    status,
  );
}

export const runRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const tenantId = requireScope(c, "runs:write");
    const { request_id: requestId, ...body } = await readJson(c, CreateRun);
    // A request_id names this creation: a resend (lost response) lands on the same RunObject.
    const requestHash = requestId ? await sha256Hex(canonicalJson(body)) : null;
    // The run is made in its tenant's jurisdiction: its id carries the tenant's tag (run_eu_…).
    const runId = requestId
      ? await requestedRunId(tenantId, requestId)
      : `${idPrefix("run", jurisdictionOf(tenantId))}${ulid()}`;
    const stub = runStub(c, runId);
    const replay = async (notify: RunEndpoint | null = null) => {
      const earlier = unwrap(await stub.requested(tenantId, requestHash!));
      if (!earlier)
        throw new ApiProblem({
          code: "request_id_conflict",
          detail: "this request_id cannot be used for a run here; use a new request_id",
        });
      return created(c, tenantId, stub, earlier, 200, notify);
    };
    if (requestHash && unwrap(await stub.requested(tenantId, requestHash))) return replay();
    // The tools and the tenant facts their calls use, in one read (issue 19: none per call); the
    // same read records the run in the tenant's list of runs (what an index rebuild walks).
    const { sources, facts } = unwrap(
      await tenantStub(c, tenantId).runTools(tenantId, [...new Set(body.tools)], runId),
    );
    const expiresAtMs = Date.now() + RUN_TTL_MS;
    const notify = await runNotify(c, tenantId, runId, body.notify, expiresAtMs);
    const made = await stub.create(
      {
        runId,
        tenantId,
        user: body.user,
        tools: sources,
        context: body.context,
        budgets: body.budgets,
        expiresAtMs,
        ...(notify ? { notifyWebhookId: notify.webhook_id } : {}),
        ...(body.mode === "shadow" ? { mode: "shadow" as const } : {}),
      },
      requestHash,
      facts,
    );
    // Two sends of one request raced: the one that lost answers with the run the other created.
    // (Its notify.url secret, if this send made the endpoint, is in this answer: nowhere else.)
    const withSecret = notify?.secret ? notify : null;
    if (!made.ok && requestHash && made.error.code === "invalid_request") return replay(withSecret);
    if (!made.ok) await dropNotify(c, tenantId, notify);
    return created(c, tenantId, stub, unwrap(made), 201, withSecret);
  })
  .get("/:run_id", async (c) => {
    const runId = runIdOf(c);
    return c.json(unwrap(await runStub(c, runId).get(requireRunAccess(c, runId, "runs:read"))));
  })
  .patch("/:run_id", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireScope(c, "runs:write");
    const patch = await readJson(c, PatchRun);
    const read = patch.tools
      ? unwrap(await tenantStub(c, tenantId).runTools(tenantId, [...new Set(patch.tools)]))
      : undefined;
    const { sources: tools, facts } = read ?? {};
    const stub = runStub(c, runId);
    const run = unwrap(await stub.update(tenantId, { scopes: patch.user?.scopes, tools, facts }));
    // The same warnings as creation, for the run as it now stands ([] when none).
    return c.json({ ...run, warnings: unwrap(await stub.warnings(tenantId)) });
  })
  .post("/:run_id/cancel", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireScope(c, "runs:write");
    // No body (as before) or {} cancels; { "rollback": true } also undoes the run's applied writes.
    const body = (await c.req.text()).trim() === "" ? {} : await readJson(c, CancelRun);
    if (body.rollback) requireScope(c, "operations:compensate");
    return c.json(
      unwrap(await runStub(c, runId).cancel(tenantId, principalName(c), body.rollback === true)),
    );
  })
  // A rollback's compensations approved as one plan (issue 35 item 4, durable/run/rollback-plan.ts).
  .get("/:run_id/rollback", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireScope(c, "approvals:decide");
    return c.json(unwrap(await runStub(c, runId).rollbackPlan(tenantId)));
  })
  .post("/:run_id/rollback/approve", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireScope(c, "approvals:decide");
    const body = await readJson(c, ApproveRollbackPlan);
    const by = await decider(c, body.approver);
    const stub = runStub(c, runId);
    const plan = await stub.approveRollbackPlan(tenantId, by, body.items, body.reason ?? null);
    return c.json({ decided_by: by.id, decided_via: by.via, ...unwrap(plan) });
  })
  .post("/:run_id/turns", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireRunAccess(c, runId, "runs:write");
    const format = turnFormat(c);
    const parsed = adapters[format].parse(await readJson(c, z.unknown()));
    if (!parsed.ok) throw new ApiProblem(parsed.error);
    const { calls, usage, turnKey } = parsed.value;
    // Prices are needed only to price usage; a malformed table is then a 500 `misconfigured`, never zero cost.
    const prices = usage ? unwrap(modelPrices(c.env)) : {};
    const cost = modelCost(usage, prices);
    const turn = unwrap(
      await runStub(c, runId).postTurn(
        tenantId,
        calls,
        cost,
        requestedWait(c, DEFAULT_TURN_WAIT_MS),
        turnKey ? { key: turnKey, usage } : null,
        format,
      ),
    );
    return turnResponse(c.req.url, runId, format, turn);
  })
  .get("/:run_id/turns/:turn_id", async (c) => {
    const runId = runIdOf(c);
    const turnId = checkId(c.req.param("turn_id"), TURN_ID, "turn");
    const format = turnFormat(c);
    const turn = unwrap(
      await runStub(c, runId).getTurn(
        requireRunAccess(c, runId, "runs:read"),
        turnId,
        requestedWait(c, 0),
        format,
      ),
    );
    return turnResponse(c.req.url, runId, format, turn);
  })
  .get("/:run_id/tools", async (c) => {
    const runId = runIdOf(c);
    const format = toolsFormat(c);
    const tenantId = requireRunAccess(c, runId, "runs:read");
    const stub = runStub(c, runId);
    const [tools, warnings] = await Promise.all([
      stub.toolDefinitions(tenantId),
      stub.warnings(tenantId),
    ]);
    // Warnings sit beside the definitions: a provider refuses fields it does not know in a tool.
    return c.json({
      format,
      tools: exportTools(unwrap(tools), format),
      warnings: unwrap(warnings),
    });
  })
  .get("/:run_id/trace", async (c) => {
    const runId = runIdOf(c);
    const tenantId = requireScope(c, "traces:read");
    const { format } = readQuery(c, TraceQuery);
    if (format === "otlp") return c.json(unwrap(await runStub(c, runId).otlpFor(tenantId)));
    return c.json(unwrap(await runStub(c, runId).traceFor(tenantId)));
  });

const runIdOf = (c: Context<AppEnv>) => checkId(c.req.param("run_id") ?? "", RUN_ID, "run");

// `?format=`, refused with the value given and every format there is (readQuery).
const TraceQuery = z.object({ format: z.enum(["json", "otlp"]).default("json") });
const toolsFormat = (c: Context<AppEnv>): ToolsFormat =>
  readQuery(c, z.object({ format: ToolsFormat.default("native") })).format;
const turnFormat = (c: Context<AppEnv>): TurnFormat =>
  readQuery(c, z.object({ format: TurnFormat.default("native") })).format;

/** The results, in the provider's own shape, are ready to append to the conversation. */
function turnResponse(
  requestUrl: string,
  runId: string,
  format: TurnFormat,
  turn: TurnReply,
): Response {
  const pollUrl = new URL(
    `/v1/runs/${runId}/turns/${turn.turn_id}?format=${format}`,
    requestUrl,
  ).toString();
  // Formatters correlate by the call's id; the turn row keeps each call's frozen input once, not its raw arguments.
  const results = adapters[format].format(
    turn.results.map(({ call, envelope }) => ({ call: { ...call, arguments: null }, envelope })),
  );
  const body = {
    turn_id: turn.turn_id,
    status: turn.status,
    results,
    ...(turn.status === "pending" ? { poll_url: pollUrl } : {}),
  };
  // A re-proposal of an operation retention removed: 410, with every call's result still inside.
  const pruned = turn.pruned[0];
  if (pruned)
    return problemResponse(
      prunedProblem(pruned.operation_id, Date.parse(pruned.pruned_at), pruned.settled_as),
      {
        ...body,
        pruned: turn.pruned,
      },
    );
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "Toolgate-Rows-Written": String(turn.rowsWritten),
  };
  if (turn.status === "pending") headers["Location"] = pollUrl;
  return new Response(JSON.stringify(body), {
    status: turn.status === "settled" ? 200 : 202,
    headers,
  });
}
