// Late settlement (issue 24) as the state machine plays it: a keyed write whose attempts ran out
// keeps resending with the same key on the late schedule, a lookup tool keeps looking up; the model
// is told it is being settled; a person's verdict stops it; the key's window ends it (a person then).
import { describe, expect, it } from "vitest";
import { isSettled, transition, type OperationPlan } from "../../../src/domain/operation/index.ts";
import { DEFAULT_SETTLE_SCHEDULE_MS } from "../../../src/domain/retry-late.ts";
import { lost, NOT_APPLIED, plan, play, says, type Item } from "./fixtures.ts";

const DAY = 24 * 60 * 60_000;
const late = (p: OperationPlan, keyTtlMs = DAY): OperationPlan => ({
  ...p,
  lateSettle: { keyTtlMs, scheduleMs: [...DEFAULT_SETTLE_SCHEDULE_MS] },
});
const ok = { kind: "ok", result: { id: "ch_1" } } as const;
const sends = (effects: Array<{ kind: string }>) =>
  effects.filter((e) => e.kind === "send_attempt").length;

describe("keyed write: attempts spent while the outcome is unknown", () => {
  const spent: Item[] = [{ got: lost }, "due", { got: lost }];

  it("keeps settling by itself: outcome_unknown with the next late try, listed as settling, nobody paged", () => {
    const run = play(late(plan("keyed", 2)), spent);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "resend",
      dueAtMs: 60_000, // one minute after the first attempt
      settleUntilMs: DAY,
    });
    expect(run.effects).toContainEqual({ kind: "needs_person", open: true, person: false });
    expect(run.effects).not.toContainEqual(expect.objectContaining({ person: true }));
    const told = JSON.parse(says(run.state, "keyed"));
    expect(told).toMatchObject({ status: "outcome_unknown", code: "connection_lost" });
    expect(told.allowed_next_actions).toContain("check_status");
    expect(told.message).toMatch(/toolgate_check_status/);
    expect(told.message).toMatch(/same idempotency key/);
    expect(told.message).not.toMatch(NOT_APPLIED);
    // The caller can stop waiting: hours of settling are not a wait (check_status learns the end).
    expect(isSettled(run.state)).toBe(true);
  });

  it("the late resend uses the same attempt chain and key; its success settles it and leaves the list", () => {
    const run = play(late(plan("keyed", 2)), [...spent, "due", { got: ok }]);
    expect(run.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "succeeded", result: { id: "ch_1" } },
      attempts: 3,
    });
    expect(sends(run.effects)).toBe(3);
    expect(run.effects.at(-1)).toEqual({ kind: "needs_person", open: false, person: false });
    expect(
      new Set(run.trace.filter((e) => e.type === "attempt_started").map((e) => e.idempotency_key)),
    ).toEqual(new Set(["tg_test"]));
  });

  it("while a late try is in flight the model still reads the settling answer, never 'pending'", () => {
    const run = play(late(plan("keyed", 2)), [...spent, "due"]);
    expect(run.state).toMatchObject({ phase: "executing", attempt: 3, settleUntilMs: DAY });
    expect(JSON.parse(says(run.state, "keyed"))).toMatchObject({ status: "outcome_unknown" });
  });

  it("failing late tries follow the schedule: 1 min, 6 min, 36 min after the first attempt", () => {
    const run = play(late(plan("keyed", 2)), [
      ...spent,
      "due",
      { got: lost, atMs: 60_100 },
      "due",
      { got: lost, atMs: 360_100 },
    ]);
    expect(run.state).toMatchObject({ phase: "outcome_unknown", dueAtMs: 36 * 60_000 });
    expect(run.trace.filter((e) => e.type === "settle_scheduled").map((e) => e.due_at_ms)).toEqual([
      60_000, 360_000, 2_160_000,
    ]);
  });

  it("a person's verdict wins at any time: recorded, and an alarm already due sends nothing", () => {
    const p = late(plan("keyed", 2));
    const run = play(p, [
      ...spent,
      { type: "resolve", outcome: "failed", result: null, reason: "refunded by hand", by: "ops" },
    ]);
    expect(run.state).toMatchObject({ phase: "recorded", via: "resolve" });
    const fired = transition(run.state, { type: "alarm", inFlight: false }, p, 60_000);
    expect(fired.ok && fired.value.changed).toBe(false);
    expect(fired.ok && fired.value.effects).toEqual([]);
  });

  it("the window ends without an answer: a person is needed (paged then), and nothing more is sent", () => {
    // A 5-minute key: the 1-minute try fits, the next one (6 min) does not.
    const p = late(plan("keyed", 2), 5 * 60_000);
    const run = play(p, [...spent, "due", { got: lost, atMs: 60_100 }]);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "human",
      dueAtMs: null,
    });
    expect(run.state).not.toHaveProperty("settleUntilMs");
    expect(run.trace.map((e) => e.type)).toContain("settle_window_ended");
    expect(run.effects.at(-1)).toEqual({ kind: "needs_person", open: true, person: true });
    const after = transition(run.state, { type: "alarm", inFlight: false }, p, 10 * 60_000);
    expect(after.ok && after.value.effects).toEqual([]);
    expect(sends(run.effects)).toBe(3);
  });

  it("an alarm that arrives after the window sends nothing and hands it to a person", () => {
    const p = late(plan("keyed", 2), 5 * 60_000);
    const run = play(p, spent);
    const fired = transition(run.state, { type: "alarm", inFlight: false }, p, 5 * 60_000);
    expect(fired.ok && fired.value.state).toMatchObject({ reconcile: "human" });
    expect(fired.ok && fired.value.effects).toEqual([
      { kind: "clear_alarm" },
      { kind: "needs_person", open: true, person: true },
    ]);
  });

  it("the retry budget defers a late resend (never drops it) within the window; past it, a person", () => {
    const p = late(plan("keyed", 2), 10 * 60_000);
    const run = play(p, spent);
    const deferred = transition(
      run.state,
      { type: "retry_deferred", untilMs: 120_000, reason: "retry_budget", detail: "spent" },
      p,
      60_000,
    );
    expect(deferred.ok && deferred.value.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "resend",
      settleUntilMs: 10 * 60_000,
    });
    const due =
      deferred.ok &&
      deferred.value.state.phase === "outcome_unknown" &&
      deferred.value.state.dueAtMs;
    expect(due).toBeGreaterThanOrEqual(120_000);
    expect(due).toBeLessThan(121_000);
    const tooLate = transition(
      run.state,
      { type: "retry_deferred", untilMs: 10 * 60_000, reason: "retry_budget", detail: "spent" },
      p,
      60_000,
    );
    expect(tooLate.ok && tooLate.value.state).toMatchObject({ reconcile: "human" });
    expect(tooLate.ok && sends(tooLate.value.effects)).toBe(0);
  });

  it("a cancel while settling stops the resends: a person decides", () => {
    const run = play(late(plan("keyed", 2)), [...spent, { type: "cancel", by: "user" }]);
    expect(run.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
    expect(run.state).not.toHaveProperty("settleUntilMs");
  });

  it("a plan frozen before late settlement existed still goes to a person", () => {
    const run = play(plan("keyed", 2), spent);
    expect(run.state).toMatchObject({ phase: "outcome_unknown", reconcile: "human" });
  });
});

describe("lookup tool: its status lookups kept failing", () => {
  const inconclusive = { lookupGot: { kind: "inconclusive", detail: "HTTP 503" } } as const;

  it("keeps looking up on the late schedule; a late lookup that finds the effect settles it", () => {
    const p = late(plan("lookup", 2));
    const run = play(p, [{ got: lost }, inconclusive, "due", inconclusive]);
    expect(run.state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "lookup",
      dueAtMs: 60_000,
      settleUntilMs: DAY,
    });
    expect(JSON.parse(says(run.state, "lookup")).message).toMatch(/status lookup/);
    const found = play(p, [
      { got: lost },
      inconclusive,
      "due",
      inconclusive,
      "due",
      { lookupGot: { kind: "found", result: { id: "ch_9" } } },
    ]);
    expect(found.state).toMatchObject({ phase: "recorded", outcome: { status: "succeeded" } });
    expect(sends(found.effects)).toBe(1); // one write, then only lookups
  });
});
