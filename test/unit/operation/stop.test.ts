// The stop arm: the run's denial and a cancel. Only work not yet sent is refused outright; after
// an ambiguous attempt a stop only forbids further sends (retry_deferred: ../retry-deferred.test.ts).
import { describe, expect, it } from "vitest";
import type { OperationEvent, OperationState } from "../../../src/domain/operation/index.ts";
import { executing, NOT_APPLIED, plan, play, says, status, step, T, timeout } from "./fixtures.ts";

describe("transition", () => {
  it("denied: a scheduled retry is refused cleanly, a pending resend goes to a person", () => {
    const denied = {
      type: "denied",
      status: "rejected",
      code: "forbidden",
      message: "no",
    } as const;
    expect(
      step(
        {
          phase: "retry_scheduled",
          attempt: 1,
          dueAtMs: T,
          firstAttemptAtMs: 0,
          reason: "",
          mayHaveApplied: null,
        },
        denied,
      ).state,
    ).toMatchObject({ phase: "recorded", outcome: { status: "rejected", code: "forbidden" } });
    const resend: OperationState = {
      phase: "outcome_unknown",
      attempt: 1,
      firstAttemptAtMs: 0,
      code: "timeout_unknown",
      ambiguousAtMs: 0,
      reconcile: "resend",
      dueAtMs: T,
      lookups: 0,
      reason: "",
      ifNotApplied: null,
    };
    expect(step(resend, denied).state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
    });
  });

  it("cancel: before sending → cancelled; mid-write → result recorded late; mid-read → abort", () => {
    expect(
      step(
        {
          phase: "retry_scheduled",
          attempt: 1,
          dueAtMs: T,
          firstAttemptAtMs: 0,
          reason: "",
          mayHaveApplied: null,
        },
        { type: "cancel", by: "k" },
      ).state,
    ).toMatchObject({ outcome: { status: "cancelled" } });
    const flagged = step(executing(), { type: "cancel", by: "k" });
    expect(flagged).toMatchObject({
      state: { phase: "executing", cancelRequested: true },
      effects: [],
    });
    expect(
      step(flagged.state, {
        type: "attempt_finished",
        attempt: 1,
        observation: { kind: "ok", result: 1 },
      }).state,
    ).toMatchObject({ phase: "recorded", late: true, outcome: { status: "succeeded" } });
    expect(step(executing(), { type: "cancel", by: "k" }, plan("read")).effects).toEqual([
      { kind: "abort_attempt" },
    ]);
  });
});

// ── The soak's failure list (issue 7), as given/when/then ────────────────────────────────────────

describe("outcome honesty: once an attempt may have applied, nothing claims it did not", () => {
  it.each([
    [
      "denied (scope revoked)",
      {
        type: "denied",
        status: "rejected",
        code: "forbidden",
        message: "The user lost the scope. It did not take effect.",
      },
    ],
    [
      "denied (deadline)",
      {
        type: "denied",
        status: "budget_exhausted",
        code: "deadline",
        message: "Out of time. It did not take effect.",
      },
    ],
    ["cancel", { type: "cancel", by: "k" }],
  ] as Array<[string, Extract<OperationEvent, { type: "denied" | "cancel" }>]>)(
    "%s from retry_scheduled after an ambiguous attempt → outcome_unknown, never the refusal",
    (_what, event) => {
      const noLookup = play(plan("keyed"), [{ got: timeout }, "due", { got: status(409) }, event]);
      expect(noLookup.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
      expect(says(noLookup.state, "keyed")).not.toMatch(NOT_APPLIED);
      const withLookup = play(plan("keyed", 4, true), [
        { got: timeout },
        "due",
        { got: status(409) },
        event,
      ]);
      expect(withLookup.state).toMatchObject({
        phase: "reconciling",
        ifNotApplied: { status: event.type === "cancel" ? "cancelled" : event.status },
      });
      // The refusal is recorded only once the lookup proves it did not happen.
      const proven = play(plan("keyed", 4, true), [
        { got: timeout },
        "due",
        { got: status(409) },
        event,
        { lookupGot: { kind: "not_found" }, atMs: 1_000_000 },
      ]);
      expect(proven.state).toMatchObject({
        phase: "recorded",
        via: "reconcile",
        outcome: { status: event.type === "cancel" ? "cancelled" : event.status },
      });
      expect(proven.effects.filter((e) => e.kind === "send_attempt")).toHaveLength(2);
    },
  );

  it("denied or cancelled with nothing ambiguous → the refusal is recorded at once", () => {
    const run = play(plan("keyed"), [{ got: status(429) }, { type: "cancel", by: "k" }]);
    expect(run.state).toMatchObject({ phase: "recorded", outcome: { status: "cancelled" } });
  });

  it("a cancel mid-attempt whose result is ambiguous ends outcome_unknown, not 'cancelled before it took effect'", () => {
    const run = play(plan("keyed"), [{ type: "cancel", by: "k" }, { got: status(503) }]);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
      ifNotApplied: { status: "cancelled" },
    });
  });
});
