// Rollback (issue 22): `POST /v1/runs/{id}/cancel { "rollback": true }` compensates the run's
// applied writes in REVERSE order of when they were applied, each at most once, one at a time:
// the next compensation is submitted only once the previous one is recorded as succeeded; one that
// fails, is rejected or whose outcome is unknown stops the rollback there (a person decides).
// Pure: the plan from what the run's operations said, and the next step from what the current
// compensation says. The shell (durable/run/rollback.ts) keeps one row per step and its alarm
// drives the next step, so a crash in the middle resumes where it stood.
import { compensable, type OriginalFacts } from "./compensation.ts";
import { tookEffect } from "./operation/index.ts";
import type { RollbackState, RollbackStep, StepState } from "./public-shapes.ts";
import { err, ok, type Result } from "./result.ts";
import type { DeciderVia } from "./journal/trace-event.ts";

// The view's shapes have no imports, so the client package ships them (public-shapes.ts).
export type { RollbackState, RollbackStep, RollbackView, StepState } from "./public-shapes.ts";

/** What one of the operations the run's turns reference said when the rollback was planned. */
export type RunWrite = {
  operation_id: string;
  /** The run that created it: with a tenant-scoped key, another run's call may join or conflict with it. */
  run_id: string;
  tool: string;
  risk: string;
  facts: OriginalFacts;
  recorded_at_ms: number | null;
};

/**
 * Run `runId`'s steps, newest applied first; reads and writes that applied nothing are not steps.
 * Only what this run created is its to undo: an operation one of its calls joined (the same
 * tenant-scoped key and input) or conflicted with (other input) belongs to its creator's rollback,
 * so it is neither a step here nor named in this run's report (audit 2026-12-05 N3).
 */
export function planRollback(runId: string, all: readonly RunWrite[]): RollbackStep[] {
  const writes = all.filter((w) => w.run_id === runId);
  const step = (w: RunWrite, state: StepState, detail: string | null): RollbackStep => ({
    operation_id: w.operation_id,
    tool: w.tool,
    compensation_id: null,
    state,
    detail,
  });
  const unsettled = writes
    .filter((w) => w.risk !== "read" && ["outcome_unknown", "reconciling"].includes(w.facts.phase))
    .map((w) =>
      step(
        w,
        "unsettled",
        "its outcome is unknown: resolve it, then compensate it if it succeeded",
      ),
    );
  const applied = writes
    .filter((w) => w.risk !== "read" && compensable({ ...w.facts, declared: true }).ok)
    // Reverse order of application; ties (same millisecond) keep the reverse of the run's order.
    .map((w, index) => ({ w, index }))
    .sort((a, b) => b.w.recorded_at_ms! - a.w.recorded_at_ms! || b.index - a.index)
    .map(({ w }) =>
      w.facts.declared
        ? step(w, "pending", null)
        : step(w, "not_compensable", "its tool declares no compensate; undo it by hand"),
    );
  return [...unsettled, ...applied];
}

/**
 * How the current step's compensation stands (its operation's phase and recorded status).
 * `settling`: an unknown outcome it keeps settling by itself (late resends or lookups).
 */
export type Observed = {
  phase: string;
  status: string | null;
  /** The recorded outcome's code when it did not succeed. */
  code: string | null;
  message: string | null;
  settling?: boolean;
};

/** The current step's next state from its compensation: null while it is still under way. */
export function stepAfter(observed: Observed): { state: StepState; detail: string | null } | null {
  if (
    observed.phase === "recorded" &&
    observed.status !== "succeeded" &&
    tookEffect(observed.status, observed.code)
  )
    return {
      state: "compensated",
      detail:
        "the compensation took effect (the tool answered success), but its answer could not be read",
    };
  if (observed.phase === "recorded")
    return observed.status === "succeeded"
      ? { state: "compensated", detail: null }
      : {
          state: "failed",
          detail: `the compensation was recorded as ${observed.status}${observed.message ? `: ${observed.message}` : ""}; the rollback stopped here, a person decides`,
        };
  // Settling by itself (a keyed refund resent with its key, a status lookup): still under way.
  if (observed.phase === "outcome_unknown" && observed.settling) return null;
  if (observed.phase === "outcome_unknown")
    return {
      state: "outcome_unknown",
      detail:
        "the compensation's outcome is unknown; the rollback stopped here: resolve it (POST /v1/operations/{id}/resolve), then cancel with rollback again to go on",
    };
  return null;
}

/** The rollback as a whole: stopped at a failed step, completed when no step is left to do. */
export function rollbackState(steps: readonly RollbackStep[]): RollbackState {
  if (steps.some((s) => s.state === "failed" || s.state === "outcome_unknown")) return "stopped";
  return steps.some((s) => s.state === "pending" || s.state === "submitted")
    ? "running"
    : "completed";
}

/** The step to work on: the first still to do (the steps are done strictly in order). */
export const currentStep = (steps: readonly RollbackStep[]): number =>
  rollbackState(steps) === "running"
    ? steps.findIndex((s) => s.state === "pending" || s.state === "submitted")
    : -1;

/**
 * Asked again (cancel with rollback: true) after it stopped: the step it stopped at is worked on
 * again. One whose compensation's outcome was unknown is looked at again (a person may have
 * resolved it since: `submitted`); one that failed is asked again (`pending`): the compensation
 * asks anew only if the last one applied nothing (compensation.ts `asksAnew`), so a refund that
 * took effect is never made twice. Null: nothing to resume.
 */
export function resumable(
  steps: readonly RollbackStep[],
): { index: number; state: "submitted" | "pending" } | null {
  const index = steps.findIndex((s) => s.state === "outcome_unknown" || s.state === "failed");
  if (index < 0) return null;
  return { index, state: steps[index]!.state === "outcome_unknown" ? "submitted" : "pending" };
}

/**
 * One compensation of a rollback's plan as a person approves it (issue 35 item 4): the step's
 * original, the compensating tool, the input hash a submit freezes (the submitted one's, or the one
 * rendered now for a step not yet reached) and the tool's version the approval binds to.
 */
export type PlanItem = {
  operation_id: string;
  tool: string;
  compensation_tool: string;
  /** Null until the step is reached and its compensation submitted. */
  compensation_id: string | null;
  input_hash: string;
  policy_version: string;
  arguments: Record<string, unknown>;
  /** The compensating tool's four eyes: the run's own user cannot approve it. */
  four_eyes: boolean;
  /** A passkey step-up: a plan carries no assertion, so this step still asks a person. */
  step_up: boolean;
};

/** A person's approval of the plan: one decision per compensation whose (hash, version) it lists. */
export type PlanApproval = {
  by: string;
  via: DeciderVia;
  scopes: string[];
  /** The approver's verified Access claims (a route's groups by attribute), when Access verified them. */
  claims?: Record<string, string[]>;
  input_hashes: string[];
  policy_versions: string[];
  reason: string | null;
  at_ms: number;
};

export type PlanRefusal =
  | { code: "rollback_not_running"; detail: string }
  | { code: "approval_mismatch"; field: "input_hash" | "policy_version"; detail: string }
  | { code: "self_approval"; detail: string };

/** What the approver saw of one compensation (GET …/rollback's item): its hash and its tool's version. */
export type PlanEntry = { input_hash: string; policy_version: string };

/** The steps a plan lists: those whose compensation is still to come or still under way. */
export const planned = (steps: readonly RollbackStep[]): RollbackStep[] =>
  steps.filter((s) => s.state === "pending" || s.state === "submitted");

/**
 * Whether `approverId` may approve the plan `items` by naming `shown`: exactly the plan's (hash,
 * version) pairs, in its order — a plan that changed since the person looked (other arguments, or
 * a compensating tool PUT again with the same arguments) is another plan, and the approval binds to
 * what was shown, never to what is there when the POST arrives — and never the run's own user when
 * any compensation in it has four eyes. One refusal for the whole plan, nothing stored.
 */
export function checkPlanApproval(
  items: readonly PlanItem[],
  shown: readonly PlanEntry[],
  approverId: string,
  runUser: string,
): Result<true, PlanRefusal> {
  if (items.length === 0)
    return err({
      code: "rollback_not_running",
      detail: "the rollback has no compensation left to approve",
    });
  const again = "(read GET …/rollback again); nothing was approved";
  if (shown.length !== items.length || shown.some((e, i) => e.input_hash !== items[i]!.input_hash))
    return err({
      code: "approval_mismatch",
      field: "input_hash",
      detail: `the plan is now ${items.length} compensation(s) with other hashes than those named ${again}`,
    });
  const changed = items.findIndex((item, i) => item.policy_version !== shown[i]!.policy_version);
  if (changed >= 0)
    return err({
      code: "approval_mismatch",
      field: "policy_version",
      detail: `compensation ${changed + 1} (${items[changed]!.compensation_tool}) is now another version of its tool than the one named ${again}`,
    });
  if (approverId === runUser && items.some((i) => i.four_eyes))
    return err({
      code: "self_approval",
      detail: `${approverId} is the run's user and cannot approve its compensations (four eyes); another person must. Nothing was approved`,
    });
  return ok(true);
}

/** The plan approvals that cover a compensation frozen with `inputHash` under `toolVersion`. */
export const approvalsCovering = <A extends PlanApproval>(
  approvals: readonly A[],
  inputHash: string,
  toolVersion: string,
): A[] =>
  approvals.filter((a) =>
    a.input_hashes.some((h, i) => h === inputHash && a.policy_versions[i] === toolVersion),
  );

/**
 * A compensation's refusal of a plan approval that stands (it is remembered, not cast again on each
 * look): one judged on the approver and the compensation — four eyes, a route's groups, a passkey
 * step-up, another hash or version. Anything else (the run did not answer, the state moved on) is
 * the moment's: the next look casts again.
 */
export const standingRefusal = (code: string): boolean =>
  ["self_approval", "not_an_approver", "step_up_required", "approval_mismatch"].includes(code);

/**
 * What such a refusal was judged on besides the plan approval itself (a stored row, never changed):
 * the compensation's frozen (input hash, tool version) — a person's edit makes another, and may
 * make another editor — and the route's step reached, since an escalation adds a group the
 * approver may be in. The requester and the tool's step-up are the frozen version's. Another
 * basis: the approval is cast again.
 */
export const refusalBasis = (approval: {
  input_hash: string;
  policy_version: string;
  route: { step: number } | null;
}): string =>
  JSON.stringify([approval.input_hash, approval.policy_version, approval.route?.step ?? null]);
