// Before a send: the run's verdict, the tenant's secrets and the host's retry budget, asked at once
// by one function with one catch (`ask`): a rejected RPC is a value the caller must handle, never a
// throw across the stub. Secrets are never stored by an operation: each send opens them from the
// run's sealed tenant facts while those are within their bound (held in memory only), else asks the
// tenant for them.
import type { OperationEvent } from "../../domain/operation/index.ts";
import { ok, err, type Result } from "../../domain/result.ts";
import type { SpendVerdict } from "../retry-budget-object.ts";
import { backoffSinceMs } from "../../domain/retry-deferral.ts";
import type { Denial } from "../../domain/turn/turn.ts";
import type { Env } from "../env.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import { askRetryBudget, freezeCallOf, originOf } from "../retry-budget-client.ts";
import { frozenBy, frozenDenial, type Freeze, type FreezeCall } from "../../domain/freeze.ts";
import { routeOf } from "../../tools/shadow.ts";
import { FACTS_SCHEMA, freshness, type CallFacts } from "../../domain/tenant-facts.ts";
import { runStub, tenantStub } from "../stubs.ts";
import { openSecrets } from "../tenant/secrets.ts";
import type { FrozenRow, Head, Loaded, OperationError, Secrets } from "./contracts.ts";
import { toolName, type OperationLog } from "./log.ts";
import {
  evaluatePolicies,
  policyRefusal,
  policyRequestFor,
  type PolicyDecision,
} from "../../policies/evaluate.ts";
import type { PolicyRequest, PolicySet } from "../../domain/policy-request.ts";
import { hostPolicy } from "../../config.ts";
import { grantLapse as grantLapseOf } from "../../domain/grant.ts";
import { firstOf } from "../../domain/journal/trace-event.ts";
import { compileTool } from "../../tools/catalog.ts";
import { decodeInput } from "../store/operation-rows.ts";

type DecideDenial = Extract<OperationEvent, { type: "decide" }>["denial"];

/** An RPC's answer, or why there was none (the callee threw or could not be reached). */
export type Asked<T> = { answered: true; value: T } | { answered: false; detail: string };

/** Asks without throwing: a rejected RPC becomes a value the caller must handle. */
export async function ask<T>(question: () => Promise<T>): Promise<Asked<T>> {
  try {
    return { answered: true, value: await question() };
  } catch (error) {
    return { answered: false, detail: String(error) };
  }
}

export const UNAVAILABLE_DETAIL =
  "toolgate could not ask the run whether this call may still run; nothing was decided or sent. Try again shortly.";

/**
 * Exactly the tenant secrets `spec` names, opened from the run's sealed snapshot when it holds every
 * one of them (no RPC), else from this operation's own tenant (one RPC).
 */
export async function tenantSecrets(
  env: Env,
  tenantId: string,
  spec: ToolSpec,
  facts: CallFacts | null,
): Promise<Secrets> {
  const sealed = facts?.secrets;
  if (sealed && spec.secretNames.every((name) => name in sealed)) {
    const opened = await openSecrets(env, tenantId, spec.secretNames, sealed);
    if (opened.ok) return opened;
    // Missing or unreadable in the snapshot: the tenant says (one RPC, off the normal path) whether
    // it is really gone (the typed failure) or was registered again since the snapshot.
  }
  return secretsFor(env, tenantId, spec);
}

/** Held facts while they are within the bound (domain/tenant-facts.ts), else null. */
export const usable = (facts: CallFacts | null | undefined, nowMs: number): CallFacts | null =>
  facts && freshness({ schema: FACTS_SCHEMA, readAtMs: facts.readAtMs }, nowMs) !== "stale"
    ? facts
    : null;

/** Exactly the tenant secrets `spec` names, from this operation's own tenant. */
export async function secretsFor(env: Env, tenantId: string, spec: ToolSpec): Promise<Secrets> {
  if (spec.secretNames.length === 0) return ok({});
  const resolved = await tenantStub(env, tenantId).secretsFor(tenantId, spec.secretNames);
  return resolved.ok ? ok(resolved.value) : err(resolved.error.detail);
}

export type Wanted = {
  /** Ask the run whether `tool` may still run (bound to an approval's policy version); null: allowed unasked. */
  authorize: { tool: string; toolVersion?: string } | null;
  /** The tool whose secrets to fetch (null: none, e.g. the tool no longer compiles). */
  secretsOf: ToolSpec | null;
  /** The host retry budget to ask (an automatic send only; a person's resend never does). */
  budget: string | null;
  /** The run's tenant facts this operation was submitted with: their sealed secrets, while within the bound. */
  facts?: CallFacts | null;
};
export type Gathered = {
  /** A `refuse` freeze comes as a denial (code `frozen`) and as `freeze`. */
  verdict: Asked<Result<true, Denial>>;
  /**
   * The freeze that applies now (issue 34), as data: `hold` — nothing may be sent; `refuse` — the
   * verdict is its denial. Null: none, the run said no first, or unasked.
   */
  freeze: Freeze | null;
  /** null: not fetched. */
  secrets: Asked<Secrets> | null;
  budget: SpendVerdict;
  /**
   * Why the standing grant this call relied on no longer covers it (issue 35: revoked or expired,
   * the tenant's grants of the moment); null: it still does, it relied on none, or unasked.
   */
  grantLapse: string | null;
};

const ALLOWED = { answered: true as const, value: ok(true as const) };

/** Everything a send needs to know, asked in parallel; nothing here throws. */
export async function gather(
  env: Env,
  frozen: FrozenRow,
  want: Wanted,
  nowMs: number,
): Promise<Gathered> {
  const { authorize, secretsOf, budget } = want;
  let freeze: Freeze | null = null;
  let grantLapse: string | null = null;
  const [verdict, secrets, allowed] = await Promise.all([
    authorize
      ? ask(async () => {
          // The tenant's Cedar policy set and freezes, as they stand now, asked with the run's verdict.
          const [run, policy] = await Promise.all([
            runStub(env, frozen.run_id).authorize(
              frozen.tenant_id,
              authorize.tool,
              authorize.toolVersion ?? null,
              frozen.plan.compensates ?? null,
            ),
            policyVerdict(env, frozen, nowMs),
          ]);
          if (!run.ok) return run;
          freeze = policy.freeze;
          grantLapse = policy.grantLapse;
          return policy.verdict;
        })
      : Promise.resolve(ALLOWED),
    secretsOf
      ? ask(() => tenantSecrets(env, frozen.tenant_id, secretsOf, usable(want.facts, nowMs)))
      : Promise.resolve(null),
    budget ? askRetryBudget(env, budget, nowMs) : Promise.resolve({ ok: true as const }),
  ]);
  return { verdict, freeze, secrets, budget: allowed, grantLapse };
}

/**
 * Before every attempt after the start (a retry, a resend, after an approval or a lock wait): the
 * tenant's policy set of the moment, if any, on the request the start froze (issue 31: for every
 * operation, so a set PUT after the start applies too), and its freezes of the moment (issue 34,
 * domain/freeze.ts `frozenBy`): a `refuse` one denies, a `hold` one does not; either is answered.
 * No set and no freeze: allowed. The cost is this one read of the tenant, asked beside the run's
 * verdict; a new write's first attempt never comes here.
 */
async function policyVerdict(
  env: Env,
  frozen: FrozenRow,
  nowMs: number,
): Promise<{ freeze: Freeze | null; verdict: Result<true, Denial>; grantLapse: string | null }> {
  const { policies: set, freezes, grants } = await tenantStub(env, frozen.tenant_id).sendChecks();
  const freeze = freezes.length > 0 ? frozenBy(freezes, freezeCallFor(env, frozen), nowMs) : null;
  // A tenant object not yet upgraded answers no grants: the call asks a person (fail closed).
  const granted = frozen.plan.grant;
  const grantLapse = granted ? grantLapseOf(grants ?? null, granted.id, nowMs) : null;
  if (freeze?.mode === "refuse") return { freeze, verdict: err(frozenDenial(freeze)), grantLapse };
  return { freeze, verdict: cedarVerdict(env, frozen, set), grantLapse };
}

/** The tenant's Cedar set of the moment on the request the start froze (no set: allowed). */
function cedarVerdict(env: Env, frozen: FrozenRow, set: PolicySet | null): Result<true, Denial> {
  if (!set) return ok(true);
  const request = frozenPolicyRequest(env, frozen);
  const decided: PolicyDecision = request
    ? evaluatePolicies(set, request)
    : { version: set.version, decision: "deny", policies: [], errors: [NO_REQUEST] };
  if (decided.decision === "allow") return ok(true);
  return err({ status: "rejected", code: "policy_denied", message: policyRefusal(decided) });
}

/**
 * This operation as a freeze sees it: its tool, origin (on its route), user and run. A tool that no
 * longer compiles has no origin, but its name, user and run still match (fail closed).
 */
export function freezeCallFor(env: Env, frozen: FrozenRow): FreezeCall {
  const { plan } = frozen;
  const user =
    plan.policyRequest?.user.id ?? plan.cedar?.request?.user.id ?? plan.approval?.requestedBy ?? "";
  const spec = compileTool(frozen.source, hostPolicy(env));
  if (!spec.ok)
    return {
      tool: toolName(frozen),
      origin: null,
      user,
      run: frozen.run_id,
      write: frozen.risk !== "read",
    };
  const input = {
    value: decodeInput(frozen.input),
    canonical: frozen.input,
    hash: frozen.input_hash,
  };
  return freezeCallOf(env, spec.value, input, routeOf(plan, spec.value), user, frozen.run_id);
}

const NO_REQUEST = "the call's policy request could not be rebuilt (its tool no longer compiles)";

/**
 * The request the start froze; in a plan frozen before every operation froze one (and started
 * while its tenant had no set), rebuilt from the frozen tool and input with what the plan does not
 * keep left out — the user's scopes, attributes and the run's context — so a policy that permits by
 * them does not permit it (fail closed), and a forbid on the arguments applies. Null: the tool no
 * longer compiles.
 */
function frozenPolicyRequest(env: Env, frozen: FrozenRow): PolicyRequest | null {
  const { plan } = frozen;
  const kept = plan.policyRequest ?? plan.cedar?.request;
  if (kept) return kept;
  const spec = compileTool(frozen.source, hostPolicy(env));
  if (!spec.ok) return null;
  const user = { id: plan.approval?.requestedBy ?? "", scopes: [] };
  const input = decodeInput(frozen.input);
  return policyRequestFor(spec.value, input, user, frozen.run_id, {});
}

/** The secrets a gather fetched, or null when it did not get them (the attempt then asks again itself). */
export function prefetched(gathered: Gathered): Secrets | null {
  return gathered.secrets?.answered ? gathered.secrets.value : null;
}

/**
 * Before approving: the run's verdict on this exact tool version and the first attempt's secrets.
 * A tool that no longer compiles is a denial; a run that cannot be asked is `unavailable` (unasked
 * is not allowed: still awaiting approval, its expiry alarm stands, decide again).
 */
export async function gatherApproval(
  env: Env,
  log: OperationLog,
  head: Head,
  toolVersion: string,
): Promise<
  Result<{ denial: DecideDenial; secrets: Secrets | null; hold: HoldOf | null }, OperationError>
> {
  const loaded = log.loadFixed();
  if (!loaded.ok)
    return ok({
      denial: {
        status: "failed",
        code: "permanent_failure",
        message: `toolgate could not run this tool (${loaded.error}). It was not executed. Do not retry; tell the user.`,
      },
      secrets: null,
      hold: null,
    });
  const spec = loaded.value.spec;
  const authorize = { tool: spec.name, toolVersion };
  const gathered = await gather(
    env,
    head.frozen,
    { authorize, secretsOf: spec, budget: null },
    Date.now(),
  );
  if (!gathered.verdict.answered) {
    console.error("approval: the run could not be asked", head.frozen.id, gathered.verdict.detail);
    return err({ code: "unavailable", detail: UNAVAILABLE_DETAIL });
  }
  const denial = gathered.verdict.value.ok ? null : gathered.verdict.value.error;
  // Unanswered secrets: the attempt asks again itself (and ends `not_sent` if it cannot).
  return ok({ denial, secrets: prefetched(gathered), hold: holdOf(gathered.freeze) });
}

/**
 * Before a person's resend: a resend is a new execution, so the run must still allow it, exactly as
 * before a retry. Unasked is not allowed: it still waits for a person, who may send the verdict again.
 */
export async function gatherResend(
  env: Env,
  log: OperationLog,
  { frozen }: Head,
): Promise<Result<Secrets | null, OperationError>> {
  const loaded = log.loadFixed();
  const secretsOf = loaded.ok ? loaded.value.spec : null;
  const want = { authorize: { tool: toolName(frozen) }, secretsOf, budget: null };
  const gathered = await gather(env, frozen, want, Date.now());
  const allowed = gathered.verdict;
  if (!allowed.answered) {
    console.error("resend: the run could not be asked", frozen.id, allowed.detail);
    return err({ code: "unavailable", detail: UNAVAILABLE_DETAIL });
  }
  // A person's resend obeys a freeze like any send (issue 34): refused, nothing sent or changed.
  if (gathered.freeze) return err(frozenError(gathered.freeze));
  if (!allowed.value.ok)
    return err({
      code: "resend_not_allowed",
      detail: `the run no longer allows sending it (${allowed.value.error.code}); resolve it as succeeded or failed`,
    });
  return ok(prefetched(gathered));
}

function originKey(env: Env, tenantId: string, loaded: Loaded): string | null {
  const origin = originOf(env, loaded.spec, loaded.input, routeOf(loaded.plan, loaded.spec));
  return origin === null ? null : `${tenantId}:${origin}`;
}

/**
 * Before an alarm's retry or resend: the run may have revoked scopes, withdrawn the tool or passed
 * its deadline while the alarm waited, and an automatic send also asks the host's retry budget.
 * `instead`: the event that stops the send (unanswered: deferred with backoff, nothing sent;
 * denied by the run; deferred by the budget), or null to send with `secrets`.
 */
export async function gatherAlarmSend(
  env: Env,
  log: OperationLog,
  head: Head,
  nowMs: number,
): Promise<{ instead: OperationEvent | null; secrets: Secrets | null }> {
  const { frozen } = head;
  const loaded = log.loadFixed();
  const want = {
    authorize: { tool: toolName(frozen) },
    secretsOf: loaded.ok ? loaded.value.spec : null,
    // The origin's object, asked on every automatic send: the retry budget when the deployment has
    // it on, and the upstream's pause of the origin (issue 34) whether or not.
    budget: loaded.ok ? originKey(env, frozen.tenant_id, loaded.value) : null,
  };
  const gathered = await gather(env, frozen, want, nowMs);
  const { verdict, secrets: resolved, budget: allowed } = gathered;
  if (!verdict.answered || (resolved && !resolved.answered)) {
    const unanswered = !verdict.answered
      ? `the run could not be asked whether it may still run (${verdict.detail})`
      : `the tenant's secrets could not be read (${resolved && !resolved.answered ? resolved.detail : ""})`;
    // Nothing was sent: the same attempt waits (backing off, within its elapsed budget).
    const current = log.head()!.state;
    const since = "firstAttemptAtMs" in current ? current.firstAttemptAtMs : nowMs;
    const instead: OperationEvent = {
      type: "retry_deferred",
      untilMs: nowMs + backoffSinceMs(since, nowMs),
      reason: "unavailable",
      detail: `toolgate could not prepare the request: ${unanswered}; nothing was sent`,
    };
    return { instead, secrets: null };
  }
  // After an ambiguous attempt a denial may start a status lookup: keep the event open for it.
  if (!verdict.value.ok)
    return { instead: { type: "denied", ...verdict.value.error }, secrets: null };
  // A held call not yet sent whose grant lapsed meanwhile asks a person (issue 35), nothing sent.
  const unsent = head.state.phase === "held" && head.state.resume.phase === "unsent";
  const relied = unsent && gathered.grantLapse ? reliedGrant(log, frozen) : null;
  if (relied && gathered.grantLapse)
    return { instead: grantLapsed(relied, gathered.grantLapse), secrets: null };
  const hold = holdOf(gathered.freeze);
  if (hold) return { instead: { type: "hold", hold }, secrets: null };
  if (!allowed.ok) {
    const { reason, detail } = allowed;
    const instead: OperationEvent = {
      type: "retry_deferred",
      untilMs: nowMs + allowed.waitMs,
      reason,
      detail,
      ...("long" in allowed ? { long: allowed.long } : {}),
    };
    return { instead, secrets: null };
  }
  return { instead: null, secrets: prefetched(gathered) };
}

type HoldOf = Extract<OperationEvent, { type: "hold" }>["hold"];
/** A `hold` freeze as the operation's state keeps it (a `refuse` one, or none: null). */
export const holdOf = (freeze: Freeze | null): HoldOf | null =>
  freeze?.mode === "hold" ? { kind: "freeze", freezeId: freeze.id, reason: freeze.reason } : null;

/** A person's send stopped by a freeze (either mode): typed, the freeze named, nothing sent. */
export const frozenError = (freeze: Freeze): Extract<OperationError, { code: "frozen" }> => ({
  code: "frozen",
  freeze_id: freeze.id,
  detail: `nothing was sent: ${frozenDenial(freeze).message}`,
});

/**
 * Before a person's retry-now (issue 34): everything an alarm's send asks (the run, the freezes,
 * the secrets) and the host's retry budget, which may say no (typed, nothing sent). A denial by
 * the run or a `refuse` freeze ends the wait as it would at the alarm (`denial`); a `hold` is typed.
 */
export async function gatherRetryNow(
  env: Env,
  log: OperationLog,
  head: Head,
  nowMs: number,
): Promise<Result<{ denial: OperationEvent | null; secrets: Secrets | null }, OperationError>> {
  const prepared = await gatherAlarmSend(env, log, head, nowMs);
  const instead = prepared.instead;
  if (!instead) return ok({ denial: null, secrets: prepared.secrets });
  switch (instead.type) {
    case "hold":
      return err({
        code: "frozen",
        freeze_id: instead.hold.freezeId,
        detail: `nothing was sent: freeze ${instead.hold.freezeId} holds this call (${instead.hold.reason}); lift it first`,
      });
    case "retry_deferred": {
      const retryAfterMs = Math.max(0, instead.untilMs - nowMs);
      const detail = `nothing was sent: ${instead.detail}`;
      if (instead.reason === "retry_budget")
        return err({ code: "retry_budget_exhausted", detail, retry_after_ms: retryAfterMs });
      // The upstream's own pause of the origin (issue 34 item 4): not toolgate being unreachable.
      if (instead.reason === "rate_limited")
        return err({ code: "origin_paused", detail, retry_after_ms: retryAfterMs });
      return err({ code: "unavailable", detail: UNAVAILABLE_DETAIL });
    }
    default:
      return ok({ denial: instead, secrets: null });
  }
}

/**
 * The grant a call not yet sent still relies on (issue 35): the one its plan names, until it has
 * lapsed once (then a person decides, and the grant is asked no more).
 */
export function reliedGrant(log: OperationLog, frozen: FrozenRow): string | null {
  const granted = frozen.plan.grant;
  if (!granted) return null;
  return firstOf(log.events(), "grant_lapsed") ? null : granted.id;
}

/** The event that turns a call whose grant lapsed to a person (issue 35). */
export const grantLapsed = (grantId: string, reason: string): OperationEvent => ({
  type: "grant_lapsed",
  grantId,
  reason,
});
