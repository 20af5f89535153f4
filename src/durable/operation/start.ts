// A new operation's start: what it needs before its first row (its reservations of limits across
// runs, the approval's policy version, the first attempt's secrets, the tool's idempotency
// verification and the tenant's Cedar policy set — from the run's tenant facts when it passed them,
// so a new write makes no tenant RPC), its plan (domain/operation/plan.ts, with its Cedar request,
// frozen for every operation) and its frozen row. The caller re-checks that no other call started
// it during these awaits, then applies the returned `start` event with the frozen row in one
// transaction.
import { needsApproval, type OperationPlan } from "../../domain/operation/index.ts";
import { planOperation } from "../../domain/operation/plan.ts";
import type { VerificationStatus } from "../../domain/verification.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { requireVerifiedIdempotency, settleScheduleMs } from "../../config.ts";
import type { Env } from "../env.ts";
import * as catalog from "../../tools/catalog.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import { startFacts, verificationStatusOf } from "../tenant/verification-client.ts";
import { evaluatePolicies, policyRefusal, policyRequestFor } from "../../policies/evaluate.ts";
import type { PolicyRequest } from "../../domain/policy-request.ts";
import type { FrozenRow, Secrets, SubmitRequest } from "./contracts.ts";
import { ask, tenantSecrets } from "./gather.ts";
import { NOTHING_RESERVED, reserveClaims, reserveGrant, type Reserved } from "./limits.ts";
import { grantUsesFor, type Grant, type GrantUse } from "../../domain/grant.ts";
import { routeOf, wouldSend } from "../../tools/shadow.ts";
import { quotasFor, type QuotaClaim, type StoredQuota } from "../../domain/quota/definition.ts";
import { frozenBy, frozenDenial, type Freeze } from "../../domain/freeze.ts";
import type { OperationEvent } from "../../domain/operation/index.ts";
import { freezeCallOf, originOf } from "../retry-budget-client.ts";
import { tripClaimsFor, type Tripwire } from "../../domain/tripwire.ts";

/**
 * Before a new operation starts: the tenant's facts (its tool's idempotency verification and its
 * Cedar policy set, one read) and the first attempt's secrets, asked together; then the policy
 * decision; only if it allows, the reservations of its limits across runs (over one whose `over`
 * is "approve", a person decides); then its approval's policy version (the hash of this exact tool
 * source; null: no approval needed). Secrets: none while it waits for approval; null when
 * unanswered (the attempt asks again itself, and ends `not_sent` if that fails too).
 */
async function gatherStart(
  env: Env,
  req: SubmitRequest,
  spec: ToolSpec,
): Promise<{
  toolVersion: string | null;
  secrets: Secrets | null;
  verified: VerificationStatus | null;
  limits: Reserved;
  cedar: Cedar | null;
  request: PolicyRequest;
  quotas: QuotaClaim[];
  frozen: Frozen;
  grant: GrantUse | null;
}> {
  const approvalRule = needsApproval(spec.approval, req.input.value);
  // From the run's tenant facts when it passed them (no RPC); else asked of the tenant, as before.
  const held = req.facts ?? null;
  const [facts, fetched] = await Promise.all([
    held
      ? verificationStatusOf(env, req.tenantId, spec.name, req.source, held).then((verified) => ({
          verified,
          policies: held.policies,
          // Facts from before quotas, freezes or tripwires joined them: none of them.
          quotas: held.quotas ?? [],
          pausedOrigins: held.pausedOrigins ?? {},
          freezes: held.freezes ?? [],
          tripwires: held.tripwires ?? [],
          grants: held.grants ?? [],
        }))
      : startFacts(env, req.tenantId, spec.name, req.source),
    approvalRule
      ? null
      : ask(() => tenantSecrets(env, req.tenantId, spec, held)).then((asked) =>
          asked.answered ? asked.value : null,
        ),
  ]);
  // Frozen whether or not the tenant has a set now: a set PUT later applies before every later attempt.
  const request = policyRequestOf(spec, req);
  const cedar = facts.policies ? decide(evaluatePolicies(facts.policies, request)) : null;
  const verified = facts.verified;
  // Quota shaping (issue 34): what the first attempt waits for, from the same facts (no RPC).
  const quotas = quotasFor({
    tenantId: req.tenantId,
    quotas: facts.quotas,
    pausedOrigins: facts.pausedOrigins,
    // Built only when an origin could matter (a quota or a pause by origin): a new write with
    // neither builds nothing more.
    origin:
      req.shadow || !byOrigin(facts) ? null : originOf(env, spec, req.input, { to: "production" }),
    tool: spec.name,
    toolQuota: spec.quota,
    userId: req.userId,
    nowMs: Date.now(),
  });
  const atStart = frozenAtStart(env, req, spec, facts.freezes);
  const none = {
    toolVersion: null,
    secrets: null,
    verified,
    cedar,
    request,
    quotas,
    frozen: atStart,
  };
  if (cedar?.decision === "deny" || atStart?.mode === "refuse")
    return { ...none, limits: NOTHING_RESERVED, grant: null };
  // The tenant's tripwires covering this call claim on their counters like limits (issue 34).
  const trips = tripClaimsOf(req, spec, facts.tripwires);
  if (!trips.ok)
    return {
      ...none,
      limits: {
        ...NOTHING_RESERVED,
        denied: { limit: "tripwire", subject: "", message: trips.error.message },
      },
      grant: null,
    };
  const claims = [...(req.limitClaims ?? []), ...trips.value];
  const limits =
    claims.length > 0
      ? await reserveClaims(env, req.tenantId, req.operationId, claims)
      : NOTHING_RESERVED;
  const frozen = trippedOver(atStart, limits.tripped);
  if (limits.denied) return { ...none, frozen, limits, grant: null };
  // A standing grant (issue 35) stands in for the tool's approval rule only: a call over a limit
  // whose `over` is "approve" still asks a person. A shadow run's call uses no grant.
  const grant =
    approvalRule && !limits.needsApproval && !req.shadow && facts.grants.length > 0
      ? await reserveGrant(env, req.tenantId, req.operationId, grantUsesOf(req, spec, facts.grants))
      : null;
  const asks = (approvalRule && grant === null) || limits.needsApproval;
  // Planned for a granted call too: what a person is asked if its grant lapses before it is sent.
  const toolVersion = approvalRule || asks ? await catalog.toolVersion(req.source) : null;
  return {
    toolVersion,
    secrets: asks || grant ? null : fetched,
    verified,
    limits: grant ? { ...limits, held: [...limits.held, ...grant.claims] } : limits,
    cedar,
    request,
    quotas,
    frozen,
    grant,
  };
}

/** The live grants that cover this call, with their claims (domain/grant.ts). */
const grantUsesOf = (req: SubmitRequest, spec: ToolSpec, grants: Grant[]) =>
  grantUsesFor(
    grants,
    {
      tool: spec.name,
      input: req.input.value as Record<string, unknown>,
      context: req.principal?.context ?? {},
    },
    Date.now(),
  );

type Frozen = Extract<OperationEvent, { type: "start" }>["frozen"];

/** A tripwire's call claims (none when the tenant has no tripwire: nothing computed, no RPC). */
function tripClaimsOf(req: SubmitRequest, spec: ToolSpec, tripwires: Tripwire[]) {
  if (tripwires.length === 0) return ok([]);
  return tripClaimsFor(tripwires, {
    tool: spec.name,
    // A shadow run's write reaches no production system: it counts toward no tripwire.
    write: spec.risk !== "read" && !req.shadow,
    input: req.input.value as Record<string, unknown>,
    context: req.principal?.context ?? {},
    userId: req.userId,
  });
}

/** A tripped counter's freeze stops the call like a freeze of the facts (a refuse over a hold). */
function trippedOver(frozen: Frozen, tripped: Freeze | null): Frozen {
  if (!tripped || frozen?.mode === "refuse") return frozen;
  if (frozen?.mode === "hold" && tripped.mode === "hold") return frozen;
  return tripped.mode === "refuse"
    ? { mode: "refuse", message: frozenDenial(tripped).message }
    : { mode: "hold", hold: { kind: "freeze", freezeId: tripped.id, reason: tripped.reason } };
}

/**
 * The freeze that applies to this call now (issue 34), from the same facts the Cedar set came in:
 * nothing is computed when the tenant has none (the new-write path costs nothing more).
 */
function frozenAtStart(env: Env, req: SubmitRequest, spec: ToolSpec, freezes: Freeze[]): Frozen {
  if (freezes.length === 0) return null;
  const shadow = req.shadow && spec.risk !== "read" ? { shadow: true } : {};
  const call = freezeCallOf(env, spec, req.input, routeOf(shadow, spec), req.userId, req.runId);
  const freeze = frozenBy(freezes, call, Date.now());
  if (!freeze) return null;
  return freeze.mode === "refuse"
    ? { mode: "refuse", message: frozenDenial(freeze).message }
    : { mode: "hold", hold: { kind: "freeze", freezeId: freeze.id, reason: freeze.reason } };
}

/** Whether any quota or pause of the tenant is by origin. */
const byOrigin = (facts: { quotas: StoredQuota[]; pausedOrigins: Record<string, number> }) =>
  Object.keys(facts.pausedOrigins).length > 0 ||
  facts.quotas.some((q) => "origin" in q.definition.scope);

/** What this call looks like to the tenant's Cedar policies (policies/evaluate.ts). */
function policyRequestOf(spec: ToolSpec, req: SubmitRequest): PolicyRequest {
  const user = req.principal?.user ?? { id: req.userId, scopes: [] };
  const context = req.principal?.context ?? {};
  return policyRequestFor(spec, req.input.value, user, req.runId, context);
}

type Cedar = NonNullable<OperationPlan["cedar"]>;
/** The start's decision as the plan keeps it (the request is frozen beside it, for every operation). */
function decide(decided: ReturnType<typeof evaluatePolicies>): Cedar {
  const { version, decision, policies, errors } = decided;
  return { version, decision, policies, ...(errors.length > 0 ? { errors } : {}) };
}

/** The frozen row and the secrets its first attempt may use (planned now, after the awaits). */
export async function prepareStart(
  env: Env,
  req: SubmitRequest,
  spec: ToolSpec,
): Promise<
  Result<
    {
      frozen: FrozenRow;
      secrets: Secrets | null;
      limitDenied: Reserved["denied"];
      policyDenied: { message: string } | null;
      /** A freeze that applies at the start (issue 34): the start event's `frozen`. */
      freeze: Frozen;
    },
    { code: "unavailable"; detail: string }
  >
> {
  const started = await gatherStart(env, req, spec);
  const { toolVersion, secrets, verified, limits, cedar, request, quotas, grant } = started;
  const frozenBy = started.frozen;
  const nowMs = Date.now();
  const strict = requireVerifiedIdempotency(env);
  const late = settleScheduleMs(env);
  const planned = planOperation(spec, req, toolVersion, verified, strict, nowMs, late);
  // The operation records what it reserved: released by its outcome if nothing was applied.
  const plan = {
    ...planned,
    ...(limits.held.length > 0 ? { limits: limits.held } : {}),
    policyRequest: request,
    ...(cedar ? { cedar } : {}),
    // A shadow run's write: frozen with the plan, so no retry, grant or resend can reach production.
    ...(req.shadow && spec.risk !== "read"
      ? { shadow: { would_send: wouldSend(spec, req.input, planned.idempotencyKey) } }
      : {}),
    ...(req.compensation ? { compensates: req.compensation.of } : {}),
    ...(quotas.length > 0 ? { quotas } : {}),
    // No quota slot, nor a user's connection (issue 36), is waited for past the run's deadline.
    ...(quotas.length > 0 || spec.auth ? { deadlineAtMs: req.deadlineAtMs ?? null } : {}),
    ...(grant ? { grant: { id: grant.grantId, amount: grant.amount } } : {}),
    ...(spec.auth ? { credential: { ...spec.auth, user: request.user.id } } : {}),
  };
  const policyDenied = cedar?.decision === "deny" ? { message: policyRefusal(cedar) } : null;
  const frozen = frozenRowOf(req, spec, plan, nowMs);
  // A call held at its start sends nothing now: its secrets are asked again at the release.
  const held = frozenBy?.mode === "hold";
  return ok({
    frozen,
    secrets: held ? null : secrets,
    limitDenied: limits.denied,
    policyDenied,
    freeze: frozenBy,
  });
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

/** A limit (or another object asked before the start) could not be reached: nothing started. */
export const startUnavailable = (error: unknown) =>
  err({
    code: "unavailable" as const,
    detail: `toolgate could not check this call's limits (${String(error)}); nothing was sent. Try again shortly.`,
  });
