// The awaiting_lock arm and the alarm each state arms: rechecks back off (the grant notice is the
// normal path), a denied waiter gives up its place, and stateAlarmAtMs lets the shell put an alarm back.
import { describe, expect, it } from "vitest";
import {
  LOCK_RECHECK_MAX_MS,
  LOCK_WAITING_LONG_MS,
  nextLockRecheckAtMs,
  stateAlarmAtMs,
  transition,
  WATCHDOG_GRACE_MS,
  type OperationPlan,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import { executing, plan, step } from "./fixtures.ts";

describe("waiting for a resource lock: rechecks back off, the grant notice is the normal path", () => {
  const locked: OperationPlan = { ...plan("keyed"), resource: "order:1" };
  const waiting = (requestedAtMs: number): OperationState => ({
    phase: "awaiting_lock",
    requestedAtMs,
    blockedBy: "op_other",
  });
  const S = 1_000;

  it.each([
    ["at the start", 0, 30_000],
    ["at the first recheck", 30_000, 90_000],
    ["between rechecks", 100_000, 210_000],
    ["the gaps double", 210_000, 450_000],
    ["…up to 10 min", 930_000, 1_530_000],
    ["then every 10 min", 1_530_000, 2_130_000],
    ["a week later, still on the 10 min grid", 7 * 86_400_000 + 5, 7 * 86_400_000 + 330_000],
  ] as const)("%s: waited %i ms → next recheck at +%i ms", (_name, waitedMs, nextMs) => {
    expect(nextLockRecheckAtMs(S, S + waitedMs)).toBe(S + nextMs);
    const at = transition(waiting(S), { type: "alarm", inFlight: false }, locked, S + waitedMs);
    expect(at.ok && at.value.effects).toEqual([
      { kind: "set_alarm", atMs: S + nextMs },
      { kind: "acquire_lock" },
    ]);
  });

  it.each([
    ["before the threshold: nothing reported", 30_000, undefined, false],
    [
      "the first recheck at or past it: reported, state marked",
      LOCK_WAITING_LONG_MS,
      undefined,
      true,
    ],
    ["a later recheck, already reported: nothing more", 210_000, true, false],
  ] as const)("lock.waiting_long, %s", (_name, waitedMs, waitedLong, reports) => {
    const state = { ...waiting(S), ...(waitedLong ? { waitedLong } : {}) } as OperationState;
    const at = transition(state, { type: "alarm", inFlight: false }, locked, S + waitedMs);
    expect(at.ok).toBe(true);
    if (!at.ok) return;
    // The re-arm is the same either way.
    expect(at.value.effects).toEqual([
      { kind: "set_alarm", atMs: nextLockRecheckAtMs(S, S + waitedMs) },
      { kind: "acquire_lock" },
    ]);
    expect(at.value.changed).toBe(reports);
    expect(at.value.trace).toEqual(
      reports
        ? [
            {
              type: "lock_waiting_long",
              at_ms: S + waitedMs,
              resource: "order:1",
              blocked_by: "op_other",
              waited_ms: waitedMs,
            },
          ]
        : [],
    );
    if (reports) expect(at.value.state).toEqual({ ...waiting(S), waitedLong: true });
  });

  it("a day of waiting asks the lock about 150 times (every 30 s was 2,880), never more than 10 min apart", () => {
    let nowMs = S;
    const rechecks: number[] = [];
    while (nowMs < S + 86_400_000) {
      nowMs = nextLockRecheckAtMs(S, nowMs);
      rechecks.push(nowMs);
    }
    expect(rechecks.length).toBeLessThan(160);
    const gaps = rechecks.slice(1).map((at, i) => at - rechecks[i]!);
    expect(Math.max(...gaps)).toBe(LOCK_RECHECK_MAX_MS);
  });

  it("a waiter the run denies (deadline, cancel) is recorded with the denial and gives up its place", () => {
    const s = step(
      waiting(S),
      { type: "denied", status: "cancelled", code: "cancelled", message: "The run was cancelled." },
      locked,
    );
    expect(s.state).toMatchObject({ phase: "recorded", outcome: { status: "cancelled" } });
    expect(s.effects).toContainEqual({ kind: "release_lock" });
  });
});

describe("stateAlarmAtMs: the alarm each state armed, so the shell can put it back", () => {
  const approval: OperationPlan = {
    ...plan("keyed"),
    approval: {
      inputHash: "h",
      toolVersion: "v",
      requestedBy: "u1",
      fourEyes: true,
      expiresAtMs: 99_000,
      preview: false,
    },
  };
  it.each([
    [
      "awaiting_approval: its expiry",
      { phase: "awaiting_approval", requestedAtMs: 0 },
      approval,
      99_000,
    ],
    [
      "awaiting_lock: the next recheck",
      { phase: "awaiting_lock", requestedAtMs: 0, blockedBy: null },
      plan("keyed"),
      30_000,
    ],
    ["executing: the watchdog", executing(), plan("keyed"), 2_000 + WATCHDOG_GRACE_MS],
    [
      "retry_scheduled: the retry",
      {
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: 42_000,
        firstAttemptAtMs: 0,
        reason: "",
        mayHaveApplied: null,
      },
      plan("keyed"),
      42_000,
    ],
    [
      "outcome_unknown for a person: none",
      {
        phase: "outcome_unknown",
        attempt: 1,
        firstAttemptAtMs: 0,
        code: "timeout_unknown",
        ambiguousAtMs: 0,
        reconcile: "human",
        dueAtMs: null,
        lookups: 0,
        reason: "",
        ifNotApplied: null,
      },
      plan("neither"),
      null,
    ],
  ] as const)("%s", (_name, state, p, expected) => {
    expect(stateAlarmAtMs(state as OperationState, p, 10_000)).toBe(expected);
  });
});
