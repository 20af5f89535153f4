// announce (issue 32): which notices one committed step sends — its public events, its inbox
// updates and its limit releases — one row per event type and per inbox kind, with the shadow,
// compensates, took_effect and settle-late cases. Pure: plain data in, plain data out.
import { describe, expect, it } from "vitest";
import { announce, type CallData } from "../../../src/domain/journal/announce.ts";
import { ToolgateEvent } from "../../../src/domain/journal/events.ts";
import type {
  Effect,
  OperationEvent,
  OperationState,
  TraceEvent,
} from "../../../src/domain/operation/index.ts";

const NOW = 1_767_225_600_000;
const call = (over: Partial<CallData> = {}): CallData => ({
  tenantId: "ten_1",
  runId: "run_1",
  operationId: "op_1",
  tool: "refund",
  createdAtMs: NOW - 1000,
  seq: 3,
  nowMs: NOW,
  arguments: { order_id: "ord_1" },
  resource: "order:ord_1",
  limits: [],
  shadow: false,
  compensates: null,
  edited: null,
  approval: {
    operation_id: "op_1",
    run_id: "run_1",
    call_id: "c1",
    tool: "refund",
    target: "order:ord_1",
    arguments: { order_id: "ord_1" },
    requested_by: "u1",
    requested_at_ms: NOW - 1000,
    expires_at_ms: NOW + 60_000,
    input_hash: "h",
    policy_version: "v",
    preview: null,
    decided_by: "alice",
    decided_at_ms: NOW,
    reason: "raw reason",
  },
  approvalReason: "scrubbed reason",
  ...over,
});

const executing: OperationState = {
  phase: "executing",
  attempt: 1,
  keyIssuedAtMs: NOW - 500,
  startedAtMs: NOW - 500,
  firstAttemptAtMs: NOW - 500,
  cancelRequested: false,
  mayHaveApplied: null,
};
const recorded = (status: "succeeded" | "failed", code = "x", late = false): OperationState => ({
  phase: "recorded",
  outcome: status === "succeeded" ? { status, result: {} } : { status, code, message: "no" },
  attempts: 1,
  recordedAtMs: NOW,
  via: "attempt",
  late,
});
const unknown = (settleUntilMs?: number): OperationState => ({
  phase: "outcome_unknown",
  attempt: 1,
  firstAttemptAtMs: NOW - 500,
  code: "timeout_unknown",
  ambiguousAtMs: NOW - 500,
  reconcile: settleUntilMs ? "resend" : "human",
  dueAtMs: settleUntilMs ?? null,
  lookups: 0,
  reason: "timeout",
  ifNotApplied: null,
  ...(settleUntilMs ? { settleUntilMs } : {}),
});
const awaitingApproval: OperationState = { phase: "awaiting_approval", requestedAtMs: NOW - 1000 };
const ev = (type: string, more: object = {}) => ({ type, ...more }) as OperationEvent;
const inbox = (state: Extract<Effect, { kind: "inbox" }>["state"]): Effect => ({
  kind: "inbox",
  state,
});

type Row = {
  name: string;
  before: OperationState | null;
  state: OperationState;
  effects: Effect[];
  /** The step's trace (default none). */
  trace?: TraceEvent[];
  event: OperationEvent;
  call?: Partial<CallData>;
  events: string[];
  inbox: string[];
  limits?: number;
  data?: Record<string, unknown>;
};

const TABLE: Row[] = [
  {
    name: "a call a standing grant let through: the tenant chains the use (grant.used), nothing announced",
    before: null,
    state: executing,
    effects: [],
    trace: [{ type: "grant_used", at_ms: NOW, grant_id: "gr_1", amount: 40 }],
    event: ev("start"),
    events: [],
    inbox: ["grant.used"],
  },
  {
    name: "an approval requested: approval.requested, and the inbox row",
    before: null,
    state: awaitingApproval,
    effects: [inbox("pending")],
    event: ev("start"),
    events: ["approval.requested"],
    inbox: ["approval.requested"],
    data: { state: "pending", reason: "scrubbed reason", decided_by: "alice" },
  },
  {
    name: "a payment's approval requested (x402): approval.requested says what it pays",
    before: executing,
    state: awaitingApproval,
    effects: [inbox("pending")],
    event: ev("payment_required"),
    events: ["approval.requested"],
    inbox: ["approval.requested"],
    call: {
      approval: {
        ...call().approval!,
        payment: { amount: "10000", asset: "0xa", network: "eip155:1", pay_to: "0xb" },
      },
    },
    data: { payment: { amount: "10000", asset: "0xa", network: "eip155:1", pay_to: "0xb" } },
  },
  {
    name: "a preview arrives: the inbox row is refreshed, nothing is announced",
    before: awaitingApproval,
    state: awaitingApproval,
    effects: [inbox("pending")],
    event: ev("preview_finished"),
    events: [],
    inbox: ["approval.previewed"],
  },
  {
    name: "approved: approval.decided",
    before: awaitingApproval,
    state: executing,
    effects: [inbox("approved")],
    event: ev("decide"),
    events: ["approval.decided"],
    inbox: ["approval.decided"],
    data: { state: "approved" },
  },
  {
    name: "expired: approval.expired",
    before: awaitingApproval,
    state: recorded("failed", "approval_expired"),
    effects: [inbox("expired")],
    event: ev("alarm", { inFlight: false }),
    events: ["approval.expired", "operation.recorded"],
    inbox: ["approval.expired"],
  },
  {
    name: "a cancelled request: the inbox closes it, only the recording is announced",
    before: awaitingApproval,
    state: recorded("failed", "cancelled"),
    effects: [inbox("cancelled")],
    event: ev("cancel", { by: "run" }),
    events: ["operation.recorded"],
    inbox: ["approval.cancelled"],
  },
  {
    name: "no approval request known: neither an event nor an inbox row for it",
    before: null,
    state: awaitingApproval,
    effects: [inbox("pending")],
    event: ev("start"),
    call: { approval: null },
    events: [],
    inbox: [],
  },
  {
    name: "recorded succeeded: operation.recorded, took effect, latency from the first attempt",
    before: executing,
    state: recorded("succeeded"),
    effects: [],
    event: ev("attempt_finished"),
    events: ["operation.recorded"],
    inbox: [],
    data: { status: "succeeded", code: null, took_effect: true, latency_ms: 500, via: "attempt" },
  },
  {
    name: "failed/invalid_output took effect",
    before: executing,
    state: recorded("failed", "invalid_output"),
    effects: [],
    event: ev("attempt_finished"),
    events: ["operation.recorded"],
    inbox: [],
    data: { status: "failed", code: "invalid_output", took_effect: true },
  },
  {
    name: "failed with a 400 did not take effect",
    before: executing,
    state: recorded("failed", "upstream_rejected"),
    effects: [],
    event: ev("attempt_finished"),
    events: ["operation.recorded"],
    inbox: [],
    data: { took_effect: false },
  },
  {
    name: "recorded again (a late step of a recorded operation): nothing new",
    before: recorded("succeeded"),
    state: recorded("succeeded"),
    effects: [],
    event: ev("attempt_finished"),
    events: [],
    inbox: [],
  },
  {
    name: "outcome unknown and a person is needed: operation.outcome_unknown and the list row",
    before: executing,
    state: unknown(),
    effects: [{ kind: "needs_person", open: true, person: true }],
    event: ev("attempt_finished"),
    events: ["operation.outcome_unknown"],
    inbox: ["operation.outcome_unknown"],
    data: { code: "timeout_unknown", reconcile: "human", needs_person: true },
  },
  {
    name: "settling late by itself: listed as settling, announced to nobody",
    before: executing,
    state: unknown(NOW + 60_000),
    effects: [{ kind: "needs_person", open: true, person: false }],
    event: ev("attempt_finished"),
    events: [],
    inbox: ["operation.settling"],
  },
  {
    name: "a late try settles it: recorded, and the list row closes",
    before: unknown(NOW + 60_000),
    state: recorded("succeeded", "x", true),
    effects: [{ kind: "needs_person", open: false, person: false }],
    event: ev("attempt_finished"),
    events: ["operation.recorded"],
    inbox: ["operation.recorded"],
  },
  {
    name: "a person resends: the list row closes, not recorded yet",
    before: unknown(),
    state: executing,
    effects: [{ kind: "needs_person", open: false, person: true }],
    event: ev("resolve"),
    events: [],
    inbox: ["operation.resent"],
  },
  {
    name: "a lock waited long: lock.waiting_long on the recheck that marked it",
    before: { phase: "awaiting_lock", requestedAtMs: NOW - 90_000, blockedBy: "op_0" },
    state: {
      phase: "awaiting_lock",
      requestedAtMs: NOW - 90_000,
      blockedBy: "op_0",
      waitedLong: true,
    },
    effects: [],
    event: ev("alarm", { inFlight: false }),
    events: ["lock.waiting_long"],
    inbox: [],
    data: { resource: "order:ord_1", blocked_by: "op_0", waited_ms: 90_000 },
  },
  {
    name: "no usable token before a send (issue 36): credential.required, once per wait",
    before: {
      phase: "executing",
      attempt: 1,
      keyIssuedAtMs: NOW,
      startedAtMs: NOW,
      firstAttemptAtMs: NOW,
      cancelRequested: false,
      mayHaveApplied: null,
    },
    state: {
      phase: "awaiting_credential",
      attempt: 1,
      firstAttemptAtMs: NOW,
      mayHaveApplied: null,
      requestedAtMs: NOW,
      provider: "calendar",
      reason: "invalid_grant",
      connectUrl: "https://as.example/authorize?state=s",
      recheckAtMs: NOW + 300_000,
      expiresAtMs: NOW + 900_000,
    },
    effects: [],
    event: ev("credential_required", {
      attempt: 1,
      provider: "calendar",
      reason: "invalid_grant",
      connectUrl: "https://as.example/authorize?state=s",
    }),
    call: { user: "alice" },
    events: ["credential.required"],
    inbox: [],
    data: {
      user: "alice",
      provider: "calendar",
      reason: "invalid_grant",
      connect_url: "https://as.example/authorize?state=s",
    },
  },
  {
    name: "reservations given back: one limit release, nothing announced",
    before: awaitingApproval,
    state: recorded("failed", "approval_rejected"),
    effects: [{ kind: "release_limits" }],
    event: ev("decide"),
    call: { limits: [{ name: "daily", subject: "u:1", amount: 1, windowMs: 1 } as never] },
    events: ["operation.recorded"],
    inbox: [],
    limits: 1,
  },
  {
    name: "no reservations held: no release",
    before: awaitingApproval,
    state: recorded("failed", "approval_rejected"),
    effects: [{ kind: "release_limits" }],
    event: ev("decide"),
    events: ["operation.recorded"],
    inbox: [],
    limits: 0,
  },
  {
    name: "a shadow run's write says so",
    before: executing,
    state: recorded("succeeded"),
    effects: [],
    event: ev("attempt_finished"),
    call: { shadow: true },
    events: ["operation.recorded"],
    inbox: [],
    data: { shadow: true },
  },
  {
    name: "a compensation names the operation it reverses",
    before: executing,
    state: recorded("succeeded"),
    effects: [],
    event: ev("attempt_finished"),
    call: { compensates: "op_0" },
    events: ["operation.recorded"],
    inbox: [],
    data: { compensates: "op_0" },
  },
];

describe("announce", () => {
  it.each(TABLE)("$name", (row) => {
    const said = announce(
      row.before,
      { state: row.state, effects: row.effects, trace: row.trace ?? [] },
      row.event,
      call(row.call),
    );
    expect(said.events.map((e) => e.type)).toEqual(row.events);
    expect(said.inbox.map((u) => u.kind)).toEqual(row.inbox);
    expect(said.limits).toHaveLength(row.limits ?? 0);
    for (const event of said.events) {
      // Every event is valid against its type's public schema, carries the stable id's shape and
      // the operation's creation time; no shadow/compensates flag unless the operation is one.
      expect(ToolgateEvent.parse(event)).toEqual(event);
      expect(event.data).toMatchObject({ created_at_ms: NOW - 1000 });
      if (!row.call?.shadow) expect(event.data).not.toHaveProperty("shadow");
      if (!row.call?.compensates) expect(event.data).not.toHaveProperty("compensates");
    }
    if (row.data) expect(said.events[0]!.data).toMatchObject(row.data);
  });

  it("the same step always gives the same ids; another position or type, another id", () => {
    const step = { state: recorded("succeeded"), effects: [], trace: [] };
    const a = announce(executing, step, ev("attempt_finished"), call()).events[0]!;
    const b = announce(executing, step, ev("attempt_finished"), call()).events[0]!;
    const c = announce(executing, step, ev("attempt_finished"), call({ seq: 4 })).events[0]!;
    expect(a.id).toBe(b.id);
    expect(c.id).not.toBe(a.id);
  });

  it("the inbox gets the raw request, events the scrubbed reason", () => {
    const said = announce(
      awaitingApproval,
      { state: executing, effects: [inbox("approved")], trace: [] },
      ev("decide"),
      call(),
    );
    const upsert = said.inbox[0]!;
    expect(upsert.target === "approval" && upsert.item.reason).toBe("raw reason");
    expect(said.events[0]!.data).toMatchObject({ reason: "scrubbed reason" });
  });
});
