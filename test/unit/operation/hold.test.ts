// The held arm (issue 34) as a table: each of hold / release (freeze, pause) / pause / retry_now in
// every phase — where it applies, what it becomes and which effects it asks; where it does not, it
// is refused (`not_waiting`) or changes nothing, and never sends. Then the rows that carry detail.
import { describe, expect, it } from "vitest";
import {
  transition,
  type OperationEvent,
  type OperationPlan,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import { HELD_RECHECK_MS } from "../../../src/domain/operation/steps.ts";
import { executing, plan, reconciling, T } from "./fixtures.ts";

const keyed = plan("keyed");
const locked: OperationPlan = { ...keyed, resource: "order:1" };
const retry: Extract<OperationState, { phase: "retry_scheduled" }> = {
  phase: "retry_scheduled",
  attempt: 1,
  dueAtMs: T + 5_000,
  firstAttemptAtMs: 0,
  reason: "503",
  mayHaveApplied: null,
};
const unknown = (reconcile: "resend" | "lookup" | "human") =>
  ({
    phase: "outcome_unknown",
    attempt: 1,
    firstAttemptAtMs: 0,
    code: "timeout_unknown",
    ambiguousAtMs: 0,
    reconcile,
    dueAtMs: reconcile === "human" ? null : T + 5_000,
    lookups: 0,
    reason: "",
    ifNotApplied: null,
  }) as const satisfies OperationState;
const F = { kind: "freeze", freezeId: "fz_1", reason: "refund spike" } as const;
const held = (
  hold: Extract<OperationState, { phase: "held" }>["hold"],
  resume: Extract<OperationState, { phase: "held" }>["resume"],
): OperationState => ({ phase: "held", hold, resume, heldAtMs: 0, recheckAtMs: null });
const P = { kind: "pause", by: "ops" } as const;

const PHASES: Record<string, OperationState> = {
  awaiting_approval: { phase: "awaiting_approval", requestedAtMs: 0 },
  awaiting_lock: { phase: "awaiting_lock", requestedAtMs: 0, blockedBy: "op_other" },
  executing: executing(),
  retry_scheduled: retry,
  "outcome_unknown/resend": unknown("resend"),
  "outcome_unknown/lookup": unknown("lookup"),
  "outcome_unknown/human": unknown("human"),
  reconciling,
  "held/freeze/unsent": held(F, { phase: "unsent" }),
  "held/freeze/retry": held(F, retry),
  "held/pause/unsent": held(P, { phase: "unsent" }),
  "held/pause/retry": held(P, retry),
  recorded: {
    phase: "recorded",
    outcome: { status: "succeeded", result: {} },
    attempts: 1,
    via: "attempt",
    recordedAtMs: 0,
    late: false,
  },
};

const EVENTS: Record<string, OperationEvent> = {
  hold: { type: "hold", hold: F },
  "hold(other freeze)": { type: "hold", hold: { ...F, freezeId: "fz_2" } },
  "release(freeze)": { type: "release", of: "freeze", by: "lift" },
  "release(pause)": { type: "release", of: "pause", by: "ops" },
  pause: { type: "pause", by: "ops" },
  retry_now: { type: "retry_now", by: "ops" },
};

// What each event does in each phase: the phase it leads to, "same" (nothing changes) or
// "refused" (not_waiting, nothing changes). Rows not listed: "same" for hold/release, "refused"
// for pause/retry_now.
const APPLIES: Record<string, Record<string, string>> = {
  hold: {
    awaiting_lock: "held",
    retry_scheduled: "held",
    "outcome_unknown/resend": "held",
  },
  "hold(other freeze)": {
    awaiting_lock: "held",
    retry_scheduled: "held",
    "outcome_unknown/resend": "held",
    // A freeze's hold moves to the other freeze; a person's pause is never replaced by a freeze.
    "held/freeze/unsent": "held",
    "held/freeze/retry": "held",
  },
  "release(freeze)": {
    "held/freeze/unsent": "executing",
    "held/freeze/retry": "executing",
  },
  "release(pause)": {
    "held/pause/unsent": "executing",
    "held/pause/retry": "retry_scheduled",
  },
  pause: {
    awaiting_lock: "held",
    retry_scheduled: "held",
    "outcome_unknown/resend": "held",
    "held/pause/unsent": "same",
    "held/pause/retry": "same",
  },
  retry_now: {
    retry_scheduled: "executing",
    "outcome_unknown/resend": "executing",
    "held/pause/retry": "executing",
  },
};

const rows = Object.keys(EVENTS).flatMap((event) =>
  Object.keys(PHASES).map((phase) => {
    const listed = APPLIES[event]![phase];
    const fallback = event === "pause" || event === "retry_now" ? "refused" : "same";
    return [event, phase, listed ?? fallback] as const;
  }),
);

describe("the held arm, every event in every phase", () => {
  it.each(rows)("%s in %s → %s", (eventName, phaseName, expected) => {
    const before = PHASES[phaseName]!;
    const result = transition(before, EVENTS[eventName]!, keyed, T);
    if (expected === "refused") {
      expect(result).toMatchObject({ ok: false, error: { code: "not_waiting" } });
      return;
    }
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const { state, effects } = result.value;
    if (expected === "same") {
      expect(state).toEqual(before);
      expect(result.value.changed).toBe(false);
    } else expect(state.phase).toBe(expected);
    // Only a step into `executing` sends; nothing else does.
    const sends = effects.some((e) => e.kind === "send_attempt");
    expect(sends).toBe(expected === "executing");
  });
});

describe("the held arm, in detail", () => {
  it("a hold at a lock grant gives the lock straight back and rechecks by itself; a retry keeps its lease", () => {
    const granted = transition(PHASES.awaiting_lock!, EVENTS.hold!, locked, T);
    expect(granted.ok && granted.value).toMatchObject({
      state: {
        phase: "held",
        hold: F,
        resume: { phase: "unsent" },
        recheckAtMs: T + HELD_RECHECK_MS,
      },
      effects: [{ kind: "release_lock" }, { kind: "set_alarm", atMs: T + HELD_RECHECK_MS }],
      trace: [{ type: "held", freeze_id: "fz_1", reason: "refund spike" }],
    });
    const retrying = transition(retry, EVENTS.hold!, locked, T);
    expect(retrying.ok && retrying.value.effects).toEqual([
      { kind: "set_alarm", atMs: T + HELD_RECHECK_MS },
    ]);
  });

  it("a pause waits for a person (no alarm); resume keeps a retry's due time, or moves it to now", () => {
    const paused = transition(retry, EVENTS.pause!, keyed, T);
    expect(paused.ok && paused.value).toMatchObject({
      state: { phase: "held", hold: P, resume: retry, recheckAtMs: null },
      effects: [{ kind: "clear_alarm" }],
      trace: [{ type: "paused", by: "ops" }],
    });
    const resumed = transition(held(P, retry), EVENTS["release(pause)"]!, keyed, T);
    expect(resumed.ok && resumed.value).toMatchObject({
      state: { ...retry, dueAtMs: retry.dueAtMs },
      effects: [{ kind: "set_alarm", atMs: retry.dueAtMs }],
      trace: [{ type: "resumed", by: "ops" }],
    });
    const late = transition(held(P, retry), EVENTS["release(pause)"]!, keyed, retry.dueAtMs + 1);
    expect(late.ok && late.value.state).toMatchObject({ dueAtMs: retry.dueAtMs + 1 });
  });

  it("a freeze's release of an unsent call on a locked tool asks for the lock again", () => {
    const released = transition(
      held(F, { phase: "unsent" }),
      EVENTS["release(freeze)"]!,
      locked,
      T,
    );
    expect(released.ok && released.value).toMatchObject({
      state: { phase: "awaiting_lock", blockedBy: null },
      effects: [{ kind: "set_alarm" }, { kind: "acquire_lock" }],
      trace: [{ type: "hold_released", freeze_id: "fz_1" }, { type: "awaiting_lock" }],
    });
  });

  it("retry-now sends the next attempt under the same key; refused while a freeze holds it", () => {
    const now = transition(retry, EVENTS.retry_now!, keyed, T);
    expect(now.ok && now.value).toMatchObject({
      state: { phase: "executing", attempt: 2 },
      effects: expect.arrayContaining([{ kind: "send_attempt", attempt: 2 }]),
      trace: expect.arrayContaining([{ type: "retry_now", at_ms: T, by: "ops", attempt: 2 }]),
    });
    expect(transition(held(F, retry), EVENTS.retry_now!, keyed, T)).toMatchObject({
      ok: false,
      error: { code: "not_waiting", detail: expect.stringContaining("freeze") },
    });
  });

  it("the alarm of a held call: a freeze rechecks later, a pause stays as it is", () => {
    const alarm = { type: "alarm", inFlight: false } as const;
    const frozen = transition(held(F, retry), alarm, keyed, T);
    expect(frozen.ok && frozen.value).toMatchObject({
      state: { phase: "held", recheckAtMs: T + HELD_RECHECK_MS },
      effects: [{ kind: "set_alarm", atMs: T + HELD_RECHECK_MS }],
    });
    const paused = transition(held(P, retry), alarm, keyed, T);
    expect(paused.ok && paused.value.changed).toBe(false);
  });
});

describe("a stop of a held call is decided as where it waits; its trace says held", () => {
  it.each([
    ["held by a freeze, unsent", held(F, { phase: "unsent" })],
    ["held by a freeze, retrying", held(F, retry)],
    ["paused, retrying", held(P, retry)],
  ])("cancel, %s → cancelled, nothing sent, cancel_requested names phase held", (_name, state) => {
    const cancelled = transition(state, { type: "cancel", by: "ops" }, keyed, T);
    expect(cancelled.ok && cancelled.value.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "cancelled" },
    });
    expect(cancelled.ok && cancelled.value.trace).toContainEqual(
      expect.objectContaining({ type: "cancel_requested", phase: "held", by: "ops" }),
    );
    expect(cancelled.ok && cancelled.value.effects.some((e) => e.kind === "send_attempt")).toBe(
      false,
    );
  });
});
