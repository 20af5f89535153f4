// The operation state machine as a table: given state S and event E at time T → state S',
// effects [...]. Pure: no clock, no I/O, nothing to mock.
import { describe, expect, it } from "vitest";
import { envelopeFor } from "../../src/domain/envelope.ts";
import {
  isSettled,
  LOCK_RECHECK_MAX_MS,
  nextDueAtMs,
  nextLockRecheckAtMs,
  stateAlarmAtMs,
  transition,
  WATCHDOG_GRACE_MS,
  type Effect,
  type OperationEvent,
  type OperationPlan,
  type OperationState,
  type TraceEvent,
} from "../../src/domain/operation.ts";
import type { RepeatSafety } from "../../src/domain/classify.ts";
import type { LookupObservation, Observation } from "../../src/domain/observation.ts";
import { nextDelayMs } from "../../src/domain/retry.ts";

const plan = (
  safety: RepeatSafety,
  maxAttempts = 4,
  hasLookup = safety === "lookup",
): OperationPlan => ({
  operationId: "op_test",
  idempotencyKey: "tg_test",
  safety,
  retry: {
    maxAttempts,
    minDelayMs: 0,
    initialDelayMs: 1_000,
    maxDelayMs: 60_000,
    maxElapsedMs: 3_600_000,
  },
  timeoutMs: 2_000,
  approval: null,
  resource: null,
  hasLookup,
  settleMs: 5_000,
});
const executing = (attempt = 1, cancelRequested = false): OperationState => ({
  phase: "executing",
  attempt,
  keyIssuedAtMs: 0,
  startedAtMs: 0,
  firstAttemptAtMs: 0,
  cancelRequested,
  mayHaveApplied: null,
});
const T = 10_000;
const step = (
  state: OperationState | null,
  event: Parameters<typeof transition>[1],
  p = plan("keyed"),
) => {
  const result = transition(state, event, p, T);
  if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
  return result.value;
};

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

  it("lookup found → succeeded via reconcile; not found → retry; inconclusive → later, then a person", () => {
    const reconciling: OperationState = {
      phase: "reconciling",
      attempt: 1,
      firstAttemptAtMs: 0,
      code: "timeout_unknown",
      ambiguousAtMs: 0,
      lookups: 1,
      startedAtMs: 0,
      ifNotApplied: null,
    };
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

describe("settled, due time and envelopes", () => {
  it("isSettled and nextDueAtMs", () => {
    expect(isSettled(executing())).toBe(false);
    expect(
      nextDueAtMs({
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: 42,
        firstAttemptAtMs: 0,
        reason: "",
        mayHaveApplied: null,
      }),
    ).toBe(42);
    expect(
      isSettled({
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
      }),
    ).toBe(true);
  });

  it.each([
    [executing(), "pending", "executing", ["wait"]],
    [
      {
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: 1,
        firstAttemptAtMs: 0,
        reason: "HTTP 503",
        mayHaveApplied: null,
      },
      "pending",
      "retry_scheduled",
      ["wait"],
    ],
    [
      {
        phase: "reconciling",
        attempt: 1,
        firstAttemptAtMs: 0,
        code: "timeout_unknown",
        ambiguousAtMs: 0,
        lookups: 1,
        startedAtMs: 0,
        ifNotApplied: null,
      },
      "outcome_unknown",
      "timeout_unknown",
      ["wait", "check_status", "tell_user"],
    ],
    [
      {
        phase: "recorded",
        attempts: 1,
        recordedAtMs: 0,
        via: "attempt",
        late: false,
        outcome: { status: "failed", code: "permanent_failure", message: "m" },
      },
      "failed",
      "permanent_failure",
      ["tell_user"],
    ],
  ] as Array<[OperationState, string, string, string[]]>)(
    "envelope for %o",
    (state, status, code, actions) => {
      expect(envelopeFor("op_1", state, "keyed")).toMatchObject({
        status,
        code,
        operation_id: "op_1",
        allowed_next_actions: actions,
      });
    },
  );

  it("a success carries the result and no code", () => {
    const envelope = envelopeFor(
      "op_1",
      {
        phase: "recorded",
        attempts: 1,
        recordedAtMs: 0,
        via: "attempt",
        late: false,
        outcome: { status: "succeeded", result: { id: 1 } },
      },
      "keyed",
    );
    expect(envelope).toEqual({ status: "succeeded", operation_id: "op_1", result: { id: 1 } });
  });
});

// ── The soak's failure list (issue 7), as given/when/then ────────────────────────────────────────

type Item =
  | { got: Observation; atMs?: number }
  | { lookupGot: LookupObservation; atMs?: number }
  | "due"
  | OperationEvent;

/** Plays a script from `start` at t=0: results go to the attempt or lookup in flight; `"due"` fires the alarm when it is due. */
function play(p: OperationPlan, script: Item[]) {
  let nowMs = -100; // every step without its own time lands 100 ms after the last: start at t=0
  let state: OperationState | null = null;
  const effects: Effect[] = [];
  const trace: TraceEvent[] = [];
  const items: Item[] = [{ type: "start", inputHash: "h", callId: "c1", tool: "t" }, ...script];
  for (const item of items) {
    let event: OperationEvent;
    if (item === "due") {
      nowMs = Math.max(nowMs, (state && nextDueAtMs(state)) ?? nowMs);
      event = { type: "alarm", inFlight: false };
    } else if ("got" in item || "lookupGot" in item) {
      nowMs = item.atMs ?? nowMs + 100;
      const current = state!;
      event =
        "got" in item
          ? {
              type: "attempt_finished",
              attempt: current.phase === "executing" ? current.attempt : -1,
              observation: item.got,
            }
          : {
              type: "lookup_finished",
              lookups: current.phase === "reconciling" ? current.lookups : -1,
              observation: item.lookupGot,
            };
    } else {
      nowMs += 100;
      event = item;
    }
    const result = transition(state, event, p, nowMs);
    if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
    state = result.value.state;
    effects.push(...result.value.effects);
    trace.push(...result.value.trace);
  }
  return { state: state!, effects, trace, nowMs };
}

const timeout: Observation = { kind: "timeout", detail: "no response within 2000 ms" };
const lost: Observation = { kind: "connection_lost", detail: "Network connection lost." };
const status = (code: number): Observation => ({
  kind: "http_error",
  status: code,
  retryAfterMs: null,
  detail: "",
});
const NOT_APPLIED =
  /did not take effect|before it took effect|did not happen|nothing was sent|did not succeed/i;
const says = (state: OperationState, safety: RepeatSafety) =>
  JSON.stringify(envelopeFor("op_test", state, safety));

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
      mayHaveApplied: { code: "connection_lost" },
    });
    expect(envelopeFor("op_test", run.state, "keyed")).toMatchObject({
      status: "outcome_unknown",
      code: "connection_lost",
    });
  });

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
      { kind: "needs_person", open: false },
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
      policyVersion: "v",
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
