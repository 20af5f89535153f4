// The gate: decides, before any operation exists, whether a proposed call may become one.
// Offered tools only; the user must hold the tool's scopes; bound arguments come from the run's
// context and never from the model; arguments must be exactly what the exported schema describes
// (one schema: a strict-mode null for an optional field reads as absent, an undeclared field is
// refused by name) and satisfy the declarative limits and the tool's URL rules.
// Pure: plain data in, admitted input or a refusal out. `mayExecute` asks the same checks again
// before each retry, plus the run-level stops (cancelled, deadline).
import type { ToolSpec } from "../../tools/spec.ts";
import { normalizeArguments } from "../json-schema.ts";
import { pastDeadline } from "./budget.ts";
import { RUN_TEXT } from "../envelope.ts";
import { checkLimits, checkScopes } from "./policy.ts";
import { err, ok, type Result } from "../result.ts";
import type { Denial, RunState } from "./turn.ts";

export type ProposedCall = { id: string; name: string; arguments: unknown };
export type GateRefusal = {
  code:
    "tool_not_allowed" | "invalid_arguments" | "forbidden" | "policy_denied" | "shadow_unsupported";
  message: string;
};

export function admitCall(
  call: ProposedCall,
  offered: ReadonlyMap<string, ToolSpec>,
  context: Record<string, unknown>,
  userScopes: readonly string[],
): Result<{ spec: ToolSpec; input: Record<string, unknown> }, GateRefusal> {
  const spec = offered.get(call.name);
  if (!spec) {
    return err({
      code: "tool_not_allowed",
      message: `The tool "${call.name}" is not available in this conversation. Do not retry it; use one of the offered tools or tell the user.`,
    });
  }
  const scopes = checkScopes(spec.name, spec.requiresScopes, userScopes);
  if (!scopes.ok) return scopes;
  let args = call.arguments;
  if (typeof args === "string") {
    try {
      args = args.trim() === "" ? {} : JSON.parse(args);
    } catch {
      return err({
        code: "invalid_arguments",
        message: "The arguments are not valid JSON. Send a JSON object matching the tool's schema.",
      });
    }
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return err({
      code: "invalid_arguments",
      message: "The arguments must be a JSON object matching the tool's schema.",
    });
  }
  // Bound fields are identity, not model input: the export never shows them, so a model that sends
  // one is told so instead of having it silently replaced.
  const sentBound = Object.keys(spec.bind).find((field) => Object.hasOwn(args as object, field));
  if (sentBound)
    return err({
      code: "invalid_arguments",
      message: `${sentBound} is filled in by toolgate for this conversation; call again without it.`,
    });
  const normalized = normalizeArguments(spec.inputJsonSchema, args, spec.strictExport);
  if (!normalized.ok)
    return err({
      code: "invalid_arguments",
      message: `The arguments do not match the tool's schema (${normalized.error.message}). Fix them and call again, or ask the user.`,
    });
  const input: Record<string, unknown> = { ...(normalized.value as Record<string, unknown>) };
  for (const [field, path] of Object.entries(spec.bind)) {
    const value = context[path.slice("context.".length)];
    if (value === undefined)
      return err({
        code: "invalid_arguments",
        message: `This run has no ${path} to bind to ${field}; tell the user the tool is not set up for them.`,
      });
    input[field] = value;
  }
  const parsed = spec.input.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`)
      .join("; ");
    return err({
      code: "invalid_arguments",
      message: `The arguments do not match the tool's schema (${problems}). Fix them and call again, or ask the user.`,
    });
  }
  const admitted = parsed.data as Record<string, unknown>;
  const unusable = spec.checkArguments(admitted);
  if (unusable)
    return err({
      code: "invalid_arguments",
      message: `The arguments cannot be used (${unusable}). Fix them and call again, or ask the user.`,
    });
  const limits = checkLimits(spec.limits, admitted, context);
  if (!limits.ok) return limits;
  return ok({ spec, input: admitted });
}

/**
 * Asked by an operation before each retry or resend. The same checks as the gate (`admitCall`):
 * the tool must still be offered and the user must hold its scopes (`checkScopes`, one function
 * for both); plus the run-level stops (cancelled, deadline).
 */
export function mayExecute(
  run: RunState | null,
  offered: ReadonlyMap<string, ToolSpec>,
  tool: string,
  nowMs: number,
): Result<true, Denial> {
  if (!run || run.cancelledAtMs !== null)
    return err({ status: "cancelled", code: "cancelled", message: RUN_TEXT.cancelledBeforeRetry });
  if (pastDeadline(run.budgets, run.createdAtMs, nowMs))
    return err({
      status: "budget_exhausted",
      code: "deadline",
      message: RUN_TEXT.deadlineBeforeRetry,
    });
  const spec = offered.get(tool);
  if (!spec)
    return err({
      status: "rejected",
      code: "tool_not_allowed",
      message: RUN_TEXT.withdrawnBeforeRetry(tool),
    });
  const scopes = checkScopes(spec.name, spec.requiresScopes, run.user.scopes);
  return scopes.ok
    ? ok(true)
    : err({ status: "rejected", code: scopes.error.code, message: scopes.error.message });
}
