// The attempt arm: one attempt's observation → recorded, retry_scheduled or outcome_unknown, and
// the honesty rule it starts: once an attempt may have applied, nothing claims it did not.
import { describe, expect, it } from "vitest";
import { envelopeFor } from "../../../src/domain/envelope.ts";
import type { Observation } from "../../../src/domain/observation.ts";
import { nextDueAtMs, type OperationState } from "../../../src/domain/operation/index.ts";
import { nextDelayMs } from "../../../src/domain/retry.ts";
import { executing, NOT_APPLIED, plan, play, says, status, step, T, timeout } from "./fixtures.ts";

describe("transition", () => {
  it("ok → recorded succeeded, alarm cleared", () => {
    const s = step(executing(), {
      type: "attempt_finished",
      attempt: 1,
      observation: { kind: "ok", result: { id: "x" } },
    });
    expect(s.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "succeeded", result: { id: "x" } },
      late: false,
    });
    expect(s.effects).toEqual([{ kind: "clear_alarm" }]);
  });

  it("503 → retry_scheduled at now + the policy delay", () => {
    const s = step(executing(), {
      type: "attempt_finished",
      attempt: 1,
      observation: { kind: "http_error", status: 503, retryAfterMs: null, detail: "" },
    });
    const delay = nextDelayMs(plan("keyed").retry, "op_test", 1, null);
    expect(s.state).toMatchObject({ phase: "retry_scheduled", attempt: 1, dueAtMs: T + delay });
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: T + delay }]);
  });

  it("a stale result (wrong attempt, or not executing) changes nothing", () => {
    expect(
      step(executing(2), {
        type: "attempt_finished",
        attempt: 1,
        observation: { kind: "ok", result: 1 },
      }),
    ).toMatchObject({ changed: false, effects: [] });
    const recorded = step(executing(), {
      type: "attempt_finished",
      attempt: 1,
      observation: { kind: "ok", result: 1 },
    }).state;
    expect(
      step(recorded, {
        type: "attempt_finished",
        attempt: 1,
        observation: { kind: "ok", result: 2 },
      }),
    ).toMatchObject({ changed: false, state: recorded });
  });

  it.each([
    [
      "keyed",
      { phase: "outcome_unknown", reconcile: "resend", code: "timeout_unknown" },
      "set_alarm",
    ],
    ["lookup", { phase: "reconciling", lookups: 1 }, "send_lookup"],
    ["neither", { phase: "outcome_unknown", reconcile: "human", dueAtMs: null }, "clear_alarm"],
    ["read", { phase: "retry_scheduled" }, "set_alarm"],
  ] as const)("timeout on %s", (safety, expected, effect) => {
    const s = step(
      executing(),
      { type: "attempt_finished", attempt: 1, observation: { kind: "timeout", detail: "" } },
      plan(safety),
    );
    expect(s.state).toMatchObject(expected);
    expect(s.effects.map((e) => e.kind)).toContain(effect);
  });

  it("attempts exhausted: budget_exhausted when definite, outcome_unknown when the last try was ambiguous", () => {
    const p = plan("keyed", 2);
    expect(
      step(
        executing(2),
        {
          type: "attempt_finished",
          attempt: 2,
          observation: { kind: "http_error", status: 429, retryAfterMs: null, detail: "" },
        },
        p,
      ).state,
    ).toMatchObject({
      phase: "recorded",
      outcome: { status: "budget_exhausted", code: "attempts_exhausted" },
    });
    expect(
      step(
        executing(2),
        { type: "attempt_finished", attempt: 2, observation: { kind: "timeout", detail: "" } },
        p,
      ).state,
    ).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });
});

// ── The soak's failure list (issue 7), as given/when/then ────────────────────────────────────────

describe("outcome honesty: once an attempt may have applied, nothing claims it did not", () => {
  it("keyed: commit + timeout, then 503 × n → outcome_unknown for a person (who may resend), never 'did not take effect'", () => {
    const run = play(plan("keyed"), [
      { got: timeout },
      "due",
      { got: status(503) },
      "due",
      { got: status(503) },
      "due",
      { got: status(503) },
    ]);
    expect(run.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human", attempt: 4 });
    expect(run.trace.filter((e) => e.type === "recorded")).toEqual([]);
    expect(says(run.state, "keyed")).not.toMatch(NOT_APPLIED);
    expect(envelopeFor("op_test", run.state, "keyed")).toMatchObject({
      status: "outcome_unknown",
      message: expect.stringMatching(/same idempotency key/),
    });
    expect(says(run.state, "keyed")).not.toMatch(/cannot tell/);
  });

  it("keyed: slow commit (timeout), then 409 'in progress' × n → outcome_unknown", () => {
    const run = play(plan("keyed"), [
      { got: timeout },
      "due",
      { got: status(409) },
      "due",
      { got: status(409) },
      "due",
      { got: status(409) },
    ]);
    expect(run.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human", attempt: 4 });
    expect(says(run.state, "keyed")).not.toMatch(NOT_APPLIED);
  });

  it("the flag survives a scheduled retry: retry_scheduled after an ambiguous attempt tells the model it is unknown, not merely pending", () => {
    const run = play(plan("keyed"), [{ got: timeout }, "due", { got: status(503) }]);
    expect(run.state).toMatchObject({
      phase: "retry_scheduled",
      mayHaveApplied: { code: "upstream_error_unknown" },
    });
    expect(envelopeFor("op_test", run.state, "keyed")).toMatchObject({
      status: "outcome_unknown",
      code: "upstream_error_unknown",
    });
  });

  it("521 × n → budget_exhausted/attempts_exhausted saying nothing was sent; pending/retry_scheduled meanwhile", () => {
    const first = play(plan("neither"), [{ got: status(521) }]);
    expect(envelopeFor("op_test", first.state, "neither")).toMatchObject({
      status: "pending",
      code: "retry_scheduled",
    });
    const run = play(plan("neither"), [
      { got: status(521) },
      "due",
      { got: status(522) },
      "due",
      { got: status(523) },
      "due",
      { got: status(521) },
    ]);
    expect(run.state).toMatchObject({
      phase: "recorded",
      outcome: {
        status: "budget_exhausted",
        code: "attempts_exhausted",
        message: expect.stringMatching(/nothing was sent.*did not take effect/),
      },
    });
  });

  it("a 521 after an ambiguous attempt proves nothing about that attempt", () => {
    const run = play(plan("keyed", 2), [{ got: timeout }, "due", { got: status(521) }]);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
      code: "timeout_unknown",
    });
  });

  it("a tool that no longer compiles, or refused credentials, after an ambiguous attempt → outcome_unknown; a 404 to the same key settles it", () => {
    const config: Observation = {
      kind: "config_error",
      detail: "stored tool no longer compiles: host not allowed",
    };
    expect(play(plan("keyed"), [{ got: config }]).state).toMatchObject({
      phase: "recorded",
      outcome: { status: "failed", code: "permanent_failure" },
    });
    expect(play(plan("keyed"), [{ got: timeout }, "due", { got: config }]).state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
    });
    expect(
      play(plan("keyed"), [{ got: timeout }, "due", { got: status(401) }]).state,
    ).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
    expect(
      play(plan("keyed"), [{ got: timeout }, "due", { got: status(404) }]).state,
    ).toMatchObject({
      phase: "recorded",
      outcome: { status: "failed", code: "permanent_failure" },
    });
  });
});

describe("body lost after 2xx headers: exactly one classified observation", () => {
  const stalled: Observation = {
    kind: "body_lost",
    timedOut: true,
    detail: "HTTP 200 arrived but its body could not be read",
  };

  it.each([
    ["keyed", { phase: "outcome_unknown", reconcile: "resend", code: "timeout_unknown" }],
    ["lookup", { phase: "recorded", outcome: { status: "failed", code: "invalid_output" } }],
    ["neither", { phase: "recorded", outcome: { status: "failed", code: "invalid_output" } }],
    ["read", { phase: "retry_scheduled" }],
  ] as const)("%s", (safety, expected) => {
    const run = play(plan(safety), [{ got: stalled }, { type: "alarm", inFlight: false }]);
    expect(run.trace.filter((e) => e.type === "attempt_finished")).toHaveLength(1);
    const first = play(plan(safety), [{ got: stalled }]);
    expect(first.state).toMatchObject(expected);
    if (first.state.phase === "recorded") {
      expect(says(first.state, safety)).toMatch(/took effect/);
      expect(says(first.state, safety)).not.toMatch(NOT_APPLIED);
    }
  });
});

describe("toolgate's own dependencies failing before a send", () => {
  const notSent: Observation = {
    kind: "not_sent",
    detail: "toolgate could not read the tenant's secrets for this attempt",
  };

  it.each(["read", "keyed", "lookup", "neither"] as const)(
    "%s: not_sent is a retry that may not have applied (nothing was handed to the network)",
    (safety) => {
      const s = step(
        executing(),
        { type: "attempt_finished", attempt: 1, observation: notSent },
        plan(safety),
      );
      expect(s.state).toMatchObject({ phase: "retry_scheduled", attempt: 1, mayHaveApplied: null });
    },
  );

  it("not_sent after an ambiguous attempt keeps the ambiguity: exhaustion then stays outcome_unknown", () => {
    const ambiguous: OperationState = {
      ...executing(2),
      mayHaveApplied: { atMs: 0, code: "timeout_unknown" },
    } as OperationState;
    const s = step(
      ambiguous,
      { type: "attempt_finished", attempt: 2, observation: notSent },
      plan("neither", 2),
    );
    expect(s.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
    expect(says(s.state, "neither")).not.toMatch(NOT_APPLIED);
  });

  it("retry_deferred `unavailable` keeps the phase and attempt, moves the due time, and says why", () => {
    const scheduled: OperationState = {
      phase: "retry_scheduled",
      attempt: 1,
      dueAtMs: T - 1,
      firstAttemptAtMs: 0,
      reason: "HTTP 429",
      mayHaveApplied: null,
    };
    const s = step(scheduled, {
      type: "retry_deferred",
      untilMs: T + 5_000,
      reason: "unavailable",
      detail:
        "toolgate could not prepare the request: the run could not be asked; nothing was sent",
    });
    expect(s.state).toMatchObject({ phase: "retry_scheduled", attempt: 1 });
    expect(nextDueAtMs(s.state)).toBeGreaterThanOrEqual(T + 5_000);
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: nextDueAtMs(s.state) }]);
    expect(s.trace[0]).toMatchObject({ type: "retry_deferred", reason: "unavailable" });
  });
});
