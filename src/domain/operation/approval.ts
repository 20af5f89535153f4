// Approval, pure: whether a frozen input needs a person's decision, whether a decision may be
// taken, and the awaiting_approval arm (ask, preview, decide, expire). An approval binds to
// operation id + input hash + policy version (the hash of the tool's source) + its approval hash (a
// payment's own, `approvalHashOf`), expires, is decided once and by default not by the run's own
// user (four eyes). Approval is not authorization: the run's scopes, deadline and tool are checked
// again after it (`decide` carries that `denial`).
// A routed approval (issue 35, route.ts) counts approve votes until quorum; its alarm also reminds
// and escalates, and never approves.
import type { ApprovalRule, Comparison } from "../../tools/spec.ts";
import { canonicalJson } from "../canonical-json.ts";
import { traceEvent } from "../journal/trace-event.ts";
import { sha256HexSync } from "../trace-chain.ts";
import { err, ok, type Result } from "../result.ts";
import { countVote, mayVote, nextRouteAtMs, routeAlarm, startRouting, voterOf } from "./route.ts";
import { beginExecution, closeApproval, holdStep, record, unchanged } from "./steps.ts";
import type {
  ApprovalRequest,
  Decision,
  DecisionRefusal,
  Effect,
  OperationEvent,
  OperationPlan,
  OperationState,
  Outcome,
  Step,
  TraceEvent,
  TransitionError,
} from "./state.ts";

export const DEFAULT_APPROVAL_TTL_MS = 15 * 60_000;

/**
 * `when` rules ask when ANY listed condition holds (the conservative reading of a list of reasons
 * to ask). A condition on a field the input does not carry asks too: a rule that cannot be
 * evaluated must not let an irreversible action through unasked.
 */
export function needsApproval(rule: ApprovalRule, input: Record<string, unknown>): boolean {
  switch (rule.mode) {
    case "always":
      return true;
    case "never":
      return false;
    case "when":
      return Object.entries(rule.when ?? {}).some(
        ([field, comparison]) => input[field] === undefined || matches(comparison, input[field]),
      );
  }
}

function matches(c: Comparison, value: unknown): boolean {
  const n = typeof value === "number" ? value : null;
  // A numeric comparison against a non-number cannot be decided: ask.
  if (
    (c.gt !== undefined || c.gte !== undefined || c.lt !== undefined || c.lte !== undefined) &&
    n === null
  )
    return true;
  if (c.gt !== undefined && n! > c.gt) return true;
  if (c.gte !== undefined && n! >= c.gte) return true;
  if (c.lt !== undefined && n! < c.lt) return true;
  if (c.lte !== undefined && n! <= c.lte) return true;
  if (c.eq !== undefined && value === c.eq) return true;
  if (c.in !== undefined && c.in.some((item) => item === value)) return true;
  return false;
}

const PAYMENT_BINDING = "toolgate/payment-approval/v1:";

/**
 * What a decision binds to (`approval_hash`): a plain approval's is its input hash; a payment's
 * (x402, issue 37) hashes the input hash with the requirement, so an operation asked twice — its
 * own approval, then its payment's — has two, and a decision made for the first (a batch retried,
 * a form posted twice) can never approve the payment its approver did not see.
 */
export function approvalHashOf({
  inputHash,
  payment,
}: Pick<ApprovalRequest, "inputHash" | "payment">): string {
  if (!payment) return inputHash;
  const { amount, asset, network, payTo } = payment;
  return sha256HexSync(
    `${PAYMENT_BINDING}${canonicalJson({ input_hash: inputHash, amount, asset, network, pay_to: payTo })}`,
  );
}

/** Checks a decision against the request it answers (expiry is the state machine's: it records it). */
export function checkDecision(
  request: ApprovalRequest,
  decision: Decision,
): Result<true, DecisionRefusal> {
  if (request.fourEyes && decision.approverId === request.requestedBy) {
    return err({
      code: "self_approval",
      detail: `${decision.approverId} asked for this call and cannot decide it (four eyes); another person must`,
    });
  }
  // The editor's approval of their own edit would be one person deciding alone (issue 35 item 2).
  if (
    request.fourEyes &&
    decision.verdict === "approve" &&
    decision.approverId === request.editedBy
  )
    return err({
      code: "self_approval",
      detail: `${decision.approverId} edited these arguments and cannot approve their own edit (four eyes); another person must`,
    });
  // Rejecting sends nothing, so only an approval needs the step-up (and it binds to the input hash).
  if (
    request.stepUp === "passkey" &&
    decision.verdict === "approve" &&
    decision.stepUp !== "passkey"
  )
    return err({
      code: "step_up_required",
      detail:
        "approving this call needs a passkey assertion made for it (approval.step_up.challenge) with its input_hash",
    });
  if (decision.inputHash !== null && decision.inputHash !== request.inputHash)
    return err({
      code: "approval_mismatch",
      field: "input_hash",
      detail: "the decision names other arguments than this operation holds",
    });
  if (decision.toolVersion !== null && decision.toolVersion !== request.toolVersion)
    return err({
      code: "approval_mismatch",
      field: "policy_version",
      detail: "the decision names another version of the tool than this operation holds",
    });
  // A decision naming only the arguments binds to a plain approval of them, never to a payment's.
  const bound = approvalHashOf(request);
  const named = decision.approvalHash ?? decision.inputHash;
  if (named !== null && named !== bound)
    return err({
      code: "approval_mismatch",
      field: "approval_hash",
      detail: request.payment
        ? "the decision was made for another approval than the one pending: this one is for a payment (approval.payment); decide it by its approval_hash"
        : "the decision was made for another approval than the one pending (its approval_hash)",
    });
  return ok(true);
}

/** Nothing is sent: the expiry alarm is set, the inbox opened, the preview asked for if the tool has one. */
export function requestApproval(
  approval: NonNullable<OperationPlan["approval"]>,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  const state: AwaitingApproval = approval.route
    ? { phase: "awaiting_approval", requestedAtMs: nowMs, routing: startRouting(nowMs) }
    : { phase: "awaiting_approval", requestedAtMs: nowMs };
  return {
    state,
    effects: [
      { kind: "set_alarm", atMs: approvalAlarmAtMs(state, { approval })! },
      { kind: "inbox", state: "pending" },
      ...(approval.preview ? [{ kind: "send_preview" } as const] : []),
    ],
    trace: [
      ...trace,
      {
        type: "awaiting_approval",
        at_ms: nowMs,
        policy_version: approval.toolVersion,
        requested_by: approval.requestedBy,
        expires_at_ms: approval.expiresAtMs,
      },
    ],
    changed: true,
  };
}

/** The approver's preview came back: shown with the request, it changes nothing else. */
export function onPreview(
  state: OperationState,
  event: Extract<OperationEvent, { type: "preview_finished" }>,
  nowMs: number,
): Step {
  if (state.phase !== "awaiting_approval") return unchanged(state);
  return {
    state,
    effects: [{ kind: "inbox", state: "pending" }],
    trace: [{ type: "preview", at_ms: nowMs, ...event.preview }],
    changed: true,
  };
}

/** A person's decision on an awaiting call: expired, refused (four eyes, mismatch), rejected, or the first attempt. */
export function onDecide(
  state: OperationState,
  event: Extract<OperationEvent, { type: "decide" }>,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (state.phase !== "awaiting_approval" || !plan.approval)
    return err({ code: "not_awaiting_approval", phase: state.phase });
  if (nowMs >= plan.approval.expiresAtMs) return ok(expireApproval(state, nowMs));
  const checked = checkDecision(plan.approval, event.decision);
  if (!checked.ok) return checked;
  const { route } = plan.approval;
  const { routing } = state;
  if (route && routing) {
    const may = mayVote({ ...plan.approval, route }, routing, event.decision);
    if (!may.ok) return may;
  }
  const { verdict, approverId, via, stepUp, reason } = event.decision;
  // A delegate's decision is its delegator's (`by`); who pressed stays on record (`cast_by`).
  const by = voterOf(event.decision);
  const castBy = by !== approverId ? { cast_by: approverId } : {};
  const decided: TraceEvent = {
    type: "approval_decided",
    at_ms: nowMs,
    verdict,
    by,
    via,
    ...(stepUp ? { step_up: stepUp } : {}),
    reason,
    ...castBy,
  };
  // Routed: an approve is one vote; quorum's vote decides. A reject by anyone who may vote rejects
  // at once (sending nothing is the safe side: one entitled "no" outweighs any number of "yes").
  let quorum: { voted: TraceEvent; effect: Effect } | null = null;
  if (route && routing && verdict === "approve") {
    const counted = countVote(routing, event.decision, nowMs);
    // The same person again (or their delegate): counted once, nothing changes.
    if (!counted) return ok(unchanged(state));
    const votes = counted.votes.length;
    const voted = traceEvent("approval_voted", nowMs, {
      by,
      ...castBy,
      via,
      votes,
      quorum: route.quorum,
    });
    if (votes < route.quorum)
      return ok({
        state: { ...state, routing: counted },
        effects: [{ kind: "route", what: "voted" }],
        trace: [voted],
        changed: true,
      });
    quorum = { voted, effect: { kind: "route", what: "quorum_reached" } };
  }
  const decide = (step: Step): Step =>
    quorum
      ? { ...step, trace: [quorum.voted, ...step.trace], effects: [quorum.effect, ...step.effects] }
      : step;
  if (verdict === "reject") {
    const why = reason ? `: ${reason}` : "";
    return ok(
      closeApproval(
        record(
          0,
          {
            status: "rejected",
            code: "approval_rejected",
            message: `A person rejected this call${why}. It was not executed. Do not retry; tell the user.`,
            // The words themselves too, untouched by the sentence around them (issue 35).
            ...(reason ? { reason } : {}),
          },
          "attempt",
          nowMs,
          [decided],
        ),
        "rejected",
      ),
    );
  }
  if (event.denial)
    return ok(
      decide(
        closeApproval(
          record(0, event.denial, "attempt", nowMs, [
            decided,
            { type: "denied", at_ms: nowMs, code: event.denial.code },
          ]),
          "approved",
        ),
      ),
    );
  // Frozen (hold): the decision is recorded and the approval closed; the send waits for the lift.
  if (event.hold)
    return ok(
      decide(
        closeApproval(holdStep(event.hold, { phase: "unsent" }, nowMs, [decided]), "approved"),
      ),
    );
  const started = beginExecution(plan, nowMs, [decided]);
  return ok(
    decide({ ...started, effects: [...started.effects, { kind: "inbox", state: "approved" }] }),
  );
}

type AwaitingApproval = Extract<OperationState, { phase: "awaiting_approval" }>;

/** When an awaiting call's alarm is due: its expiry, or sooner the route's reminder or escalation. */
export function approvalAlarmAtMs(
  state: AwaitingApproval,
  plan: Pick<OperationPlan, "approval">,
): number | null {
  if (!plan.approval) return null;
  const { route } = plan.approval;
  const routeAt = route && state.routing ? nextRouteAtMs(route, state.routing) : null;
  return Math.min(plan.approval.expiresAtMs, routeAt ?? Infinity);
}

/**
 * A person's edit (issue 35 item 2): only while it awaits approval and before its expiry, and only
 * of the version the person looked at (a stale hash is refused, nothing changes). Nothing is sent:
 * it still awaits approval — of the new version, which the shell writes with this step — and the
 * inbox shows the new hash. The expiry stands (an edit does not buy time).
 */
export function onEdit(
  state: OperationState,
  event: Extract<OperationEvent, { type: "edit" }>,
  plan: OperationPlan,
  nowMs: number,
): Result<Step, TransitionError> {
  if (state.phase !== "awaiting_approval" || !plan.approval)
    return err({ code: "not_awaiting_approval", phase: state.phase });
  if (nowMs >= plan.approval.expiresAtMs) return ok(expireApproval(state, nowMs));
  const { fromHash, inputHash, by, via, reason } = event.edit;
  if (fromHash !== plan.approval.inputHash)
    return err({
      code: "approval_mismatch",
      field: "input_hash",
      detail: "the edit starts from other arguments than this operation holds (edited meanwhile?)",
    });
  return ok({
    state,
    effects: [{ kind: "inbox", state: "pending" }],
    trace: [
      {
        type: "approval_edited",
        at_ms: nowMs,
        by,
        via,
        from_input_hash: fromHash,
        input_hash: inputHash,
        reason,
      },
    ],
    changed: true,
  });
}

function expireApproval(
  state: Extract<OperationState, { phase: "awaiting_approval" }>,
  nowMs: number,
): Step {
  const outcome: Outcome = {
    status: "rejected",
    code: "approval_expired",
    message:
      "Nobody approved this call in time, so it was not executed. Do not retry now; tell the user it needs a person's approval.",
  };
  return closeApproval(
    record(0, outcome, "attempt", nowMs, [
      { type: "approval_expired", at_ms: nowMs, requested_at_ms: state.requestedAtMs },
    ]),
    "expired",
  );
}

/**
 * The alarm of an awaiting call: its expiry, or a route's reminder and escalation (each once, even
 * when the alarm comes late or twice). Escalating asks the next group; nothing here approves.
 */
export function onApprovalAlarm(state: AwaitingApproval, plan: OperationPlan, nowMs: number): Step {
  // Alarms are at-least-once and may fire early after a restart: expire only when due.
  if (plan.approval && nowMs < plan.approval.expiresAtMs) {
    const { route } = plan.approval;
    const fired = route && state.routing ? routeAlarm(route, state.routing, nowMs) : null;
    if (!fired)
      return {
        ...unchanged(state),
        effects: [{ kind: "set_alarm", atMs: approvalAlarmAtMs(state, plan)! }],
      };
    const next: AwaitingApproval = { ...state, routing: fired.routing };
    return {
      state: next,
      effects: [
        { kind: "set_alarm", atMs: approvalAlarmAtMs(next, plan)! },
        ...fired.trace.map((t): Effect => ({
          kind: "route",
          what: t.type === "approval_reminded" ? "reminded" : "escalated",
        })),
      ],
      trace: fired.trace,
      changed: true,
    };
  }
  return expireApproval(state, nowMs);
}
