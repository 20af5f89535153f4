// Policy decisions enforced in code, outside the prompt: required scopes and declarative limits
// (numbers may reference the run's context, e.g. "context.refund_limit"). Limits fail closed: a
// limit whose reference is missing from the context denies, and so does a limited field the call
// leaves out (as approval rules ask). Pure functions over plain data.
import type { Limit } from "../../tools/spec.ts";
import { err, ok, type Result } from "../result.ts";

export type PolicyRefusal = { code: "forbidden" | "policy_denied"; message: string };

export function checkScopes(
  tool: string,
  required: readonly string[],
  held: readonly string[],
): Result<true, PolicyRefusal> {
  const missing = required.filter((scope) => !held.includes(scope));
  if (missing.length === 0) return ok(true);
  return err({
    code: "forbidden",
    message: `The user is not allowed to use ${tool} (missing ${missing.join(", ")}). Do not retry; tell the user they lack permission.`,
  });
}

export function checkLimits(
  limits: Record<string, Limit>,
  input: Record<string, unknown>,
  context: Record<string, unknown>,
): Result<true, PolicyRefusal> {
  for (const [field, limit] of Object.entries(limits)) {
    const value = input[field];
    // Absent (or a strict-mode null, which the gate reads as absent) is not "within the limit": an
    // upstream may read "no amount" as "everything", so a limit that cannot be checked denies.
    if (value === undefined)
      return err({
        code: "policy_denied",
        message: `Policy does not allow this: ${field} has a limit and was not given, so it cannot be checked. Give ${field} explicitly if the user stated it; otherwise do not retry; tell the user.`,
      });
    if (limit.enum && !limit.enum.some((allowed) => allowed === value))
      return deny(field, `must be one of ${limit.enum.map((v) => JSON.stringify(v)).join(", ")}`);
    for (const [bound, compare] of [
      ["max", (a: number, b: number) => a <= b],
      ["min", (a: number, b: number) => a >= b],
    ] as const) {
      const raw = limit[bound];
      if (raw === undefined) continue;
      const threshold = thresholdOf(raw, context);
      if (threshold === null)
        return deny(field, `has a ${bound} limit (${String(raw)}) this run does not define`);
      if (typeof value !== "number" || !compare(value, threshold))
        return deny(
          field,
          `is over the allowed ${bound === "max" ? "maximum" : "minimum"} of ${threshold}`,
        );
    }
  }
  return ok(true);
}

/** A limit's max or min: a number, or the run's `context.<field>` when that holds a number. */
export function thresholdOf(raw: number | string, context: Record<string, unknown>): number | null {
  const threshold = typeof raw === "number" ? raw : context[raw.replace(/^context\./, "")];
  return typeof threshold === "number" ? threshold : null;
}

const deny = (field: string, why: string): Result<true, PolicyRefusal> =>
  err({
    code: "policy_denied",
    message: `Policy does not allow this: ${field} ${why}. Do not retry; tell the user it needs a person's decision.`,
  });
