// A rollback's compensations approved as one plan (issue 35 item 4), the run's side. The plan is
// the rollback's steps still to come or under way, each with the input hash its compensation
// freezes (the submitted one's, or the one `prepareCompensation` renders now for a step not yet
// reached) and the compensating tool's version. A person's approval of the plan is a row bound to
// exactly those (hash, version) pairs (`rollback_approvals`, cleared when a stopped rollback is
// asked again); when the rollback reaches a step whose compensation awaits approval with a listed
// pair, the run casts that person's decision through the compensation's own `decide` — four eyes,
// routes and quorum, step-up, expiry and a changed tool judged there, as for a single approval.
// Another pair (the input changed since) gets nothing: that step asks a person as before. A
// standing refusal is remembered (`rollback_refusals`), so the step's looks do not ask again.
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { z } from "zod";
import { DECIDER_VIA } from "../../domain/journal/trace-event.ts";
import type { Decider } from "../../domain/operation/state.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import {
  approvalsCovering,
  checkPlanApproval,
  planned,
  refusalBasis,
  standingRefusal,
  type PlanApproval,
  type PlanEntry,
  type PlanItem,
  type RollbackView,
} from "../../domain/rollback.ts";
import type { RunState } from "../../domain/turn/turn.ts";
import { hostPolicy } from "../../config.ts";
import * as catalog from "../../tools/catalog.ts";
import type { OperationView } from "../operation/contracts.ts";
import { decodeOrNull } from "../store/codec.ts";
import { decodeToolSource } from "../store/run-rows.ts";
import { operationStub } from "../stubs.ts";
import { compensationRow, prepareCompensation } from "./compensate.ts";
import type { RunError, RunParts } from "./contracts.ts";

export type RollbackPlan = {
  state: RollbackView["state"];
  items: PlanItem[];
  approvals: PlanApproval[];
};
export type PlanDecider = Decider;

/** The plan of a running rollback (`view`: the run's rollback now), what a person approves. */
export async function planOf(
  parts: RunParts,
  run: RunState,
  view: RollbackView | null,
): Promise<Result<RollbackPlan, RunError>> {
  if (!view)
    return err({ code: "rollback_not_running", detail: "the run was not cancelled with rollback" });
  const items: PlanItem[] = [];
  if (view.state === "running")
    for (const step of planned(view.steps)) {
      const item = await itemOf(parts, run, step.operation_id, step.compensation_id);
      if (!item.ok) return item;
      items.push(item.value);
    }
  return ok({ state: view.state, items, approvals: planApprovals(parts) });
}

/** A step's compensation: the stored one once submitted, else rendered now (nothing recorded). */
async function itemOf(
  parts: RunParts,
  run: RunState,
  originalId: string,
  compensationId: string | null,
): Promise<Result<PlanItem, RunError>> {
  const row = compensationId ? compensationRow(parts, originalId) : null;
  if (row && row.compensation_id === compensationId) {
    const source = decodeToolSource(row.source);
    const spec = catalog.compileTool(source, hostPolicy(parts.env));
    return ok({
      operation_id: originalId,
      tool: row.tool,
      compensation_tool: row.tool,
      compensation_id: compensationId,
      input_hash: row.input_hash,
      policy_version: await catalog.toolVersion(source),
      arguments: JSON.parse(row.input) as Record<string, unknown>,
      four_eyes: spec.ok ? spec.value.approval.fourEyes : true,
      step_up: spec.ok ? spec.value.approval.stepUp === "passkey" : false,
    });
  }
  const original = await operationStub(parts.env, originalId)
    .compensationSource(run.tenantId)
    .catch(() => null);
  if (!original?.ok)
    return err({
      code: "unavailable",
      detail: `the rollback's step ${originalId} did not answer; read the plan again`,
    });
  const prepared = await prepareCompensation(parts, run.tenantId, original.value, run);
  if (!prepared.ok) return prepared;
  const { source, spec, input } = prepared.value;
  const canonical = canonicalJson(input);
  return ok({
    operation_id: originalId,
    tool: original.value.tool,
    compensation_tool: spec.name,
    compensation_id: null,
    input_hash: await sha256Hex(canonical),
    policy_version: await catalog.toolVersion(source),
    // As a submit freezes it (canonical key order), like a submitted step's.
    arguments: JSON.parse(canonical) as Record<string, unknown>,
    four_eyes: spec.approval.fourEyes,
    step_up: spec.approval.stepUp === "passkey",
  });
}

/**
 * Stores `by`'s approval of the plan as `shown` to them (checkPlanApproval: exactly the plan's
 * (hash, version) pairs now, not the run's own user under four eyes), bound to those pairs. The
 * caller then drives the rollback (rollback.ts), which casts it.
 */
export async function approvePlan(
  parts: RunParts,
  run: RunState,
  view: RollbackView | null,
  by: PlanDecider,
  shown: readonly PlanEntry[],
  reason: string | null,
): Promise<Result<RollbackPlan, RunError>> {
  const plan = await planOf(parts, run, view);
  if (!plan.ok) return plan;
  const checked = checkPlanApproval(plan.value.items, shown, by.id, run.user.id);
  if (!checked.ok) return checked;
  const approval: PlanApproval = {
    by: by.id,
    via: by.via,
    scopes: by.scopes,
    ...(by.claims ? { claims: by.claims } : {}),
    // What the person was shown (equal to the plan now, checked above): a tool PUT again after
    // this check freezes its next compensation under another version, which this does not cover.
    input_hashes: shown.map((e) => e.input_hash),
    policy_versions: shown.map((e) => e.policy_version),
    reason,
    at_ms: Date.now(),
  };
  parts.store.transaction(() => {
    parts.store.ensureTable("rollback_approvals");
    parts.store.run("INSERT INTO rollback_approvals (data) VALUES (?)", JSON.stringify(approval));
  });
  return ok({ ...plan.value, approvals: planApprovals(parts) });
}

/** A row that does not decode approves nothing (fails closed: its step asks a person). */
const PlanApprovalCodec: z.ZodType<PlanApproval> = z.strictObject({
  by: z.string(),
  via: z.enum(DECIDER_VIA),
  scopes: z.array(z.string()),
  claims: z.record(z.string(), z.array(z.string())).optional(),
  input_hashes: z.array(z.string()),
  policy_versions: z.array(z.string()),
  reason: z.string().nullable(),
  at_ms: z.number(),
});

/** A stored plan approval: its row's `seq` and text name it (a refusal remembered for it). */
type Stored = PlanApproval & { seq: number; data: string };

function storedApprovals(parts: RunParts): Stored[] {
  if (!parts.store.exists("rollback_approvals")) return [];
  return parts.store
    .all<{ seq: number; data: string }>("SELECT seq, data FROM rollback_approvals ORDER BY seq")
    .flatMap((row) => {
      const approval = decodeOrNull(PlanApprovalCodec, row.data);
      return approval ? [{ ...approval, seq: row.seq, data: row.data }] : [];
    });
}

export function planApprovals(parts: RunParts): PlanApproval[] {
  return storedApprovals(parts).map(({ seq: _seq, data: _data, ...approval }) => approval);
}

/** A stopped rollback asked again is a new plan: approvals of the old one do not carry over. */
export function clearPlanApprovals(parts: RunParts): void {
  if (parts.store.exists("rollback_approvals")) parts.store.run("DELETE FROM rollback_approvals");
  if (parts.store.exists("rollback_refusals")) parts.store.run("DELETE FROM rollback_refusals");
}

/**
 * The step's compensation awaits approval: each plan approval listing its (hash, version) is cast
 * as that person's decision, through the operation's own checks. A refusal (four eyes, not in the
 * route, a step-up) leaves it to a person: `refused` says whose and why, for the step's detail.
 * A standing refusal is remembered per (plan approval, compensation) with what it was judged on
 * (domain/rollback.ts refusalBasis): the 15 s looks at the step do not ask again, until an edit
 * or an escalation changes that basis.
 */
export async function castPlanApprovals(
  parts: RunParts,
  tenantId: string,
  compensationId: string,
  view: OperationView,
): Promise<{ decided: boolean; refused: string | null }> {
  const approval = view.approval;
  const none = { decided: false, refused: null };
  if (view.phase !== "awaiting_approval" || approval?.state !== "pending") return none;
  const covering = approvalsCovering(
    storedApprovals(parts),
    approval.input_hash,
    approval.policy_version,
  );
  const basis = refusalBasis(approval);
  const refused: string[] = [];
  for (const plan of covering) {
    const known = refusalOf(parts, plan.seq, compensationId, basis);
    if (known) {
      refused.push(`${plan.by}: ${known}`);
      continue;
    }
    const decided = await operationStub(parts.env, compensationId)
      .decide(tenantId, {
        verdict: "approve",
        approverId: plan.by,
        via: plan.via,
        scopes: plan.scopes,
        ...(plan.claims ? { claims: plan.claims } : {}),
        reason: plan.reason,
        inputHash: approval.input_hash,
        toolVersion: approval.policy_version,
      })
      .catch(() => null);
    if (decided?.ok && decided.value.decided) return { decided: true, refused: null };
    if (decided && !decided.ok) {
      refused.push(`${plan.by}: ${decided.error.code}`);
      if (standingRefusal(decided.error.code))
        remember(parts, plan, compensationId, basis, decided.error.code);
    }
  }
  return refused.length === 0
    ? none
    : {
        decided: false,
        refused: `the plan's approval could not approve this compensation (${refused.join(", ")}); a person decides it`,
      };
}

function refusalOf(parts: RunParts, seq: number, compensationId: string, basis: string) {
  if (!parts.store.exists("rollback_refusals")) return null;
  return (
    parts.store.one<{ code: string }>(
      "SELECT code FROM rollback_refusals WHERE approval_seq = ? AND compensation_id = ? AND basis = ?",
      seq,
      compensationId,
      basis,
    )?.code ?? null
  );
}

/**
 * Only while the approval is still the one cast: the decide was awaited, and a rollback asked again
 * meanwhile clears the approvals (a new one may take the same seq).
 */
function remember(
  parts: RunParts,
  plan: Stored,
  compensationId: string,
  basis: string,
  code: string,
): void {
  parts.store.ensureTable("rollback_refusals");
  parts.store.run(
    `INSERT OR REPLACE INTO rollback_refusals (approval_seq, compensation_id, basis, code)
     SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM rollback_approvals WHERE seq = ? AND data = ?)`,
    plan.seq,
    compensationId,
    basis,
    code,
    plan.seq,
    plan.data,
  );
}
