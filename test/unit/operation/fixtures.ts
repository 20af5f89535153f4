// Builders shared by the operation machine's unit tables: a plan, an executing state, one step at
// a fixed time, and `play`, which runs a script of observations and events from `start`.
import { envelopeFor } from "../../../src/domain/envelope.ts";
import {
  nextDueAtMs,
  transition,
  type Effect,
  type OperationEvent,
  type OperationPlan,
  type OperationState,
  type TraceEvent,
} from "../../../src/domain/operation/index.ts";
import type { RepeatSafety } from "../../../src/domain/classify.ts";
import type { LookupObservation, Observation } from "../../../src/domain/observation.ts";

export const plan = (
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
export const executing = (attempt = 1, cancelRequested = false): OperationState => ({
  phase: "executing",
  attempt,
  keyIssuedAtMs: 0,
  startedAtMs: 0,
  firstAttemptAtMs: 0,
  cancelRequested,
  mayHaveApplied: null,
});
/** A status lookup in flight after a timed-out first attempt. */
export const reconciling: OperationState = {
  phase: "reconciling",
  attempt: 1,
  firstAttemptAtMs: 0,
  code: "timeout_unknown",
  ambiguousAtMs: 0,
  lookups: 1,
  startedAtMs: 0,
  ifNotApplied: null,
};
export const T = 10_000;
export const step = (
  state: OperationState | null,
  event: Parameters<typeof transition>[1],
  p = plan("keyed"),
) => {
  const result = transition(state, event, p, T);
  if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
  return result.value;
};

export type Item =
  | { got: Observation; atMs?: number }
  | { lookupGot: LookupObservation; atMs?: number }
  | "due"
  | OperationEvent;

/** Plays a script from `start` at t=0: results go to the attempt or lookup in flight; `"due"` fires the alarm when it is due. */
export function play(p: OperationPlan, script: Item[]) {
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

export const timeout: Observation = { kind: "timeout", detail: "no response within 2000 ms" };
export const lost: Observation = { kind: "connection_lost", detail: "Network connection lost." };
export const status = (code: number): Observation => ({
  kind: "http_error",
  status: code,
  retryAfterMs: null,
  detail: "",
});
export const NOT_APPLIED =
  /did not take effect|before it took effect|did not happen|nothing was sent|did not succeed/i;
export const says = (state: OperationState, safety: RepeatSafety) =>
  JSON.stringify(envelopeFor("op_test", state, safety));
