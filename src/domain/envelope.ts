// The result envelope the model reads (before a provider adapter wraps it): status, operation id,
// and either the result or code + message + allowed next actions. Messages tell the model what to
// do, because the model will act on them: refusals say "do not retry; tell the user".
import type { OperationState } from "./operation.ts";

export type ModelStatus =
  | "succeeded"
  | "rejected"
  | "failed"
  | "budget_exhausted"
  | "cancelled"
  | "outcome_unknown"
  | "awaiting_approval"
  | "pending";

export type Envelope =
  | { status: "succeeded"; operation_id: string; result: unknown }
  | { status: Exclude<ModelStatus, "succeeded">; operation_id: string; code: string; message: string; allowed_next_actions: string[] };

const NEXT_ACTIONS: Record<Exclude<ModelStatus, "succeeded">, string[]> = {
  rejected: ["fix_arguments", "tell_user"],
  failed: ["tell_user"],
  budget_exhausted: ["tell_user"],
  cancelled: ["tell_user"],
  outcome_unknown: ["wait", "tell_user"],
  awaiting_approval: ["wait", "tell_user"],
  pending: ["wait"],
};

export function refusal(status: Exclude<ModelStatus, "succeeded">, operationId: string, code: string, message: string): Envelope {
  const actions = status === "rejected" && code !== "invalid_arguments" ? ["tell_user"] : NEXT_ACTIONS[status];
  return { status, operation_id: operationId, code, message, allowed_next_actions: actions };
}

export function envelopeFor(operationId: string, state: OperationState): Envelope {
  switch (state.phase) {
    case "recorded":
      return state.outcome.status === "succeeded"
        ? { status: "succeeded", operation_id: operationId, result: state.outcome.result }
        : refusal(state.outcome.status, operationId, state.outcome.code, state.outcome.message);
    case "executing":
      return refusal("pending", operationId, "executing", `toolgate is running this call (attempt ${state.attempt}). Wait for its result; do not call it again.`);
    case "retry_scheduled":
      return refusal("pending", operationId, "retry_scheduled", `The tool failed transiently (${state.reason}); toolgate will retry it by itself. Wait; do not call it again.`);
    case "reconciling":
      return refusal("outcome_unknown", operationId, state.code, "It is not yet known whether this took effect; toolgate is checking with the tool. Do not retry; wait or tell the user it is being checked.");
    case "outcome_unknown":
      return refusal(
        "outcome_unknown",
        operationId,
        state.code,
        state.reconcile === "human"
          ? "It is not known whether this took effect, and the tool cannot tell. A person will confirm it. Do not retry; tell the user it is being checked."
          : "It is not yet known whether this took effect; toolgate is reconciling it safely. Do not retry; wait or tell the user it is being checked.",
      );
  }
}

/**
 * Run-level texts: what the model reads when the run (not the tool) decides a call's fate. Each
 * says whether the call took effect only where toolgate knows it, and what to do next.
 */
export const RUN_TEXT = {
  unknownTool: (name: string) => `There is no tool named "${name}". Do not retry it; use one of the offered tools or tell the user.`,
  runCancelled: "The run was cancelled; this call was not executed. Do not retry; tell the user.",
  cancelledBeforeRetry: "The run was cancelled before this call took effect. Do not retry; tell the user.",
  deadlineBeforeRetry: "This conversation ran out of time before the call could be retried. It did not take effect. Do not retry; tell the user.",
  withdrawnBeforeRetry: (tool: string) => `The tool ${tool} was withdrawn from this conversation before it could run. Do not retry; tell the user.`,
  /** A closed call never claims "it did not take effect": a sent attempt may still commit. */
  closedWhileRunning: (operationId: string) =>
    `Cancelled while it was already running or starting, so it may still complete; toolgate records the outcome on operation ${operationId}. Do not retry; tell the user.`,
  toolUnavailable: "toolgate could not run this tool. Do not retry; tell the user.",
  toolBusy: "toolgate could not read this call's state just now; it may be running. Wait for its result; do not call it again.",
} as const;
