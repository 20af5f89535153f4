// `retry_deferred` (issue 11, "retries are selfish"): the host's retry budget refused the automatic
// send an alarm was about to make. A table over every phase: only the two automatic waits move
// (same phase, same attempt, later due time, one alarm), every other phase absorbs it; a deferral
// past the elapsed budget is exhaustion under the usual honesty rule. Pure: nothing to mock.
import { describe, expect, it } from "vitest";
import { envelopeFor } from "../../src/domain/envelope.ts";
import {
  transition,
  type OperationPlan,
  type OperationState,
} from "../../src/domain/operation/index.ts";
import type { RepeatSafety } from "../../src/domain/classify.ts";
import {
  backoffSinceMs,
  DEFERRAL_JITTER_MS,
  planDeferral,
} from "../../src/domain/retry-deferral.ts";
import { NO_REDACTION } from "../../src/domain/redact.ts";
import { traceStep, type TraceDetails } from "../../src/domain/trace.ts";

const T = 100_000;
const UNTIL = T + 7_000;
const NOT_APPLIED = /did not take effect|was not executed|nothing was sent/i;
const plan = (safety: RepeatSafety = "keyed", hasLookup = false, maxElapsedMs = 3_600_000) =>
  ({
    operationId: "op_test",
    idempotencyKey: "tg_test",
    safety,
    retry: {
      maxAttempts: 4,
      minDelayMs: 0,
      initialDelayMs: 1_000,
      maxDelayMs: 60_000,
      maxElapsedMs,
    },
    timeoutMs: 2_000,
    approval: null,
    resource: null,
    hasLookup,
    settleMs: 5_000,
  }) satisfies OperationPlan;
const deferred = {
  type: "retry_deferred",
  untilMs: UNTIL,
  reason: "retry_budget",
  detail: "the upstream host had 10 retries in the last 10 s",
} as const;

const scheduled = (mayHaveApplied: boolean): OperationState => ({
  phase: "retry_scheduled",
  attempt: 2,
  dueAtMs: T,
  firstAttemptAtMs: 0,
  reason: "HTTP 503",
  mayHaveApplied: mayHaveApplied ? { atMs: 50, code: "timeout_unknown" } : null,
});
const unknown = (reconcile: "resend" | "lookup" | "human"): OperationState => ({
  phase: "outcome_unknown",
  attempt: 2,
  firstAttemptAtMs: 0,
  code: "timeout_unknown",
  ambiguousAtMs: 50,
  reconcile,
  dueAtMs: reconcile === "human" ? null : T,
  lookups: 0,
  reason: "no response within 2000 ms",
  ifNotApplied: null,
});
const others: Array<[string, OperationState]> = [
  ["awaiting_approval", { phase: "awaiting_approval", requestedAtMs: 0 }],
  ["awaiting_lock", { phase: "awaiting_lock", requestedAtMs: 0, blockedBy: null }],
  [
    "executing",
    {
      phase: "executing",
      attempt: 2,
      keyIssuedAtMs: 0,
      startedAtMs: T,
      firstAttemptAtMs: 0,
      cancelRequested: false,
      mayHaveApplied: null,
    },
  ],
  ["outcome_unknown (lookup)", unknown("lookup")],
  ["outcome_unknown (person)", unknown("human")],
  [
    "reconciling",
    {
      phase: "reconciling",
      attempt: 2,
      firstAttemptAtMs: 0,
      code: "timeout_unknown",
      ambiguousAtMs: 50,
      lookups: 1,
      startedAtMs: T,
      ifNotApplied: null,
    },
  ],
  [
    "recorded",
    {
      phase: "recorded",
      outcome: { status: "succeeded", result: {} },
      attempts: 2,
      recordedAtMs: T,
      via: "attempt",
      late: false,
    },
  ],
];

const step = (state: OperationState, p: OperationPlan = plan()) => {
  const result = transition(state, deferred, p, T);
  if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
  return result.value;
};
const jitterFor = (attempt: number) =>
  (
    planDeferral({
      policy: plan().retry,
      operationId: "op_test",
      attempt,
      firstAttemptAtMs: 0,
      untilMs: UNTIL,
      nowMs: T,
    }) as { dueAtMs: number }
  ).dueAtMs - UNTIL;

describe("retry_deferred in each phase", () => {
  it.each([
    ["retry_scheduled", scheduled(false)],
    ["retry_scheduled after an ambiguous attempt", scheduled(true)],
    ["outcome_unknown, resending with the same key", unknown("resend")],
  ] as const)(
    "%s: same phase and attempt, due later, one alarm, envelope unchanged",
    (_, state) => {
      const s = step(state);
      const dueAtMs = UNTIL + jitterFor(2);
      expect(s.changed).toBe(true);
      expect(s.state).toEqual({ ...state, dueAtMs });
      expect(s.effects).toEqual([{ kind: "set_alarm", atMs: dueAtMs }]);
      expect(s.trace).toEqual([
        {
          type: "retry_deferred",
          at_ms: T,
          attempt: 2,
          reason: "retry_budget",
          detail: deferred.detail,
          due_at_ms: dueAtMs,
        },
      ]);
      expect(envelopeFor("op_test", s.state, "keyed")).toEqual(
        envelopeFor("op_test", state, "keyed"),
      );
    },
  );

  it.each(others)("%s: absorbed (nothing is waiting for the budget)", (_, state) => {
    expect(step(state)).toMatchObject({ changed: false, state, effects: [], trace: [] });
  });

  it("the next alarm after a deferral sends the attempt it deferred, with the same key", () => {
    const later = step(scheduled(false)).state;
    const sent = transition(later, { type: "alarm", inFlight: false }, plan(), UNTIL + 1_000);
    expect(sent.ok && sent.value.state).toMatchObject({ phase: "executing", attempt: 3 });
    expect(sent.ok && sent.value.effects).toContainEqual({ kind: "send_attempt", attempt: 3 });
  });
});

describe("a deferral past max_elapsed_ms is exhaustion, honestly", () => {
  const short = (safety: RepeatSafety = "keyed", hasLookup = false) =>
    plan(safety, hasLookup, UNTIL - 1);

  it("nothing ambiguous: budget_exhausted / attempts_exhausted, recorded", () => {
    const s = step(scheduled(false), short("read"));
    expect(s.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "budget_exhausted", code: "attempts_exhausted" },
    });
    expect(s.trace.map((e) => e.type)).toEqual(["retry_deferred", "recorded"]);
    expect(s.trace[0]).toMatchObject({ reason: "retry_budget", exhausted: "elapsed" });
  });

  it.each([
    ["a scheduled retry after an ambiguous attempt", scheduled(true)],
    ["a pending resend", unknown("resend")],
  ] as const)("%s: outcome_unknown for a person, never 'did not take effect'", (_, state) => {
    const s = step(state, short());
    expect(s.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human", dueAtMs: null });
    expect(s.trace.filter((e) => e.type === "recorded")).toEqual([]);
    const envelope = envelopeFor("op_test", s.state, "keyed");
    expect(envelope).toMatchObject({ status: "outcome_unknown" });
    expect("message" in envelope && envelope.message).not.toMatch(NOT_APPLIED);
  });

  it("with a status lookup: exhaustion asks it first", () => {
    const s = step(scheduled(true), short("keyed", true));
    expect(s.state).toMatchObject({
      phase: "reconciling",
      ifNotApplied: { code: "attempts_exhausted" },
    });
    expect(s.effects.map((e) => e.kind)).toContain("send_lookup");
  });
});

describe("deferral timing and trace", () => {
  it("jitter is 0–1 s, seeded by operation id and attempt: the same on replay, spread across operations", () => {
    const dues = Array.from({ length: 50 }, (_, i) =>
      planDeferral({
        policy: plan().retry,
        operationId: `op_${i}`,
        attempt: 2,
        firstAttemptAtMs: 0,
        untilMs: UNTIL,
        nowMs: T,
      }),
    ).map((d) => (d as { dueAtMs: number }).dueAtMs - UNTIL);
    for (const jitter of dues) {
      expect(jitter).toBeGreaterThanOrEqual(0);
      expect(jitter).toBeLessThan(DEFERRAL_JITTER_MS);
    }
    expect(new Set(dues).size).toBeGreaterThan(40);
    expect(jitterFor(2)).toBe(jitterFor(2));
    expect(jitterFor(2)).not.toBe(jitterFor(3));
  });

  it("the stored event names the state it waits in; after an exhausting deferral the next events do", () => {
    const details: TraceDetails = { redaction: NO_REDACTION, risk: "write", includeResult: false };
    for (const state of [scheduled(false), unknown("resend")]) {
      const s = step(state);
      const [stored] = traceStep({
        prev: state,
        next: s.state,
        events: s.trace,
        nowMs: T,
        last: null,
        details,
      });
      expect(stored).toMatchObject({
        type: "retry_deferred",
        state: state.phase,
        reason: "retry_budget",
      });
    }
    const exhausted = step(scheduled(false), plan("read", false, UNTIL - 1));
    const stored = traceStep({
      prev: scheduled(false),
      next: exhausted.state,
      events: exhausted.trace,
      nowMs: T,
      last: null,
      details,
    });
    expect(stored.map((e) => [e.type, e.state])).toEqual([
      ["retry_deferred", undefined],
      ["recorded", "recorded"],
    ]);
  });
});

describe("backoffSinceMs: waiting on toolgate's own objects (the run, the tenant, a failing alarm)", () => {
  it.each([
    ["just started: the floor", 0, 5_000],
    ["failing for 3 s: still the floor", 3_000, 5_000],
    ["failing for a minute: wait a minute (so the time since doubles)", 60_000, 60_000],
    ["failing for an hour: the 10 min cap", 3_600_000, 600_000],
  ] as const)("%s", (_name, failingForMs, waitMs) => {
    expect(backoffSinceMs(T, T + failingForMs)).toBe(waitMs);
  });
});
