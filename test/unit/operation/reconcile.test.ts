// The reconcile arm: the status lookup's answer (trusted only after the settle window) and a
// person's verdict on an outcome_unknown (resolve: succeeded, failed, or resend with the same key).
import { describe, expect, it } from "vitest";
import {
  transition,
  WATCHDOG_GRACE_MS,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import {
  executing,
  lost,
  plan,
  play,
  reconciling,
  status,
  step,
  T,
  timeout,
  type Item,
} from "./fixtures.ts";

describe("transition", () => {
  it("lookup found → succeeded via reconcile; not found → retry; inconclusive → later, then a person", () => {
    expect(
      step(
        reconciling,
        {
          type: "lookup_finished",
          lookups: 1,
          observation: { kind: "found", result: { id: "r" } },
        },
        plan("lookup"),
      ).state,
    ).toMatchObject({ phase: "recorded", via: "reconcile", outcome: { status: "succeeded" } });
    expect(
      step(
        reconciling,
        { type: "lookup_finished", lookups: 1, observation: { kind: "not_found" } },
        plan("lookup"),
      ).state.phase,
    ).toBe("retry_scheduled");
    expect(
      step(
        reconciling,
        { type: "lookup_finished", lookups: 1, observation: { kind: "inconclusive", detail: "" } },
        plan("lookup"),
      ).state,
    ).toMatchObject({ phase: "outcome_unknown", reconcile: "lookup" });
    const last = { ...reconciling, lookups: 4 };
    expect(
      step(
        last,
        { type: "lookup_finished", lookups: 4, observation: { kind: "inconclusive", detail: "" } },
        plan("lookup"),
      ).state,
    ).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });

  it("resolve settles outcome_unknown only", () => {
    const unknown = step(
      executing(),
      { type: "attempt_finished", attempt: 1, observation: { kind: "timeout", detail: "" } },
      plan("neither"),
    ).state;
    expect(
      step(unknown, {
        type: "resolve",
        outcome: "succeeded",
        result: { id: "m" },
        reason: "seen",
        by: "key_1",
      }).state,
    ).toMatchObject({
      phase: "recorded",
      via: "resolve",
      outcome: { status: "succeeded", result: { id: "m" } },
    });
    expect(
      step(unknown, {
        type: "resolve",
        outcome: "failed",
        result: null,
        reason: "not there",
        by: "key_1",
      }).state,
    ).toMatchObject({ outcome: { status: "failed", code: "permanent_failure" } });
    expect(
      transition(
        executing(),
        { type: "resolve", outcome: "failed", result: null, reason: "", by: "" },
        plan("neither"),
        T,
      ),
    ).toEqual({ ok: false, error: { code: "not_outcome_unknown", phase: "executing" } });
  });
});

// ── The soak's failure list (issue 7), as given/when/then ────────────────────────────────────────

describe("outcome honesty: once an attempt may have applied, nothing claims it did not", () => {
  it("keyed with a status lookup: exhaustion after an ambiguity asks the lookup; a trusted 404 then records attempts_exhausted", () => {
    const run = play(plan("keyed", 2, true), [{ got: timeout }, "due", { got: status(503) }]);
    expect(run.state).toMatchObject({
      phase: "reconciling",
      lookups: 1,
      ifNotApplied: { status: "budget_exhausted", code: "attempts_exhausted" },
    });
    expect(run.effects.at(-1)).toEqual({ kind: "send_lookup", lookups: 1 });
    const settled = play(plan("keyed", 2, true), [
      { got: timeout },
      "due",
      { got: status(503) },
      { lookupGot: { kind: "not_found" }, atMs: 1_000_000 },
    ]);
    expect(settled.state).toMatchObject({
      phase: "recorded",
      via: "reconcile",
      outcome: { status: "budget_exhausted", code: "attempts_exhausted" },
    });
    expect(settled.effects.filter((e) => e.kind === "send_attempt")).toHaveLength(2);
  });

  it("keyed: connection lost × n → outcome_unknown; a person's resend sends once more with the same key", () => {
    const script: Item[] = [
      { got: lost },
      "due",
      { got: lost },
      "due",
      { got: lost },
      "due",
      { got: lost },
    ];
    const run = play(plan("keyed"), script);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
      code: "connection_lost",
      attempt: 4,
    });
    const resend = transition(
      run.state,
      {
        type: "resolve",
        outcome: "resend",
        result: null,
        reason: "checked the ledger",
        by: "key_ops",
      },
      plan("keyed"),
      run.nowMs + 1,
    );
    expect(resend.ok && resend.value.state).toMatchObject({
      phase: "executing",
      attempt: 5,
      mayHaveApplied: { code: "connection_lost" },
    });
    // …and it leaves the list of operations waiting for a person (it entered it at exhaustion).
    expect(run.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
    expect(resend.ok && resend.value.effects).toEqual([
      { kind: "set_alarm", atMs: run.nowMs + 1 + 2_000 + WATCHDOG_GRACE_MS },
      { kind: "send_attempt", attempt: 5 },
      { kind: "needs_person", open: false, person: false },
    ]);
    expect(resend.ok && resend.value.trace).toEqual([
      expect.objectContaining({ type: "resolved", outcome: "resend", by: "key_ops" }),
      expect.objectContaining({ type: "attempt_started", attempt: 5, idempotency_key: "tg_test" }),
    ]);
    // Its result is recorded normally; a failure again goes back to the person.
    expect(
      play(plan("keyed"), [
        ...script,
        { type: "resolve", outcome: "resend", result: null, reason: "r", by: "k" },
        { got: { kind: "ok", result: { id: "x" } } },
      ]).state,
    ).toMatchObject({ phase: "recorded", outcome: { status: "succeeded" } });
    expect(
      play(plan("keyed"), [
        ...script,
        { type: "resolve", outcome: "resend", result: null, reason: "r", by: "k" },
        { got: lost },
      ]).state,
    ).toMatchObject({ phase: "outcome_unknown", reconcile: "human", attempt: 5 });
  });

  it("resend is refused for a tool without a key, and after a cancel", () => {
    const neither = play(plan("neither"), [{ got: timeout }]);
    expect(neither.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
    expect(
      transition(
        neither.state,
        { type: "resolve", outcome: "resend", result: null, reason: "r", by: "k" },
        plan("neither"),
        T,
      ),
    ).toMatchObject({ ok: false, error: { code: "resend_not_allowed" } });
    const cancelled = play(plan("keyed", 1), [{ got: timeout }, { type: "cancel", by: "k" }]);
    expect(cancelled.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
      ifNotApplied: { status: "cancelled" },
    });
    expect(
      transition(
        cancelled.state,
        { type: "resolve", outcome: "resend", result: null, reason: "r", by: "k" },
        plan("keyed"),
        T,
      ),
    ).toMatchObject({ ok: false, error: { code: "resend_not_allowed" } });
  });
});

describe("settle window: a lookup's 404 is trusted only after start + timeout_ms + settle_ms", () => {
  // plan: timeoutMs 2_000, settleMs 5_000; the ambiguous attempt started at 0 → trusted from 7_000.
  const reconciling: OperationState = {
    phase: "reconciling",
    attempt: 1,
    firstAttemptAtMs: 0,
    code: "timeout_unknown",
    ambiguousAtMs: 0,
    lookups: 1,
    startedAtMs: 2_000,
    ifNotApplied: null,
  };
  const notFound = {
    type: "lookup_finished",
    lookups: 1,
    observation: { kind: "not_found" },
  } as const;

  it.each([
    [2_000, "inside (the lookup right after the timeout)", "deferred"],
    [6_999, "inside, one ms before the end", "deferred"],
    [7_000, "at the end", "resend"],
    [60_000, "long after", "resend"],
  ] as const)("404 at %i ms (%s) → %s", (atMs, _what, expected) => {
    const result = transition(reconciling, notFound, plan("lookup"), atMs);
    if (!result.ok) throw new Error(result.error.code);
    const s = result.value;
    expect(s.effects.some((e) => e.kind === "send_attempt")).toBe(false);
    if (expected === "deferred") {
      expect(s.state).toMatchObject({
        phase: "outcome_unknown",
        reconcile: "lookup",
        dueAtMs: 7_000,
      });
      expect(s.effects).toEqual([{ kind: "set_alarm", atMs: 7_000 }]);
      expect(s.trace.map((e) => e.type)).toEqual(["reconcile_finished", "reconcile_deferred"]);
    } else {
      expect(s.state).toMatchObject({ phase: "retry_scheduled", mayHaveApplied: null });
    }
  });

  it("lookup-only, played through: timeout, 404 at once, 404 again before the window ends → still no resend; after it → one resend", () => {
    const early = play(plan("lookup"), [
      { got: timeout, atMs: 2_000 },
      { lookupGot: { kind: "not_found" }, atMs: 2_010 },
      { type: "alarm", inFlight: false },
      { lookupGot: { kind: "not_found" }, atMs: 3_000 },
    ]);
    expect(early.effects.filter((e) => e.kind === "send_attempt")).toHaveLength(1);
    expect(early.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "lookup",
      dueAtMs: 7_000,
    });
    const late = play(plan("lookup"), [
      { got: timeout, atMs: 2_000 },
      { lookupGot: { kind: "not_found" }, atMs: 2_010 },
      "due",
      { lookupGot: { kind: "not_found" }, atMs: 7_010 },
      "due",
    ]);
    expect(late.effects.filter((e) => e.kind === "send_attempt")).toHaveLength(2);
    expect(late.state).toMatchObject({ phase: "executing", attempt: 2, mayHaveApplied: null });
  });

  it("a cancel while the lookup is pending: a trusted 404 records cancelled and never resends", () => {
    const run = play(plan("lookup"), [
      { got: timeout, atMs: 2_000 },
      { lookupGot: { kind: "not_found" }, atMs: 2_010 },
      { type: "cancel", by: "k" },
      "due",
      { lookupGot: { kind: "not_found" }, atMs: 7_010 },
    ]);
    expect(run.state).toMatchObject({
      phase: "recorded",
      via: "reconcile",
      outcome: { status: "cancelled" },
    });
    expect(run.effects.filter((e) => e.kind === "send_attempt")).toHaveLength(1);
  });
});
