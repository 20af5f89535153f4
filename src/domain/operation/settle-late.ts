// Late settlement (issue 24, retry-late.ts) as step constructors shared by the arms: a keyed write
// whose outcome stayed unknown keeps resending with the same key on the late schedule until the
// key's window ends, then waits for a person. Built on steps.ts (stayUnknown and its fields); arms
// import it as they import steps.ts. Pure: the clock reading is an argument.
import { settleEndedEvent, settleScheduledEvent, unknownEvent } from "../journal/trace-event.ts";
import { planLateTry } from "../retry-late.ts";
import type {
  Ambiguity,
  OperationPlan,
  OperationState,
  Outcome,
  Step,
  TraceEvent,
} from "./state.ts";
import { stayUnknown, unknownFields } from "./steps.ts";

/**
 * The attempts (or the retry budget's deferrals) ran out while the outcome is unknown. A keyed
 * write without a status lookup keeps settling by itself (retry-late.ts): a resend with the same
 * key on the late schedule, until the key's window ends; a tool with a lookup asks it (its late
 * lookups are afterLookup's). Otherwise, or once no try fits in the window, as stayUnknown.
 */
export function settleLate(
  from: { attempt: number; firstAttemptAtMs: number; settleSlotMs?: number },
  ambiguity: Ambiguity,
  ifNotApplied: Outcome,
  reason: string,
  plan: OperationPlan,
  nowMs: number,
  trace: TraceEvent[],
): Step {
  const unknown = () => stayUnknown(from, ambiguity, ifNotApplied, reason, plan, nowMs, trace);
  if (!plan.lateSettle || plan.safety !== "keyed" || plan.hasLookup) return unknown();
  const late = planLateTry({
    settle: plan.lateSettle,
    firstAttemptAtMs: from.firstAttemptAtMs,
    timeoutMs: plan.timeoutMs,
    // The next slot comes after the one this try ran for, even when its alarm ran early.
    nowMs: Math.max(nowMs, from.settleSlotMs ?? nowMs),
  });
  if (late.kind === "window_ended")
    return stayUnknown(from, ambiguity, ifNotApplied, reason, plan, nowMs, [
      ...trace,
      settleEndedEvent(late.untilMs, nowMs),
    ]);
  return {
    state: {
      ...unknownFields(from, ambiguity, reason),
      ifNotApplied,
      reconcile: "resend",
      dueAtMs: late.atMs,
      settleUntilMs: late.untilMs,
    },
    effects: [{ kind: "set_alarm", atMs: late.atMs }],
    trace: [
      ...trace,
      unknownEvent(from.attempt, ambiguity.code, "resend", nowMs),
      settleScheduledEvent(late.atMs, late.untilMs, nowMs),
    ],
    changed: true,
  };
}

/** A late try is scheduled (retry-late.ts): the next at `atMs`, none after `untilMs`. */

/** The late settlement's window ended (or an alarm came after it): wait for a person, send nothing. */
export function settleWindowEnded(
  state: Extract<OperationState, { phase: "outcome_unknown" }>,
  untilMs: number,
  nowMs: number,
): Step {
  const { settleUntilMs: _ended, ...rest } = state;
  return {
    state: { ...rest, reconcile: "human", dueAtMs: null },
    effects: [{ kind: "clear_alarm" }],
    trace: [
      settleEndedEvent(untilMs, nowMs),
      unknownEvent(state.attempt, state.code, "human", nowMs),
    ],
    changed: true,
  };
}

/** Carries a late settlement's window (and the slot it runs for) into the attempt it starts. */
export function withSettleUntil(
  step: Step,
  from: Extract<OperationState, { phase: "outcome_unknown" }>,
  nowMs: number,
): Step {
  const state = step.state;
  if (from.settleUntilMs === undefined || state.phase !== "executing") return step;
  const slot = { settleUntilMs: from.settleUntilMs, settleSlotMs: from.dueAtMs ?? nowMs };
  return { ...step, state: { ...state, ...slot } };
}
