// The held arm (issue 34): an operator's freeze or a person's pause stops an operation at its next
// send point, durably, without spending an attempt; `resume` is where it continues. What is held:
// a first send (`unsent`: no lease is kept, a lock granted meanwhile goes straight back so nobody
// queues behind a frozen write; a wait for a quota slot leaves the quota's queue and gives back its
// slot or place, asked anew after the hold), a scheduled retry or a keyed resend of an unknown outcome (these
// keep their lease: an outcome not settled keeps its resource locked). Lookups are reads of the
// upstream's status and never held. `sendDue` is also the alarm's send (transition.ts onAlarm).
import { fitsWindow } from "../retry-late.ts";
import { settleWindowEnded, withSettleUntil } from "./settle-late.ts";
import {
  ambiguityOf,
  beginExecution,
  holdStep,
  startAttempt,
  startLookup,
  unchanged,
} from "./steps.ts";
import { asScheduledRetry } from "./credential.ts";
import type {
  OperationEvent,
  OperationPlan,
  OperationState,
  OutcomeUnknown,
  Resumable,
  RetryScheduled,
  Step,
  TraceEvent,
} from "./state.ts";

/** What can be held at a send point: a lock grant or a quota slot (given back), a retry, a keyed resend. */
function resumableOf(state: OperationState): Resumable | null {
  if (state.phase === "awaiting_lock" || state.phase === "awaiting_quota")
    return { phase: "unsent" };
  if (state.phase === "retry_scheduled") return state;
  if (state.phase === "outcome_unknown" && state.reconcile === "resend") return state;
  // Waiting for the user to connect (issue 36): held as the retry it gave back.
  if (state.phase === "awaiting_credential") return asScheduledRetry(state);
  return null;
}

/**
 * What a first send held before it was sent gives back: its place in the lock's queue (or the
 * lease), and, waiting for its quotas, their slot or place (the lease it may hold then too: the
 * lock comes before the quotas). After the hold it asks both anew (beginExecution).
 */
function giveBackOf(state: OperationState): Step["effects"] {
  if (state.phase === "awaiting_lock") return [{ kind: "release_lock" }];
  if (state.phase === "awaiting_quota")
    return [{ kind: "release_lock" }, { kind: "release_quota" }];
  return [];
}

/** A freeze in `hold` mode at a send point: nothing is sent. A pause is never replaced by a freeze. */
export function onHold(
  state: OperationState,
  event: Extract<OperationEvent, { type: "hold" }>,
  nowMs: number,
): Step {
  if (state.phase === "held") {
    const same = state.hold.kind === "pause" || state.hold.freezeId === event.hold.freezeId;
    return same ? unchanged(state) : holdStep(event.hold, state.resume, nowMs, []);
  }
  const resume = resumableOf(state);
  if (!resume) return unchanged(state);
  return holdStep(event.hold, resume, nowMs, [], giveBackOf(state));
}

/** A person pauses an operation waiting on a retry, a lock, a quota slot or a late resend. */
export function onPause(state: OperationState, by: string, nowMs: number): Step | NotWaiting {
  if (state.phase === "held")
    return state.hold.kind === "pause"
      ? unchanged(state)
      : notWaiting(state, "it is held by a freeze: lift the freeze, or pause it after the lift");
  const resume = resumableOf(state);
  if (!resume)
    return notWaiting(
      state,
      "only a call waiting on a retry, a lock, a quota slot or a resend pauses",
    );
  return holdStep({ kind: "pause", by }, resume, nowMs, [], giveBackOf(state));
}

/**
 * The hold ends. A freeze's release comes after the shell asked the run, the freezes of the moment
 * and the retry budget: the send happens now. A person's resume puts the operation back where it
 * was (a retry keeps its due time, and its alarm asks everything again before sending).
 */
export function onRelease(
  state: OperationState,
  event: Extract<OperationEvent, { type: "release" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (state.phase !== "held" || state.hold.kind !== event.of) return unchanged(state);
  const said: TraceEvent =
    state.hold.kind === "freeze"
      ? { type: "hold_released", at_ms: nowMs, freeze_id: state.hold.freezeId }
      : { type: "resumed", at_ms: nowMs, by: event.by };
  const { resume } = state;
  if (resume.phase === "unsent") return beginExecution(plan, nowMs, [said]);
  if (event.of === "freeze") return sendDue(resume, plan, nowMs, [said]);
  const dueAtMs = Math.max(resume.dueAtMs ?? nowMs, nowMs);
  return {
    state: { ...resume, dueAtMs },
    effects: [{ kind: "set_alarm", atMs: dueAtMs }],
    trace: [said],
    changed: true,
  };
}

/** Retry-now: the next attempt at once under the same key (the shell asked the retry budget first). */
export function onRetryNow(
  state: OperationState,
  by: string,
  plan: OperationPlan,
  nowMs: number,
): Step | NotWaiting {
  const waiting =
    state.phase === "held" && state.hold.kind === "pause" && state.resume.phase !== "unsent"
      ? state.resume
      : state.phase === "retry_scheduled" ||
          (state.phase === "outcome_unknown" && state.reconcile === "resend")
        ? state
        : null;
  if (!waiting)
    return notWaiting(
      state,
      state.phase === "held" && state.hold.kind === "freeze"
        ? "it is held by a freeze: lift the freeze first"
        : "only a call waiting on a retry or a resend can be sent now",
    );
  const attempt = waiting.attempt + 1;
  return sendDue(waiting, plan, nowMs, [{ type: "retry_now", at_ms: nowMs, by, attempt }]);
}

/** A stop from outside (denial, cancel) on a held operation is decided as for where it waits. */
export function heldAs(state: Extract<OperationState, { phase: "held" }>): OperationState | null {
  return state.resume.phase === "unsent" ? null : state.resume;
}

/** The send a retry or a resend was waiting for, now (the alarm's, a release's, retry-now's). */
export function sendDue(
  state: RetryScheduled | OutcomeUnknown,
  plan: OperationPlan,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  if (state.phase === "retry_scheduled")
    return startAttempt(
      state.attempt + 1,
      state.firstAttemptAtMs,
      nowMs,
      plan,
      state.mayHaveApplied,
      trace,
    );
  // A late try never starts after the key's window (an alarm deferred or delivered late).
  if (
    state.reconcile !== "human" &&
    state.settleUntilMs !== undefined &&
    !fitsWindow(nowMs, plan.timeoutMs, state.settleUntilMs)
  ) {
    const ended = settleWindowEnded(state, state.settleUntilMs, nowMs);
    return { ...ended, trace: [...trace, ...ended.trace] };
  }
  if (state.reconcile === "resend")
    return withSettleUntil(
      startAttempt(
        state.attempt + 1,
        state.firstAttemptAtMs,
        nowMs,
        plan,
        ambiguityOf(state),
        trace,
      ),
      state,
      nowMs,
    );
  if (state.reconcile === "lookup") return startLookup(state, plan, nowMs, trace);
  return trace.length > 0 ? { ...unchanged(state), trace, changed: true } : unchanged(state);
}

export type NotWaiting = {
  code: "not_waiting";
  phase: OperationState["phase"];
  detail: string;
};
const notWaiting = (state: OperationState, detail: string): NotWaiting => ({
  code: "not_waiting",
  phase: state.phase,
  detail,
});

/** The person's controls that apply now (the console's buttons): each asks its own arm's rule. */
export type Controls = { pause: boolean; resume: boolean; retry_now: boolean };
export function controlsOf(state: OperationState, plan: OperationPlan, nowMs: number): Controls {
  const paused = onPause(state, "", nowMs);
  return {
    pause: !("code" in paused) && paused.changed,
    resume: state.phase === "held" && state.hold.kind === "pause",
    retry_now: !("code" in onRetryNow(state, "", plan, nowMs)),
  };
}
