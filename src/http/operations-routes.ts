// /v1/operations: read one operation (long-poll with ?wait=), decide an approval, resolve an
// outcome_unknown (succeeded, failed, or resend with the same idempotency key: keyed tools only)
// and cancel. /v1/approvals: the tenant's inbox of approval requests (redacted, like the trace),
// and /v1/approvals/{operation_id}: one request's real arguments, for the approver.
import { withCredentialHealth } from "./oauth-routes.ts";
import { Hono, type Context } from "hono";
import type { z } from "zod";
import {
  Approve,
  ApprovalBatch,
  ApprovalsQuery,
  Compensate,
  Reject,
  Resolve,
  UnknownsQuery,
  VerifyQuery,
} from "./schemas.ts";
import { decider, principalName, requireScope, type AppEnv } from "./auth.ts";
import { decideBatch } from "./approvals-batch.ts";
import { operationReceipt } from "./receipts-routes.ts";
import { verifyStepUp } from "./passkey.ts";
import { ApiProblem } from "./problem.ts";
import {
  checkId,
  OPERATION_ID,
  operationStub,
  readJson,
  readQuery,
  runStub,
  tenantStub,
  unwrap,
  waitMs,
} from "./request.ts";

async function decide(
  c: Context<AppEnv>,
  verdict: "approve" | "reject",
  body: z.infer<typeof Approve>,
) {
  // Edit-on-approve (issue 35 item 2): an edit names the version it edits.
  if (body.arguments && !body.input_hash)
    throw new ApiProblem({
      code: "invalid_request",
      detail:
        "edited arguments name the input_hash they edit (the version you looked at); nothing was changed",
    });
  const operationId = checkId(c.req.param("operation_id") ?? "", OPERATION_ID, "operation");
  const tenantId = requireScope(c, "approvals:decide");
  const by = await decider(c, body.approver);
  // The passkey step-up (issue 35): verified here, for this decider and the approval it names.
  if (body.passkey) {
    if (!body.input_hash)
      throw new ApiProblem({
        code: "invalid_request",
        detail: "a passkey step-up names the input_hash it was made for; nothing was decided",
      });
    const approval = { operationId, approvalHash: body.approval_hash ?? body.input_hash };
    await verifyStepUp(c.env, c.req.url, tenantId, by.id, approval, body.passkey);
  }
  // Delegation while away (issue 35): only a delegation in force from that person to this decider.
  let onBehalfOf = {};
  if (body.on_behalf_of) {
    const delegation = await tenantStub(c, tenantId).delegationFor(body.on_behalf_of, by.id);
    if (!delegation)
      throw new ApiProblem({
        code: "forbidden",
        detail: `${body.on_behalf_of} has no delegation to ${by.id} in force now; nothing was decided`,
      });
    onBehalfOf = { onBehalfOf: { id: delegation.from, scopes: delegation.scopes } };
  }
  const decision = {
    verdict,
    approverId: by.id,
    via: by.via,
    scopes: by.scopes,
    ...(by.claims ? { claims: by.claims } : {}),
    ...onBehalfOf,
    ...(body.passkey ? { stepUp: "passkey" as const } : {}),
    reason: body.reason ?? null,
    inputHash: body.input_hash ?? null,
    toolVersion: body.policy_version ?? null,
    ...(body.approval_hash ? { approvalHash: body.approval_hash } : {}),
  };
  const stub = operationStub(c, operationId);
  const decided = body.arguments
    ? await stub.edit(tenantId, decision, body.arguments)
    : await stub.decide(tenantId, decision);
  return c.json(unwrap(decided).view);
}

/** pause | resume | retry-now: the operation decides (409 not_waiting, frozen, retry_budget_exhausted). */
async function control(c: Context<AppEnv>, action: "pause" | "resume" | "retryNow") {
  const operationId = checkId(c.req.param("operation_id") ?? "", OPERATION_ID, "operation");
  const tenantId = requireScope(c, "operations:resolve");
  const stub = operationStub(c, operationId);
  return c.json(unwrap(await stub[action](tenantId, principalName(c))));
}

/** Unknown outcomes for people, oldest first: only a person can settle them, or (`settling`) they settle late by themselves. */
export const unknownOutcomeRoutes = new Hono<AppEnv>().get("/", async (c) => {
  const tenantId = requireScope(c, "operations:resolve");
  const { limit } = readQuery(c, UnknownsQuery);
  return c.json({ operations: await tenantStub(c, tenantId).listUnknowns(limit) });
});

export const approvalRoutes = new Hono<AppEnv>()
  .get("/", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    const query = readQuery(c, ApprovalsQuery);
    const page = await tenantStub(c, tenantId).listApprovals(
      query.state,
      query.cursor ?? null,
      query.limit,
    );
    // Acting as the user (issue 36): a pending call's connection health, asked now.
    return c.json({ ...page, items: await withCredentialHealth(c.env, tenantId, page.items) });
  })
  // Each item decided as if alone (approvals-batch.ts); one answer per item, in order. The body is
  // read and the decider verified before any item is decided: a bad token decides nothing.
  .post("/batch", async (c) => {
    const tenantId = requireScope(c, "approvals:decide");
    const items = await readJson(c, ApprovalBatch);
    const by = await decider(c, undefined);
    return c.json({
      decided_by: by.id,
      decided_via: by.via,
      items: await decideBatch(c.env, tenantId, by, items),
    });
  })
  // The inbox mirrors the trace (redacted); whoever decides reads the real arguments here, from
  // the operation itself, with the fields the tool hides everywhere else named in `hidden`.
  .get("/:operation_id", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "approvals:decide");
    const input = unwrap(await operationStub(c, operationId).approvalInput(tenantId));
    // Acting as the user (issue 36): the connection's health now, as the list says it.
    const [item] = await withCredentialHealth(c.env, tenantId, [{ state: "pending", ...input }]);
    const { state: _, ...answer } = item!;
    return c.json({ operation_id: operationId, ...answer });
  });

export const operationRoutes = new Hono<AppEnv>()
  .get("/:operation_id", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "runs:read");
    const { verify } = readQuery(c, VerifyQuery);
    const stub = operationStub(c, operationId);
    const view = unwrap(await stub.get(tenantId, waitMs(c, 0)));
    // The hash chain of the stored events, checked now: where it breaks if it does.
    if (verify === "1")
      return c.json({ ...view, verification: unwrap(await stub.verify(tenantId)) });
    return c.json(view);
  })
  .get("/:operation_id/receipt", operationReceipt)
  .post("/:operation_id/approve", async (c) => decide(c, "approve", await readJson(c, Approve)))
  .post("/:operation_id/reject", async (c) => decide(c, "reject", await readJson(c, Reject)))
  .post("/:operation_id/resolve", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "operations:resolve");
    const verdict = await readJson(c, Resolve);
    const view = await operationStub(c, operationId).resolve(tenantId, {
      outcome: verdict.outcome,
      result: verdict.result ?? null,
      reason: verdict.reason,
      by: principalName(c),
    });
    return c.json(unwrap(view));
  })
  // Undo (issue 22): the original's run coordinates it (durable/run/compensate.ts). The operation
  // answers only its own tenant: another tenant's id is not found, whatever it is.
  .post("/:operation_id/compensate", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "operations:compensate");
    const body = await readJson(c, Compensate);
    const original = unwrap(await operationStub(c, operationId).compensationSource(tenantId));
    const asked = { reason: body.reason, by: principalName(c), waitMs: waitMs(c, 0) };
    const done = unwrap(await runStub(c, original.run_id).compensate(tenantId, original, asked));
    const view = unwrap(await operationStub(c, done.compensation_id).get(tenantId, 0));
    return c.json(view, done.created ? 201 : 200);
  })
  // Operation controls (issue 34): a person pauses, resumes or retries now a waiting call.
  .post("/:operation_id/pause", async (c) => control(c, "pause"))
  .post("/:operation_id/resume", async (c) => control(c, "resume"))
  .post("/:operation_id/retry-now", async (c) => control(c, "retryNow"))
  .post("/:operation_id/cancel", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "runs:write");
    const stub = operationStub(c, operationId);
    const current = unwrap(await stub.get(tenantId, 0));
    // The run closes its turns first, so a late result can never attach to them.
    unwrap(
      await runStub(c, current.run_id).closeOperation(tenantId, operationId, principalName(c)),
    );
    return c.json(unwrap(await stub.get(tenantId, 0)));
  });
