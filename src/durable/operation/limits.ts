// An operation's limits across runs (issue 21), the shell's side. Before its first log row the
// operation reserves what the gate claimed, one limit after another, at each (tenant, limit,
// subject) object: idempotent by operation id, so a re-post, a re-proposal or a start that
// crashed after reserving counts once. The first refusal stops it (the refused limit holds
// nothing; any reserved before it are released by the recorded refusal's outbox row). Over a
// limit whose `over` is "approve", the reservation is made and a person decides.
import { legacySubject, overLimitMessage } from "../../domain/limit/claims.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import { tookEffect, type OperationState } from "../../domain/operation/index.ts";
import type { Env } from "../env.ts";
import { limitStub } from "../stubs.ts";
import type { ApprovalInput, Head } from "./contracts.ts";
import { isTripClaim } from "../../domain/tripwire.ts";
import { GRANT_PREFIX } from "../../domain/grant.ts";
import type { Freeze } from "../../domain/freeze.ts";
import type { GrantUse } from "../../domain/grant.ts";

export type Reserved = {
  /** What it holds, frozen in its plan (released if it is recorded with nothing applied). */
  held: LimitClaim[];
  /** Over a limit with over: "approve": a person decides before the first attempt. */
  needsApproval: boolean;
  denied: { limit: string; subject: string; message: string } | null;
  /**
   * A tripwire's counter answered "tripped" (issue 34): the freeze that stops this call (a refuse
   * over a hold). Its reservation is held like any (released by a refusal: nothing applied).
   */
  tripped: Freeze | null;
};
export const NOTHING_RESERVED: Reserved = {
  held: [],
  needsApproval: false,
  denied: null,
  tripped: null,
};

/** Throws if a limit object cannot be asked: the caller answers `unavailable` (nothing started). */
export async function reserveClaims(
  env: Env,
  tenantId: string,
  operationId: string,
  claims: readonly LimitClaim[],
): Promise<Reserved> {
  const held: LimitClaim[] = [];
  let needsApproval = false;
  let tripped: Freeze | null = null;
  // A trip does not stop the loop: a held call is sent after the lift, so it must hold every claim.
  for (const claim of claims) {
    const reply = await limitStub(env, tenantId, claim.name, claim.subject).reserve({
      ...claim,
      tenantId,
      operationId,
    });
    if (!reply.ok) throw new Error(`limit ${claim.name} refused to answer: ${reply.error.code}`);
    if (reply.value.kind === "tripped") {
      // Its freeze is not made at the tenant yet: fail closed (nothing started; the alarm makes it).
      if (!reply.value.made || !isTripClaim(claim))
        throw new Error(`tripwire ${claim.name} tripped, its freeze not made yet`);
      held.push(claim);
      if (tripped === null || (reply.value.freeze.mode === "refuse" && tripped.mode === "hold"))
        tripped = reply.value.freeze;
      continue;
    }
    if (reply.value.kind === "refused") {
      const { usage, frees } = reply.value;
      const when = typeof frees === "number" ? new Date(frees).toISOString() : frees;
      const message = overLimitMessage(claim, usage, when);
      return {
        held,
        needsApproval,
        denied: { limit: claim.name, subject: claim.subject, message },
        tripped,
      };
    }
    held.push(claim);
    if (reply.value.over && !isTripClaim(claim)) needsApproval = true;
  }
  return { held, needsApproval, denied: null, tripped };
}

/**
 * A call a person would be asked about, inside a live standing grant's bounds (issue 35): reserved
 * on every counter of the first grant with room, by operation id (a re-post, a re-proposal or a
 * start that crashed after reserving counts once). A grant that has no room keeps nothing (what
 * was reserved on its other counter is released at once; if that release is lost, the sweep
 * releases it: no plan names it). Null: no grant covers it, or a counter could not be asked — it
 * asks a person (a grant never refuses a call).
 */
export async function reserveGrant(
  env: Env,
  tenantId: string,
  operationId: string,
  uses: readonly GrantUse[],
): Promise<GrantUse | null> {
  for (const use of uses) {
    try {
      const reserved: LimitClaim[] = [];
      for (const claim of use.claims) {
        const reply = await limitStub(env, tenantId, claim.name, claim.subject).reserve({
          ...claim,
          tenantId,
          operationId,
        });
        if (!reply.ok || reply.value.kind !== "reserved") break;
        reserved.push(claim);
      }
      if (reserved.length === use.claims.length) return use;
      if (reserved.length > 0) await releaseClaims(env, tenantId, operationId, reserved);
    } catch (error) {
      console.error(
        "grant: its counter could not be asked; a person decides",
        use.grantId,
        String(error),
      );
    }
  }
  return null;
}

/**
 * A person's edit (issue 35 item 2) re-sizes what the operation holds: each claim of the edited
 * call is re-sized at its object (idempotent: window.ts decideResize), one after another; the
 * first refusal puts back what it re-sized before (the old amounts, or released where the edit
 * claimed a new subject) and answers the refusal, so a refused edit leaves every reservation as it
 * was. A claim the edit no longer makes is released once all fit. Tripwire counters keep what the
 * start claimed (`kept`). Throws if an object cannot be asked (after putting back what it can).
 */
export async function resizeClaims(
  env: Env,
  tenantId: string,
  operationId: string,
  before: readonly LimitClaim[],
  after: readonly LimitClaim[],
): Promise<{ held: LimitClaim[]; denied: string | null }> {
  // A tripwire's or a standing grant's counter is not the call's own limit: an edit leaves it as
  // the start claimed it (a call that waited for a person holds a grant claim only if its grant
  // lapsed, and then nothing more is counted against that grant).
  const keeps = (claim: LimitClaim) => isTripClaim(claim) || claim.name.startsWith(GRANT_PREFIX);
  const kept = before.filter(keeps);
  const old = before.filter((claim) => !keeps(claim));
  const sameAs = (a: LimitClaim) => (b: LimitClaim) => a.name === b.name && a.subject === b.subject;
  const stub = (claim: LimitClaim) => limitStub(env, tenantId, claim.name, claim.subject);
  const done: LimitClaim[] = [];
  const putBack = () =>
    Promise.all(
      done.map(async (claim) => {
        const was = old.find(sameAs(claim));
        if (was) await stub(was).reserve({ ...was, tenantId, operationId, resize: true });
        else await stub(claim).release(tenantId, operationId);
      }),
    ).catch((error) => console.error("edit: could not put back a resized limit", String(error)));
  try {
    for (const claim of after) {
      const reply = await stub(claim).reserve({ ...claim, tenantId, operationId, resize: true });
      if (!reply.ok) throw new Error(`limit ${claim.name} refused to answer: ${reply.error.code}`);
      if (reply.value.kind === "refused") {
        await putBack();
        const { usage, frees } = reply.value;
        const when = typeof frees === "number" ? new Date(frees).toISOString() : frees;
        return { held: [...before], denied: overLimitMessage(claim, usage, when) };
      }
      done.push(claim);
    }
  } catch (error) {
    await putBack();
    throw error;
  }
  const dropped = old.filter((claim) => !after.some(sameAs(claim)));
  await releaseClaims(env, tenantId, operationId, dropped);
  return { held: [...after, ...kept], denied: null };
}

/**
 * What this operation answers a limit's sweep: it holds the reservation (its plan names it and it
 * is not recorded with nothing applied) — recorded at a time, or not yet (it may still send) —,
 * released it, or never started with it. A reservation adopted from the bucket its subject had
 * before subjects were namespaced is named in plans frozen before that by the bare subject.
 */
export type LimitHold =
  { kind: "held"; recordedAtMs: number | null } | { kind: "released" } | { kind: "absent" };
export function limitHoldOf(head: Head | null, name: string, subject: string): LimitHold {
  const legacy = legacySubject(subject);
  const mine = head?.frozen.plan.limits?.some(
    (c) => c.name === name && (c.subject === subject || c.subject === legacy),
  );
  if (!head || !mine) return { kind: "absent" };
  if (head.state.phase !== "recorded") return { kind: "held", recordedAtMs: null };
  return releasedBy(head.state)
    ? { kind: "released" }
    : { kind: "held", recordedAtMs: head.state.recordedAtMs };
}

const releasedBy = (state: Extract<OperationState, { phase: "recorded" }>) =>
  !tookEffect(state.outcome.status, "code" in state.outcome ? state.outcome.code : null);

/**
 * A pruned operation keeps only how it settled: nothing applied if it was refused or cancelled;
 * otherwise (succeeded, or failed — maybe with an answer that took effect) held, recorded by the
 * time it was pruned at the latest.
 */
export function prunedHold(status: string, prunedAtMs: number): LimitHold {
  return status === "succeeded" || status === "failed"
    ? { kind: "held", recordedAtMs: prunedAtMs }
    : { kind: "released" };
}

/** The outbox delivery of a `limits.released` row: every limit it held, released (idempotent). */
export async function releaseClaims(
  env: Env,
  tenantId: string,
  operationId: string,
  claims: readonly LimitClaim[],
): Promise<void> {
  await Promise.all(
    claims.map(async (claim) => {
      const done = await limitStub(env, tenantId, claim.name, claim.subject).release(
        tenantId,
        operationId,
      );
      if (!done.ok) throw new Error(`limit ${claim.name}: ${done.error.code}`);
    }),
  );
}

/** The outbox delivery of a `tripwire.outcome` row: each failure_rate counter told (idempotent). */
export async function reportOutcome(
  env: Env,
  tenantId: string,
  operationId: string,
  claims: readonly LimitClaim[],
  failed: boolean,
): Promise<void> {
  await Promise.all(
    claims.map(async (claim) => {
      const done = await limitStub(env, tenantId, claim.name, claim.subject).outcome(
        tenantId,
        operationId,
        failed,
      );
      if (!done.ok) throw new Error(`tripwire ${claim.name}: ${done.error.code}`);
    }),
  );
}

/** What the approver sees besides the call: each limit's usage now, and the Cedar decision. */
export async function approverFacts(
  env: Env,
  head: Head,
  input: ApprovalInput,
): Promise<ApprovalInput> {
  const { plan, tenant_id: tenantId } = head.frozen;
  const limits = await Promise.all(
    (plan.limits ?? []).map(async ({ name, subject, amount }) => {
      const usage = await limitStub(env, tenantId, name, subject)
        .usage(tenantId)
        .catch(() => null);
      return { name, subject, amount, usage: usage?.ok ? usage.value : null };
    }),
  );
  const cedar = plan.cedar
    ? { version: plan.cedar.version, decision: plan.cedar.decision, policies: plan.cedar.policies }
    : undefined;
  return { ...input, ...(limits.length > 0 ? { limits } : {}), ...(cedar ? { cedar } : {}) };
}
