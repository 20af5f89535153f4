// transition(): the one entry. Start, refusals before start, and the alarm dispatch (watchdog,
// crash recovery, the next attempt); each arm's own table is in the file named after it.
import { describe, expect, it } from "vitest";
import { transition, WATCHDOG_GRACE_MS } from "../../../src/domain/operation/index.ts";
import { executing, plan, step, T } from "./fixtures.ts";

describe("transition", () => {
  it("start → executing attempt 1, watchdog armed before the send", () => {
    const s = step(null, { type: "start", inputHash: "h", callId: "c1", tool: "charge" });
    expect(s.state).toEqual({
      phase: "executing",
      attempt: 1,
      keyIssuedAtMs: T,
      startedAtMs: T,
      firstAttemptAtMs: T,
      cancelRequested: false,
      mayHaveApplied: null,
    });
    expect(s.effects).toEqual([
      { kind: "set_alarm", atMs: T + 2_000 + WATCHDOG_GRACE_MS },
      { kind: "send_attempt", attempt: 1 },
    ]);
    expect(s.trace.map((e) => e.type)).toEqual(["proposed", "validated", "attempt_started"]);
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
    expect(s).toMatchObject({
      changed: false,
      effects: [{ kind: "set_alarm", atMs: T + 2_000 + WATCHDOG_GRACE_MS }],
    });
  });

  it("alarm in retry_scheduled starts the next attempt with the same key", () => {
    const s = step(
      {
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: T,
        firstAttemptAtMs: 0,
        reason: "",
        mayHaveApplied: null,
      },
      { type: "alarm", inFlight: false },
    );
    expect(s.state).toMatchObject({ phase: "executing", attempt: 2, firstAttemptAtMs: 0 });
    expect(s.trace[0]).toMatchObject({
      type: "attempt_started",
      attempt: 2,
      idempotency_key: "tg_test",
    });
  });

  it("alarms on a recorded operation are absorbed (alarms are at-least-once)", () => {
    const recorded = step(executing(), {
      type: "attempt_finished",
      attempt: 1,
      observation: { kind: "ok", result: 1 },
    }).state;
    expect(step(recorded, { type: "alarm", inFlight: false })).toMatchObject({
      changed: false,
      effects: [],
    });
  });

  it("start twice, or any other event before start, is refused", () => {
    expect(
      transition(
        executing(),
        { type: "start", inputHash: "h", callId: "c", tool: "t" },
        plan("keyed"),
        T,
      ),
    ).toEqual({ ok: false, error: { code: "already_started" } });
    expect(transition(null, { type: "alarm", inFlight: false }, plan("keyed"), T)).toEqual({
      ok: false,
      error: { code: "not_started" },
    });
  });
});
