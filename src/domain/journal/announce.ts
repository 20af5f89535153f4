// What the world is told of one committed operation step (DESIGN "The tenant plane", issue 18): the
// public events it reports, the updates the tenant's approvals inbox and unknown-outcomes list must
// apply, and the reservations of limits across runs it gives back. One pure decision: the shell
// gathers `call` (plain data about the operation), writes what this returns inside the step's
// transaction and hands it on through its outbox (durable/outbox/). Pure.
import type { LimitClaim } from "../limit/window.ts";
import { isTripClaim } from "../tripwire.ts";
import {
  tookEffect,
  type Effect,
  type OperationEvent,
  type OperationState,
} from "../operation/state.ts";
import type { DeciderVia, TraceEvent } from "./trace-event.ts";
import {
  eventId,
  makeEvent,
  type ApprovalEventData,
  type EventOf,
  type EventType,
  type RouteData,
  type ToolgateEvent,
} from "./events.ts";

/** One approval request as the inbox shows it (derived from the operation's log, which is authoritative). */
export type ApprovalItem = {
  operation_id: string;
  run_id: string;
  call_id: string;
  tool: string;
  target: string;
  arguments: Record<string, unknown>;
  state: "pending" | "approved" | "rejected" | "expired" | "cancelled";
  requested_by: string;
  requested_at_ms: number;
  expires_at_ms: number;
  input_hash: string;
  policy_version: string;
  /**
   * What a decision binds to (operation/approval.ts `approvalHashOf`): `input_hash` for a plain
   * approval, its own for a payment's. Absent in rows stored before it (read as `input_hash`).
   */
  approval_hash?: string;
  /** `truncated`: the body is the first 16 KiB of its JSON text; the operation has all of it. */
  preview: {
    status: number | null;
    body: unknown;
    detail: string | null;
    truncated: boolean;
  } | null;
  decided_by: string | null;
  /** How `decided_by` was verified (issue 35); absent in items stored before it. */
  decided_via?: DeciderVia | null;
  decided_at_ms: number | null;
  reason: string | null;
  /** A shadow run's call (issue 22): approving it sends it to the tool's sandbox only. */
  shadow?: true;
  /** Undo (issue 22): the compensation of this operation; approving it reverses that one. */
  compensates?: string;
  /** A routed approval (issue 35): the votes so far and who may still vote. */
  route?: RouteData;
  /** x402 (issue 37): the payment it is asked for (amount in atomic units): what approving pays. */
  payment?: { amount: string; asset: string; network: string; pay_to: string };
  /**
   * Acting as the user (issue 36): whose connection the call will send with. GET /v1/approvals adds
   * its health of the moment, so an approver sees "the user must reconnect first".
   */
  credential?: { provider: string; user: string; scopes: string[] };
};
/** An operation waiting for a person's verdict on an unknown outcome, as the tenant lists it. */
export type UnknownItem = { operation_id: string; run_id: string; tool: string; since_ms: number };
/** An operation held by a freeze (issue 34), as the tenant keeps it to wake it after the lift. */
export type HeldItem = { operation_id: string; freeze_id: string };
/**
 * A call a standing grant approved (issue 35), as the tenant's chain records it: once per (grant,
 * operation), however often it is delivered.
 */
export type GrantUseItem = { grant_id: string; operation_id: string; amount: number | null };

/**
 * The name of an update the tenant plane applies, named as the events a webhook will carry: the
 * approvals inbox (`approval.*`) and the list of operations waiting for a person (`operation.*`).
 */
export type InboxKind =
  | "approval.requested"
  | "approval.previewed"
  | "approval.decided"
  | "approval.expired"
  | "approval.cancelled"
  | "approval.voted"
  | "approval.reminded"
  | "approval.escalated"
  | "operation.outcome_unknown"
  | "operation.settling"
  | "operation.recorded"
  | "operation.resent"
  | "operation.held"
  | "operation.released"
  | "grant.used";
/** The whole new standing, so a delivery is an idempotent upsert at the tenant (ordered by `seq`). */
export type InboxUpsert =
  | { kind: InboxKind; target: "approval"; item: ApprovalItem }
  | { kind: InboxKind; target: "unknown"; open: boolean; item: UnknownItem }
  | { kind: InboxKind; target: "held"; open: boolean; item: HeldItem }
  | { kind: InboxKind; target: "grant"; item: GrantUseItem };
/**
 * Its reservations of limits across runs given back: recorded with nothing applied (issue 21); or
 * its recorded outcome told to the failure_rate tripwires that counted it (issue 34).
 */
export type LimitRelease =
  | { kind: "limits.released"; claims: LimitClaim[]; failed?: undefined }
  | { kind: "tripwire.outcome"; claims: LimitClaim[]; failed: boolean };

export type Announcement = {
  events: ToolgateEvent[];
  inbox: InboxUpsert[];
  limits: LimitRelease[];
};

/** What the shell knows of the operation, as plain data (read from its frozen call and log). */
export type CallData = {
  tenantId: string;
  runId: string;
  operationId: string;
  tool: string;
  createdAtMs: number;
  /** The step's log position: the events' ids derive from (operation, seq, type). */
  seq: number;
  nowMs: number;
  /** The arguments as events show them: redacted fields absent, hidden values scrubbed. */
  arguments: unknown;
  resource: string | null;
  limits: LimitClaim[];
  shadow: boolean;
  compensates: string | null;
  /** The approval request as the inbox shows it, state aside (null: none, or not asked for). */
  approval: Omit<ApprovalItem, "state"> | null;
  /** The decision's reason as events show it (scrubbed of hidden values). */
  approvalReason: string | null;
  /** A person's edit of its arguments (issue 35 item 2): hashes and who, never values. Null: none. */
  edited: ApprovalEventData["edited"];
  /** The run's end user a tool with `auth` acts for (issue 36); absent: none. */
  user?: string;
};

/**
 * First attempt sent → recorded (retry waits included; approval and lock waits not); null when
 * nothing was sent. `before`: the state the recording step left.
 */
export function latencyMs(before: OperationState | null, recordedAtMs: number): number | null {
  return before && "firstAttemptAtMs" in before ? recordedAtMs - before.firstAttemptAtMs : null;
}

/** Whether a step needs the approval request (`CallData.approval`): it touches the inbox. */
export const needsApproval = (effects: readonly Effect[]): boolean =>
  effects.some((effect) => effect.kind === "inbox" || effect.kind === "route");

/**
 * The notices one committed step sends (`before`: the state before it). Every event carries the
 * operation's `created_at_ms` (the tenant index reads it, issue 20), and `shadow` / `compensates`
 * when the operation is a shadow run's write or a compensation (issue 22).
 */
export function announce(
  before: OperationState | null,
  step: { state: OperationState; effects: readonly Effect[]; trace: readonly TraceEvent[] },
  event: OperationEvent,
  call: CallData,
): Announcement {
  const { state, effects } = step;
  const out: Announcement = { events: [], inbox: [], limits: [] };
  const tagged = {
    created_at_ms: call.createdAtMs,
    ...(call.shadow ? { shadow: true as const } : {}),
    ...(call.compensates ? { compensates: call.compensates } : {}),
  };
  const approvalData = (item: ApprovalItem) => ({
    ...tagged,
    state: item.state,
    target: item.target,
    arguments: call.arguments,
    requested_by: item.requested_by,
    expires_at_ms: item.expires_at_ms,
    decided_by: item.decided_by,
    decided_via: item.decided_via ?? null,
    reason: call.approvalReason,
    edited: call.edited ?? null,
    ...(item.route ? { route: item.route } : {}),
    ...(item.payment ? { payment: item.payment } : {}),
  });
  const emit = <T extends EventType>(type: T, data: EventOf<T>["data"]) =>
    out.events.push(
      makeEvent(type, {
        id: eventId(call.operationId, call.seq, type),
        at_ms: call.nowMs,
        tenant_id: call.tenantId,
        run_id: call.runId,
        operation_id: call.operationId,
        tool: call.tool,
        data,
      } as Omit<EventOf<T>, "type">),
    );
  for (const effect of effects) {
    switch (effect.kind) {
      case "inbox": {
        if (!call.approval) break;
        const item: ApprovalItem = { ...call.approval, state: effect.state };
        const previewed = effect.state === "pending" && event.type === "preview_finished";
        out.inbox.push({ kind: inboxKind(effect.state, previewed), target: "approval", item });
        // A preview's arrival refreshes the inbox row; the request itself was already reported.
        // A cancelled request is told by the operation's own events (recorded), not as an approval.
        if (previewed || effect.state === "cancelled") break;
        emit(approvalEvent(effect.state), approvalData(item));
        break;
      }
      // A routed approval's step (issue 35): its own event; a step that leaves it waiting also
      // refreshes the inbox row (votes, who may still vote). Quorum's row is the decision's.
      case "route": {
        if (!call.approval) break;
        const waiting = effect.what !== "quorum_reached";
        const item: ApprovalItem = { ...call.approval, state: waiting ? "pending" : "approved" };
        if (effect.what !== "quorum_reached")
          out.inbox.push({ kind: `approval.${effect.what}`, target: "approval", item });
        emit(`approval.${effect.what}`, approvalData(item));
        break;
      }
      case "needs_person": {
        const item = {
          operation_id: call.operationId,
          run_id: call.runId,
          tool: call.tool,
          since_ms: call.nowMs,
        };
        const kind: InboxKind = effect.open
          ? effect.person
            ? "operation.outcome_unknown"
            : "operation.settling"
          : state.phase === "recorded"
            ? "operation.recorded"
            : "operation.resent";
        out.inbox.push({ kind, target: "unknown", open: effect.open, item });
        break;
      }
      case "release_limits":
        if (call.limits.length > 0)
          out.limits.push({ kind: "limits.released", claims: call.limits });
        break;
      case "send_attempt":
      case "send_lookup":
      case "set_alarm":
      case "clear_alarm":
      case "abort_attempt":
      case "send_preview":
      case "acquire_lock":
      case "release_lock":
      case "acquire_quota":
      case "release_quota":
        break;
    }
  }
  // outcome_unknown: reported once it needs a person (issue 24), never while toolgate still settles
  // it by itself (a resend with the same key, a lookup, the late schedule): nobody is paged for
  // what settles itself. The id is (operation, seq, type): stable however often it is resent.
  const needsPerson = effects.some(
    (effect) => effect.kind === "needs_person" && effect.open && effect.person,
  );
  if (state.phase === "outcome_unknown" && needsPerson)
    emit("operation.outcome_unknown", {
      ...tagged,
      status: "outcome_unknown",
      code: state.code,
      reconcile: state.reconcile,
      needs_person: true,
      arguments: call.arguments,
    });
  // A write queued behind its lock past LOCK_WAITING_LONG_MS: the one recheck that marked it (a
  // recheck after that changes nothing, so writes no row and no event).
  if (event.type === "alarm" && state.phase === "awaiting_lock" && state.waitedLong)
    emit("lock.waiting_long", {
      ...tagged,
      resource: call.resource,
      blocked_by: state.blockedBy,
      waited_ms: call.nowMs - state.requestedAtMs,
    });
  // A call that starts waiting for its user to connect (issue 36): once per wait, the step that entered it.
  if (state.phase === "awaiting_credential" && before?.phase !== "awaiting_credential")
    emit("credential.required", {
      ...tagged,
      user: call.user ?? "",
      provider: state.provider,
      reason: state.reason,
      connect_url: state.connectUrl,
    });
  // Every operation that reaches `recorded` reports it once: the step that entered it.
  // The tenant keeps which operations a freeze holds, to wake them after the lift (issue 34).
  const heldBy = (s: OperationState | null) =>
    s?.phase === "held" && s.hold.kind === "freeze" ? s.hold.freezeId : null;
  const [was, now] = [heldBy(before), heldBy(state)];
  if (was !== now) {
    const operation_id = call.operationId;
    if (was)
      out.inbox.push({
        kind: "operation.released",
        target: "held",
        open: false,
        item: { operation_id, freeze_id: was },
      });
    if (now)
      out.inbox.push({
        kind: "operation.held",
        target: "held",
        open: true,
        item: { operation_id, freeze_id: now },
      });
  }
  // The step that let a call through under a standing grant (its `grant_used`, once per operation):
  // the tenant chains the use (issue 35).
  for (const entry of step.trace)
    if (entry.type === "grant_used")
      out.inbox.push({
        kind: "grant.used",
        target: "grant",
        item: { grant_id: entry.grant_id, operation_id: call.operationId, amount: entry.amount },
      });
  // failure_rate tripwires (issue 34) learn each recorded outcome: failed = definitely failed.
  const rated = call.limits.filter(
    (claim) => isTripClaim(claim) && claim.trip.measure === "failure_rate",
  );
  if (state.phase === "recorded" && before?.phase !== "recorded" && rated.length > 0)
    out.limits.push({
      kind: "tripwire.outcome",
      claims: rated,
      failed: state.outcome.status === "failed",
    });
  if (state.phase === "recorded" && before?.phase !== "recorded") {
    const code = state.outcome.status === "succeeded" ? null : state.outcome.code;
    emit("operation.recorded", {
      ...tagged,
      status: state.outcome.status,
      code,
      // failed/invalid_output took effect: a consumer must not read "failed" as "not done".
      took_effect: tookEffect(state.outcome.status, code),
      attempts: state.attempts,
      latency_ms: latencyMs(before, state.recordedAtMs),
      via: state.via,
      arguments: call.arguments,
    });
  }
  return out;
}

type RequestState = ApprovalItem["state"];

function inboxKind(state: RequestState, previewed: boolean): InboxKind {
  switch (state) {
    case "pending":
      return previewed ? "approval.previewed" : "approval.requested";
    case "approved":
    case "rejected":
      return "approval.decided";
    case "expired":
      return "approval.expired";
    case "cancelled":
      return "approval.cancelled";
  }
}

function approvalEvent(
  state: Exclude<RequestState, "cancelled">,
): "approval.requested" | "approval.decided" | "approval.expired" {
  switch (state) {
    case "pending":
      return "approval.requested";
    case "approved":
    case "rejected":
      return "approval.decided";
    case "expired":
      return "approval.expired";
  }
}
