// A new operation's start: what it needs before its first row (the approval's policy version, the
// first attempt's secrets, the tool's idempotency verification — from the run's tenant facts when
// it passed them, so a new write makes no tenant RPC), its plan (domain/operation/plan.ts)
// and its frozen row. The caller re-checks that no other call started it during these awaits, then
// applies the returned `start` event with the frozen row in one transaction.
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { needsApproval, type OperationPlan } from "../../domain/operation/index.ts";
import { planOperation } from "../../domain/operation/plan.ts";
import type { VerificationStatus } from "../../domain/verification.ts";
import { requireVerifiedIdempotency } from "../../config.ts";
import type { Env } from "../env.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import { verificationStatusOf } from "../tenant/registry.ts";
import type { FrozenRow, Secrets, SubmitRequest } from "./contracts.ts";
import { ask, tenantSecrets } from "./gather.ts";

/**
 * Before a new operation starts: its approval's policy version (the hash of this exact tool source;
 * null: no approval needed), its first attempt's secrets (none while it waits for approval; null
 * when unanswered: the attempt asks again itself, and ends `not_sent` if that fails too) and the
 * tool's idempotency verification.
 */
async function gatherStart(
  env: Env,
  req: SubmitRequest,
  spec: ToolSpec,
): Promise<{
  policyVersion: string | null;
  secrets: Secrets | null;
  verified: VerificationStatus | null;
}> {
  const asks = needsApproval(spec.approval, req.input.value);
  const policyVersion = asks ? await sha256Hex(canonicalJson(req.source)) : null;
  // From the run's tenant facts when it passed them (no RPC); else asked of the tenant, as before.
  const facts = req.facts ?? null;
  const [secrets, verified] = await Promise.all([
    asks
      ? null
      : ask(() => tenantSecrets(env, req.tenantId, spec, facts)).then((asked) =>
          asked.answered ? asked.value : null,
        ),
    verificationStatusOf(env, req.tenantId, spec.name, req.source, facts),
  ]);
  return { policyVersion, secrets, verified };
}

/** The frozen row and the secrets its first attempt may use (planned now, after the awaits). */
export async function prepareStart(
  env: Env,
  req: SubmitRequest,
  spec: ToolSpec,
): Promise<{ frozen: FrozenRow; secrets: Secrets | null }> {
  const { policyVersion, secrets, verified } = await gatherStart(env, req, spec);
  const nowMs = Date.now();
  const strict = requireVerifiedIdempotency(env);
  const plan = planOperation(spec, req, policyVersion, verified, strict, nowMs);
  return { frozen: frozenRowOf(req, spec, plan, nowMs), secrets };
}

/** Row 1 of the log: the call as submitted, with its plan and the tool's trace settings. */
function frozenRowOf(
  req: SubmitRequest,
  spec: ToolSpec,
  plan: OperationPlan,
  nowMs: number,
): FrozenRow {
  return {
    id: req.operationId,
    tenant_id: req.tenantId,
    run_id: req.runId,
    call_id: req.callId,
    source: req.source,
    input: req.input.canonical,
    input_hash: req.input.hash,
    plan,
    created_at: nowMs,
    risk: spec.risk,
    redact: spec.redact,
    trace_content: spec.traceContent,
  };
}
