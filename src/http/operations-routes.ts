// /v1/operations: read one operation (long-poll with ?wait=), resolve an outcome_unknown (succeeded,
// failed, or resend with the same idempotency key: keyed tools only) and cancel.
import { Hono } from "hono";
import { Resolve } from "./schemas.ts";
import { principalName, requireScope, type AppEnv } from "./auth.ts";
import { checkId, OPERATION_ID, operationStub, readJson, runStub, unwrap, waitMs } from "./request.ts";


export const operationRoutes = new Hono<AppEnv>()
  .get("/:operation_id", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    return c.json(unwrap(await operationStub(c, operationId).get(requireScope(c, "runs:read"), waitMs(c, 0))));
  })
  .post("/:operation_id/resolve", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "operations:resolve");
    const verdict = await readJson(c, Resolve);
    const view = await operationStub(c, operationId).resolve(tenantId, { outcome: verdict.outcome, result: verdict.result ?? null, reason: verdict.reason, by: principalName(c) });
    return c.json(unwrap(view));
  })
  .post("/:operation_id/cancel", async (c) => {
    const operationId = checkId(c.req.param("operation_id"), OPERATION_ID, "operation");
    const tenantId = requireScope(c, "runs:write");
    const stub = operationStub(c, operationId);
    const current = unwrap(await stub.get(tenantId, 0));
    // The run closes its turns first, so a late result can never attach to them.
    unwrap(await runStub(c, current.run_id).closeOperation(tenantId, operationId, principalName(c)));
    return c.json(unwrap(await stub.get(tenantId, 0)));
  });
