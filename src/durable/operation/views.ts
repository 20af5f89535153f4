// What callers see of an operation, read from its log as it stands (never changed by reading): the
// reply to a submit, the peek, the full view with its approval story, what an approver sees (hidden
// fields included, never copied elsewhere), and the approvals inbox's redacted item. A shadow
// run's view names the production request it would have sent (secrets named, never valued).
import { paymentViewOf } from "./payment.ts";
import { routeData, routingOfTrace } from "../../domain/operation/route.ts";
import { stepUpChallenge } from "../../domain/step-up.ts";
import type { Envelope } from "../../domain/envelope.ts";
import { envelopeFor, withEdit, withPayment } from "../../domain/envelope.ts";
import { paidCallOf } from "../../domain/payment.ts";
import { firstOf } from "../../domain/journal/trace-event.ts";
import {
  approvalHashOf,
  controlsOf,
  isSettled,
  settlingUntilMs,
  type OperationState,
} from "../../domain/operation/index.ts";
import { idempotencyConflict } from "../../domain/operation/plan.ts";
import type { ApprovalPayment, TraceEvent, WouldSend } from "../../domain/operation/state.ts";
import { presentPointers, scrub } from "../../domain/redact.ts";
import type { Preview } from "../../tools/http-tool.ts";
import type { ApprovalItem } from "../tenant/inbox.ts";
import type {
  ApprovalInput,
  ApprovalView,
  Head,
  OperationPeek,
  OperationReply,
  OperationView,
  SubmitRequest,
} from "./contracts.ts";
import { proposedHash, toolName, type OperationLog } from "./log.ts";
import { undoViewOf } from "./compensation.ts";
import { redactedCallOf } from "./redacted-view.ts";
import { decodeInput } from "../store/operation-rows.ts";

/** What the approvals inbox keeps of a preview's body (the operation keeps all of it). */
export const INBOX_PREVIEW_BYTES = 16 * 1024;

/** What an operation's view says about a shadow run (issue 22): the request frozen at its start, scrubbed. */
export type ShadowView = { shadow: boolean; would_have_sent: WouldSend | null };

function shadowViewOf(log: OperationLog, { frozen }: Head): ShadowView {
  const shadow = frozen.plan.shadow;
  if (!shadow) return { shadow: false, would_have_sent: null };
  return { shadow: true, would_have_sent: scrub(shadow.would_send, log.redaction(frozen)) };
}

export function envelopeOf(head: Head): Envelope {
  const { frozen } = head;
  const envelope = envelopeFor(frozen.id, head.state, frozen.plan.safety, Date.now());
  return withEdit(withPayment(envelope, paidCallOf(frozen.plan.payment)), frozen.edit?.model);
}

export function peekOf(head: Head): OperationPeek {
  return {
    phase: head.state.phase,
    run_id: head.frozen.run_id,
    // The model's hash: a re-proposal is matched against what it proposed, not a person's edit.
    input_hash: proposedHash(head.frozen),
    envelope: envelopeOf(head),
  };
}

/** A submit whose input differs from the operation's frozen one: refused, nothing changed. */
export function conflictReplyOf(existing: Head, req: SubmitRequest): OperationReply {
  return {
    envelope: idempotencyConflict(req.operationId),
    settled: true,
    terminal: false,
    inputHash: req.input.hash,
    executedBy: existing.frozen.call_id,
    rowsWritten: 0,
    recordedAtMs: null,
  };
}

/** `rowsWritten`: rows this instance wrote while serving the call (reported for the benchmark). */
export function replyOf(head: Head, req: SubmitRequest, rowsWritten: number): OperationReply {
  const { state, frozen } = head;
  const executedBy =
    frozen.run_id === req.runId ? frozen.call_id : `${frozen.run_id}:${frozen.call_id}`;
  return {
    envelope: envelopeOf(head),
    settled: isSettled(state),
    terminal: state.phase === "recorded",
    inputHash: proposedHash(frozen),
    executedBy,
    rowsWritten,
    recordedAtMs: state.phase === "recorded" ? state.recordedAtMs : null,
  };
}

export function viewOf(log: OperationLog): OperationView {
  const head = log.head()!;
  const { state, frozen } = head;
  const result = envelopeOf(head);
  return {
    operation_id: frozen.id,
    tool: toolName(frozen),
    run_id: frozen.run_id,
    call_id: frozen.call_id,
    phase: state.phase,
    input_hash: frozen.input_hash,
    ...(frozen.edit
      ? {
          edited: {
            proposed_input_hash: frozen.edit.proposed_hash,
            by: frozen.edit.by,
            via: frozen.edit.via,
            reason: frozen.edit.reason,
            model: frozen.edit.model,
          },
        }
      : {}),
    idempotency_key: frozen.plan.idempotencyKey,
    repeat_safety: frozen.plan.safety,
    created_at: new Date(frozen.created_at).toISOString(),
    // Messages can quote upstream text (shown in the console): hidden values are scrubbed from them.
    result:
      "message" in result
        ? { ...result, message: scrub(result.message, log.redaction(frozen)) }
        : result,
    late: state.phase === "recorded" && state.late,
    approval: approvalViewOf(log, head),
    ...(frozen.plan.grant
      ? {
          grant: {
            ...frozen.plan.grant,
            lapsed: firstOf(log.events(), "grant_lapsed") !== undefined,
          },
        }
      : {}),
    settling: settlingOf(head),
    held: heldOf(state),
    controls: controlsOf(state, frozen.plan, Date.now()),
    redacted: redactedCallOf(log, head),
    ...shadowViewOf(log, head),
    ...undoViewOf(log, head),
    ...paymentViewOf(log, head),
  };
}

/** Who holds it and since when (issue 34), or null. */
function heldOf(state: OperationState): OperationView["held"] {
  if (state.phase !== "held") return null;
  const since = new Date(state.heldAtMs).toISOString();
  const { hold } = state;
  return hold.kind === "freeze"
    ? { kind: "freeze", freeze_id: hold.freezeId, reason: hold.reason, since }
    : { kind: "pause", by: hold.by, since };
}

/** "Settling by itself — next try at …, until …" (retry-late.ts), or null. */
function settlingOf({ state }: Head): OperationView["settling"] {
  const untilMs = settlingUntilMs(state);
  if (untilMs === null) return null;
  const next = state.phase === "outcome_unknown" ? state.dueAtMs : null;
  return {
    next_try_at: next === null ? null : new Date(next).toISOString(),
    until: new Date(untilMs).toISOString(),
  };
}

/**
 * The log from the latest time a person was asked: a payment's approval (x402, issue 37) asks again
 * after an earlier approval was decided, and that decision, its preview and votes are not this
 * one's. `reopenedAtMs`: when it was asked again (null: asked once).
 */
function sinceAsked(log: OperationLog): { events: TraceEvent[]; reopenedAtMs: number | null } {
  const all = log.events();
  const asked = all.flatMap((e, i) => (e.type === "awaiting_approval" ? [i] : []));
  const last = asked.at(-1);
  if (asked.length < 2 || last === undefined) return { events: all, reopenedAtMs: null };
  return { events: all.slice(last), reopenedAtMs: all[last]!.at_ms };
}

/** The approval's story, from the log: requested, then decided, expired or cancelled. */
function approvalViewOf(log: OperationLog, { state, frozen }: Head): ApprovalView | null {
  const approval = frozen.plan.approval;
  if (!approval) return null;
  const { events, reopenedAtMs } = sinceAsked(log);
  // A standing grant approved it (issue 35): no person was asked, unless the grant lapsed first.
  if (frozen.plan.grant && !firstOf(log.events(), "grant_lapsed")) return null;
  const requestedAtMs = reopenedAtMs ?? frozen.created_at;
  const decided = firstOf(events, "approval_decided");
  const preview = firstOf(events, "preview");
  const verdictState = decided ? (decided.verdict === "approve" ? "approved" : "rejected") : null;
  const closed = firstOf(events, "approval_expired")
    ? "expired"
    : state.phase === "awaiting_approval"
      ? "pending"
      : "cancelled";
  return {
    state: verdictState ?? closed,
    requested_by: approval.requestedBy,
    requested_at: new Date(requestedAtMs).toISOString(),
    expires_at: new Date(approval.expiresAtMs).toISOString(),
    input_hash: approval.inputHash,
    policy_version: approval.toolVersion,
    approval_hash: approvalHashOf(approval),
    four_eyes: approval.fourEyes,
    step_up: approval.stepUp
      ? { kind: approval.stepUp, challenge: stepUpChallenge(frozen.id, approvalHashOf(approval)) }
      : null,
    shadow: frozen.plan.shadow !== undefined,
    compensates: frozen.plan.compensates ?? null,
    preview: preview
      ? {
          status: preview.status ?? null,
          body: preview.body ?? null,
          detail: preview.detail ?? null,
        }
      : null,
    decided_by: decided?.by ?? null,
    decided_via: decided?.via ?? null,
    decided_at: decided ? new Date(decided.at_ms).toISOString() : null,
    reason: decided?.reason ?? null,
    route: approval.route
      ? routeData(
          approval.route,
          state.phase === "awaiting_approval" && state.routing
            ? state.routing
            : routingOfTrace(events, requestedAtMs),
          approval.requestedBy,
        )
      : null,
    ...paymentAsked(approval),
  };
}

/** What a payment's approval (x402) pays, as the approver must see it; {}: not a payment's. */
const paymentAsked = ({ payment }: { payment?: ApprovalPayment }) =>
  payment
    ? {
        payment: {
          amount: payment.amount,
          asset: payment.asset,
          network: payment.network,
          pay_to: payment.payTo,
        },
      }
    : {};

/** The call as an approver must see it (null: it needs no approval). */
export function approvalInputOf(log: OperationLog, head: Head): ApprovalInput | null {
  const approval = head.frozen.plan.approval;
  if (!approval) return null;
  const input = decodeInput(head.frozen.input);
  const loaded = log.loadFixed();
  const spec = loaded.ok ? loaded.value.spec : null;
  const edit = head.frozen.edit;
  return {
    arguments: input,
    target: spec ? spec.describeTarget(input) : "(the tool no longer compiles)",
    hidden: presentPointers(head.frozen.redact ?? [], input),
    input_hash: approval.inputHash,
    policy_version: approval.toolVersion,
    approval_hash: approvalHashOf(approval),
    fixed: spec
      ? [...new Set([...Object.keys(spec.bind), ...spec.operationKey])].filter((f) =>
          Object.hasOwn(input, f),
        )
      : Object.keys(input),
    ...(edit ? { edited: { by: edit.by, reason: edit.reason, changes: edit.model.changes } } : {}),
    ...paymentAsked(approval),
    // Acting as the user (issue 36): whose connection it sends with (the route adds its health).
    ...(head.frozen.plan.credential ? { credential: head.frozen.plan.credential } : {}),
    ...(approval.stepUp
      ? {
          step_up: {
            kind: approval.stepUp,
            challenge: stepUpChallenge(head.frozen.id, approvalHashOf(approval)),
          },
        }
      : {}),
  };
}

/**
 * The approval request as the tenant's inbox shows it (GET /v1/approvals, the console), from the
 * log as it stands. Built inside the transition's transaction and carried by its outbox row: the
 * operation's own log is authoritative; the inbox row is derived and rewritten idempotently.
 */
export function approvalItem(log: OperationLog, state: ApprovalView["state"]): ApprovalItem | null {
  const head = log.head();
  const approval = head?.frozen.plan.approval;
  if (!head || !approval) return null;
  const view = viewOf(log);
  // The inbox (and the console page over it) shows the arguments as the trace does: redacted.
  const { arguments: shown, target } = view.redacted;
  return {
    operation_id: head.frozen.id,
    run_id: head.frozen.run_id,
    call_id: head.frozen.call_id,
    tool: view.tool,
    target,
    arguments: shown as Record<string, unknown>,
    state,
    requested_by: approval.requestedBy,
    requested_at_ms: view.approval
      ? Date.parse(view.approval.requested_at)
      : head.frozen.created_at,
    expires_at_ms: approval.expiresAtMs,
    input_hash: approval.inputHash,
    policy_version: approval.toolVersion,
    approval_hash: approvalHashOf(approval),
    preview: inboxPreview(view.approval?.preview ?? null),
    decided_by: view.approval?.decided_by ?? null,
    decided_via: view.approval?.decided_via ?? null,
    decided_at_ms: view.approval?.decided_at ? Date.parse(view.approval.decided_at) : null,
    reason: view.approval?.reason ?? null,
    ...(view.shadow ? { shadow: true as const } : {}),
    ...(view.compensates ? { compensates: view.compensates } : {}),
    ...(view.approval?.route ? { route: view.approval.route } : {}),
    ...(view.approval?.payment ? { payment: view.approval.payment } : {}),
    ...(head.frozen.plan.credential
      ? {
          credential: {
            provider: head.frozen.plan.credential.provider,
            user: head.frozen.plan.credential.user,
            scopes: head.frozen.plan.credential.scopes,
          },
        }
      : {}),
  };
}

/**
 * What the inbox keeps of a preview: its body up to INBOX_PREVIEW_BYTES of JSON text (beyond that,
 * that much of the text as a string, flagged `truncated`), so a page of requests stays small. The
 * operation keeps the whole preview (GET /v1/operations/{id}).
 */
export function inboxPreview(preview: Preview | null): ApprovalItem["preview"] {
  if (!preview) return null;
  const bytes = new TextEncoder().encode(JSON.stringify(preview.body ?? null));
  if (bytes.length <= INBOX_PREVIEW_BYTES) return { ...preview, truncated: false };
  // A character cut in half decodes as U+FFFD: dropped, so the kept text is only whole characters.
  const kept = new TextDecoder()
    .decode(bytes.subarray(0, INBOX_PREVIEW_BYTES))
    .replace(/\uFFFD+$/, "");
  return { ...preview, body: kept, truncated: true };
}
