// The awaiting_quota arm (issue 34 item 4): a first attempt with quotas asks them before it is
// sent; a slot now starts attempt 1, a slot later or a pause waits (no attempt spent, nothing sent),
// a slot past the run's deadline ends it budget_exhausted/deadline, and the wait stops like any unsent
// work (cancel, denial). Given state S and event E at time T → state S', effects.
import { describe, expect, it } from "vitest";
import {
  QUOTA_RECHECK_MS,
  stateAlarmAtMs,
  type OperationPlan,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import { envelopeFor } from "../../../src/domain/envelope.ts";
import { executing, plan, step, T } from "./fixtures.ts";

const shaped: OperationPlan = {
  ...plan("keyed"),
  quotas: [
    { id: "q", object: "t:https://api.example", rate: { limit: 5, windowMs: 1000, burst: 5 } },
  ],
  deadlineAtMs: null,
};
const waiting = (over: Partial<Extract<OperationState, { phase: "awaiting_quota" }>> = {}) =>
  ({
    phase: "awaiting_quota",
    requestedAtMs: T - 5_000,
    dueAtMs: null,
    reason: "rate",
    long: false,
    detail: "asking its quota for a slot",
    ...over,
  }) as OperationState;
const start = { type: "start", inputHash: "h", callId: "c1", tool: "charge" } as const;

describe("the first attempt asks its quotas", () => {
  it("no quota in the plan: attempt 1 at once (the new write asks nothing)", () => {
    const s = step(null, start, plan("keyed"));
    expect(s.state.phase).toBe("executing");
    expect(s.effects.map((e) => e.kind)).not.toContain("acquire_quota");
  });

  it("quotas: waits for the answer, nothing sent, with a recheck armed", () => {
    const s = step(null, start, shaped);
    expect(s.state).toMatchObject({ phase: "awaiting_quota", dueAtMs: null });
    expect(s.effects).toEqual([
      { kind: "set_alarm", atMs: T + QUOTA_RECHECK_MS },
      { kind: "acquire_quota" },
    ]);
  });

  it("a lock granted: then the quota, still before attempt 1", () => {
    const locked = { ...shaped, resource: "order:1" };
    const s = step(
      { phase: "awaiting_lock", requestedAtMs: T, blockedBy: null },
      { type: "lock_granted", fencingToken: 3 },
      locked,
    );
    expect(s.state.phase).toBe("awaiting_quota");
  });
});

describe("the quota's answer", () => {
  const answer = (a: any, state = waiting(), p = shaped) =>
    step(state, { type: "quota_answered", answer: a }, p);

  it.each([
    ["a slot now: attempt 1", { kind: "granted", atMs: T }, "executing", null],
    ["a slot already past: attempt 1", { kind: "granted", atMs: T - 10 }, "executing", null],
    [
      "a slot later: waits for it",
      { kind: "granted", atMs: T + 12_000 },
      "awaiting_quota",
      T + 12_000,
    ],
    [
      "the upstream's pause: waits until it ends",
      { kind: "wait", untilMs: T + 3_600_000, reason: "paused", long: true, detail: "429" },
      "awaiting_quota",
      T + 3_600_000,
    ],
    [
      "a cap full: waits to be woken (a recheck armed)",
      { kind: "wait", untilMs: null, reason: "concurrency", long: false, detail: "2 at a time" },
      "awaiting_quota",
      null,
    ],
  ] as const)("%s", (_name, a, phase, dueAtMs) => {
    const s = answer(a);
    expect(s.state.phase).toBe(phase);
    if (phase === "executing") {
      expect(s.state).toMatchObject({ attempt: 1 });
      expect(s.effects).toContainEqual({ kind: "send_attempt", attempt: 1 });
      return;
    }
    expect(s.state).toMatchObject({ dueAtMs });
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: dueAtMs ?? T + QUOTA_RECHECK_MS }]);
    expect(s.effects.map((e) => e.kind)).not.toContain("send_attempt");
  });

  it("a slot past the run's deadline: budget_exhausted/deadline, nothing sent, nothing claimed", () => {
    const s = answer({ kind: "deadline", atMs: T + 60_000 });
    expect(s.state).toMatchObject({
      phase: "recorded",
      attempts: 0,
      outcome: { status: "budget_exhausted", code: "deadline" },
    });
    const outcome = (s.state as Extract<OperationState, { phase: "recorded" }>).outcome;
    expect("message" in outcome && outcome.message).toMatch(/was not sent and did not take effect/);
  });

  it("an answer after it stopped waiting changes nothing (a late or repeated RPC)", () => {
    const s = answer({ kind: "granted", atMs: T }, executing(1));
    expect(s.changed).toBe(false);
    expect(s.effects).toEqual([]);
  });

  it("the same wait again: no new row", () => {
    const same = waiting({ dueAtMs: T + 1_000, detail: "a reserved slot" });
    expect(answer({ kind: "granted", atMs: T + 1_000 }, same).changed).toBe(false);
  });
});

describe("while it waits", () => {
  it("its alarm asks again, with a recheck armed", () => {
    const s = step(waiting({ dueAtMs: T }), { type: "alarm", inFlight: false }, shaped);
    expect(s.state.phase).toBe("awaiting_quota");
    expect(s.effects).toEqual([
      { kind: "set_alarm", atMs: T + QUOTA_RECHECK_MS },
      { kind: "acquire_quota" },
    ]);
  });

  it.each([
    ["a cancel", { type: "cancel", by: "run" }, "cancelled"],
    [
      "the run's denial",
      { type: "denied", status: "rejected", code: "forbidden", message: "no" },
      "rejected",
    ],
  ] as const)(
    "%s ends it with nothing sent (attempts 0), leaving the quota's queue",
    (_name, event, status) => {
      const s = step(waiting(), event as any, shaped);
      expect(s.state).toMatchObject({ phase: "recorded", attempts: 0, outcome: { status } });
      expect(s.effects).toContainEqual({ kind: "release_quota" });
    },
  );

  it("the shell puts its alarm back at its slot, or at the recheck", () => {
    expect(stateAlarmAtMs(waiting({ dueAtMs: T + 5 }), shaped, T)).toBe(T + 5);
    expect(stateAlarmAtMs(waiting(), shaped, T)).toBe(T + QUOTA_RECHECK_MS);
  });

  it.each([
    ["a slot", waiting({ dueAtMs: T + 12_000 }), "rate_limited", /Next slot in ~12 s/],
    [
      "a cap",
      waiting({ reason: "concurrency" }),
      "rate_limited",
      /calls at a time are all in use.*as soon as there is one/,
    ],
    [
      "its first ask, not yet answered",
      waiting(),
      "rate_limited",
      /asking this call's quota for a slot/,
    ],
    [
      "a long pause (a used-up quota)",
      waiting({ dueAtMs: T + 3_600_000, reason: "paused", long: true }),
      "quota_exhausted",
      /quota is used up until .*nothing has been sent/,
    ],
  ] as const)("the model reads %s: pending, nothing sent", (_name, state, code, message) => {
    const envelope = envelopeFor("op_test", state, "keyed", T);
    expect(envelope).toMatchObject({ status: "pending", code, allowed_next_actions: ["wait"] });
    expect("message" in envelope && envelope.message).toMatch(message);
  });
});

describe("a retry the upstream's pause defers", () => {
  const scheduled: OperationState = {
    phase: "retry_scheduled",
    attempt: 1,
    dueAtMs: T,
    firstAttemptAtMs: 0,
    reason: "http 429",
    mayHaveApplied: null,
  };
  it("waits past its elapsed budget without failing, and says it is a long pause", () => {
    const p = { ...plan("keyed"), retry: { ...plan("keyed").retry, maxElapsedMs: 60_000 } };
    const s = step(
      scheduled,
      {
        type: "retry_deferred",
        untilMs: T + 3_600_000,
        reason: "rate_limited",
        detail: "429",
        long: true,
      },
      p,
    );
    expect(s.state).toMatchObject({ phase: "retry_scheduled", paused: { long: true } });
    expect(envelopeFor("op_test", s.state, "keyed", T)).toMatchObject({
      status: "pending",
      code: "quota_exhausted",
    });
  });
  it("the retry budget's deferral still runs out the elapsed budget (unchanged)", () => {
    const p = { ...plan("keyed"), retry: { ...plan("keyed").retry, maxElapsedMs: 60_000 } };
    const s = step(
      scheduled,
      { type: "retry_deferred", untilMs: T + 3_600_000, reason: "retry_budget", detail: "x" },
      p,
    );
    expect(s.state.phase).toBe("recorded");
  });
});
