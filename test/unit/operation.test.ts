// The operation state machine as a table: given state S and event E at time T → state S',
// effects [...]. Pure: no clock, no I/O, nothing to mock.
import { describe, expect, it } from "vitest";
import { envelopeFor } from "../../src/domain/envelope.ts";
import { isSettled, nextDueAtMs, transition, WATCHDOG_GRACE_MS, type OperationPlan, type OperationState } from "../../src/domain/operation.ts";
import type { RepeatSafety } from "../../src/domain/classify.ts";
import { nextDelayMs } from "../../src/domain/retry.ts";

const plan = (safety: RepeatSafety, maxAttempts = 4): OperationPlan => ({
  operationId: "op_test",
  idempotencyKey: "tg_test",
  safety,
  retry: { maxAttempts, minDelayMs: 0, initialDelayMs: 1_000, maxDelayMs: 60_000, maxElapsedMs: 3_600_000 },
  timeoutMs: 2_000,
  approval: null,
});
const executing = (attempt = 1, cancelRequested = false): OperationState => ({ phase: "executing", attempt, keyIssuedAtMs: 0, startedAtMs: 0, firstAttemptAtMs: 0, cancelRequested });
const T = 10_000;
const step = (state: OperationState | null, event: Parameters<typeof transition>[1], p = plan("keyed")) => {
  const result = transition(state, event, p, T);
  if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
  return result.value;
};

describe("transition", () => {
  it("start → executing attempt 1, watchdog armed before the send", () => {
    const s = step(null, { type: "start", inputHash: "h", callId: "c1", tool: "charge" });
    expect(s.state).toEqual({ phase: "executing", attempt: 1, keyIssuedAtMs: T, startedAtMs: T, firstAttemptAtMs: T, cancelRequested: false });
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: T + 2_000 + WATCHDOG_GRACE_MS }, { kind: "send_attempt", attempt: 1 }]);
    expect(s.trace.map((e) => e.type)).toEqual(["proposed", "validated", "attempt_started"]);
  });

  it("ok → recorded succeeded, alarm cleared", () => {
    const s = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: { id: "x" } } });
    expect(s.state).toMatchObject({ phase: "recorded", outcome: { status: "succeeded", result: { id: "x" } }, late: false });
    expect(s.effects).toEqual([{ kind: "clear_alarm" }]);
  });

  it("503 → retry_scheduled at now + the policy delay", () => {
    const s = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "http_error", status: 503, retryAfterMs: null, detail: "" } });
    const delay = nextDelayMs(plan("keyed").retry, "op_test", 1, null);
    expect(s.state).toMatchObject({ phase: "retry_scheduled", attempt: 1, dueAtMs: T + delay });
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: T + delay }]);
  });

  it("a stale result (wrong attempt, or not executing) changes nothing", () => {
    expect(step(executing(2), { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: 1 } })).toMatchObject({ changed: false, effects: [] });
    const recorded = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: 1 } }).state;
    expect(step(recorded, { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: 2 } })).toMatchObject({ changed: false, state: recorded });
  });

  it.each([
    ["keyed", { phase: "outcome_unknown", reconcile: "resend", code: "timeout_unknown" }, "set_alarm"],
    ["lookup", { phase: "reconciling", lookups: 1 }, "send_lookup"],
    ["neither", { phase: "outcome_unknown", reconcile: "human", dueAtMs: null }, "clear_alarm"],
    ["read", { phase: "retry_scheduled" }, "set_alarm"],
  ] as const)("timeout on %s", (safety, expected, effect) => {
    const s = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "timeout", detail: "" } }, plan(safety));
    expect(s.state).toMatchObject(expected);
    expect(s.effects.map((e) => e.kind)).toContain(effect);
  });

  it.each([
    ["read", "retry_scheduled"],
    ["keyed", "outcome_unknown"],
    ["neither", "outcome_unknown"],
  ] as const)("alarm finding an orphaned attempt (crash) on %s → %s", (safety, phase) => {
    const s = step(executing(), { type: "alarm", inFlight: false }, plan(safety));
    expect(s.state.phase).toBe(phase);
    expect(s.trace.find((e) => e.type === "attempt_finished")?.observed).toEqual({ kind: "crash" });
  });

  it("alarm while the attempt is in flight only re-arms the watchdog", () => {
    const s = step(executing(), { type: "alarm", inFlight: true });
    expect(s).toMatchObject({ changed: false, effects: [{ kind: "set_alarm", atMs: T + 2_000 + WATCHDOG_GRACE_MS }] });
  });

  it("alarm in retry_scheduled starts the next attempt with the same key", () => {
    const s = step({ phase: "retry_scheduled", attempt: 1, dueAtMs: T, firstAttemptAtMs: 0, reason: "" }, { type: "alarm", inFlight: false });
    expect(s.state).toMatchObject({ phase: "executing", attempt: 2, firstAttemptAtMs: 0 });
    expect(s.trace[0]).toMatchObject({ type: "attempt_started", attempt: 2, idempotency_key: "tg_test" });
  });

  it("alarms on a recorded operation are absorbed (alarms are at-least-once)", () => {
    const recorded = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: 1 } }).state;
    expect(step(recorded, { type: "alarm", inFlight: false })).toMatchObject({ changed: false, effects: [] });
  });

  it("lookup found → succeeded via reconcile; not found → retry; inconclusive → later, then a person", () => {
    const reconciling: OperationState = { phase: "reconciling", attempt: 1, firstAttemptAtMs: 0, code: "timeout_unknown", lookups: 1, startedAtMs: 0 };
    expect(step(reconciling, { type: "lookup_finished", lookups: 1, observation: { kind: "found", result: { id: "r" } } }, plan("lookup")).state).toMatchObject({ phase: "recorded", via: "reconcile", outcome: { status: "succeeded" } });
    expect(step(reconciling, { type: "lookup_finished", lookups: 1, observation: { kind: "not_found" } }, plan("lookup")).state.phase).toBe("retry_scheduled");
    expect(step(reconciling, { type: "lookup_finished", lookups: 1, observation: { kind: "inconclusive", detail: "" } }, plan("lookup")).state).toMatchObject({ phase: "outcome_unknown", reconcile: "lookup" });
    const last = { ...reconciling, lookups: 4 };
    expect(step(last, { type: "lookup_finished", lookups: 4, observation: { kind: "inconclusive", detail: "" } }, plan("lookup")).state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });

  it("attempts exhausted: budget_exhausted when definite, outcome_unknown when the last try was ambiguous", () => {
    const p = plan("keyed", 2);
    expect(step(executing(2), { type: "attempt_finished", attempt: 2, observation: { kind: "http_error", status: 503, retryAfterMs: null, detail: "" } }, p).state).toMatchObject({ phase: "recorded", outcome: { status: "budget_exhausted", code: "attempts_exhausted" } });
    expect(step(executing(2), { type: "attempt_finished", attempt: 2, observation: { kind: "timeout", detail: "" } }, p).state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });

  it("resolve settles outcome_unknown only", () => {
    const unknown = step(executing(), { type: "attempt_finished", attempt: 1, observation: { kind: "timeout", detail: "" } }, plan("neither")).state;
    expect(step(unknown, { type: "resolve", outcome: "succeeded", result: { id: "m" }, reason: "seen", by: "key_1" }).state).toMatchObject({ phase: "recorded", via: "resolve", outcome: { status: "succeeded", result: { id: "m" } } });
    expect(step(unknown, { type: "resolve", outcome: "failed", result: null, reason: "not there", by: "key_1" }).state).toMatchObject({ outcome: { status: "failed", code: "permanent_failure" } });
    expect(transition(executing(), { type: "resolve", outcome: "failed", result: null, reason: "", by: "" }, plan("neither"), T)).toEqual({ ok: false, error: { code: "not_outcome_unknown", phase: "executing" } });
  });

  it("start twice, or any other event before start, is refused", () => {
    expect(transition(executing(), { type: "start", inputHash: "h", callId: "c", tool: "t" }, plan("keyed"), T)).toEqual({ ok: false, error: { code: "already_started" } });
    expect(transition(null, { type: "alarm", inFlight: false }, plan("keyed"), T)).toEqual({ ok: false, error: { code: "not_started" } });
  });

  it("denied: a scheduled retry is refused cleanly, a pending resend goes to a person", () => {
    const denied = { type: "denied", status: "rejected", code: "forbidden", message: "no" } as const;
    expect(step({ phase: "retry_scheduled", attempt: 1, dueAtMs: T, firstAttemptAtMs: 0, reason: "" }, denied).state).toMatchObject({ phase: "recorded", outcome: { status: "rejected", code: "forbidden" } });
    const resend: OperationState = { phase: "outcome_unknown", attempt: 1, firstAttemptAtMs: 0, code: "timeout_unknown", reconcile: "resend", dueAtMs: T, lookups: 0, reason: "" };
    expect(step(resend, denied).state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });

  it("cancel: before sending → cancelled; mid-write → result recorded late; mid-read → abort", () => {
    expect(step({ phase: "retry_scheduled", attempt: 1, dueAtMs: T, firstAttemptAtMs: 0, reason: "" }, { type: "cancel", by: "k" }).state).toMatchObject({ outcome: { status: "cancelled" } });
    const flagged = step(executing(), { type: "cancel", by: "k" });
    expect(flagged).toMatchObject({ state: { phase: "executing", cancelRequested: true }, effects: [] });
    expect(step(flagged.state, { type: "attempt_finished", attempt: 1, observation: { kind: "ok", result: 1 } }).state).toMatchObject({ phase: "recorded", late: true, outcome: { status: "succeeded" } });
    expect(step(executing(), { type: "cancel", by: "k" }, plan("read")).effects).toEqual([{ kind: "abort_attempt" }]);
  });
});

describe("settled, due time and envelopes", () => {
  it("isSettled and nextDueAtMs", () => {
    expect(isSettled(executing())).toBe(false);
    expect(nextDueAtMs({ phase: "retry_scheduled", attempt: 1, dueAtMs: 42, firstAttemptAtMs: 0, reason: "" })).toBe(42);
    expect(isSettled({ phase: "outcome_unknown", attempt: 1, firstAttemptAtMs: 0, code: "timeout_unknown", reconcile: "human", dueAtMs: null, lookups: 0, reason: "" })).toBe(true);
  });

  it.each([
    [executing(), "pending", "executing", ["wait"]],
    [{ phase: "retry_scheduled", attempt: 1, dueAtMs: 1, firstAttemptAtMs: 0, reason: "HTTP 503" }, "pending", "retry_scheduled", ["wait"]],
    [{ phase: "reconciling", attempt: 1, firstAttemptAtMs: 0, code: "timeout_unknown", lookups: 1, startedAtMs: 0 }, "outcome_unknown", "timeout_unknown", ["wait", "tell_user"]],
    [{ phase: "recorded", attempts: 1, recordedAtMs: 0, via: "attempt", late: false, outcome: { status: "failed", code: "permanent_failure", message: "m" } }, "failed", "permanent_failure", ["tell_user"]],
  ] as Array<[OperationState, string, string, string[]]>)("envelope for %o", (state, status, code, actions) => {
    expect(envelopeFor("op_1", state)).toMatchObject({ status, code, operation_id: "op_1", allowed_next_actions: actions });
  });

  it("a success carries the result and no code", () => {
    const envelope = envelopeFor("op_1", { phase: "recorded", attempts: 1, recordedAtMs: 0, via: "attempt", late: false, outcome: { status: "succeeded", result: { id: 1 } } });
    expect(envelope).toEqual({ status: "succeeded", operation_id: "op_1", result: { id: 1 } });
  });
});
