// From a tool's limits across runs to what one call claims of each (frozen at the gate, pure): the
// subject's value (a bound context field, the run's user, or the tenant) and the amount (a numeric
// argument's value for `sum`, 1 for `count`). Fails closed like the per-call limits: a subject the
// run does not define (`contextSubject`), or a summed field that is absent or not a non-negative
// number, denies.
// Also the words the model reads when a window is full.
import { err, ok, type Result } from "../result.ts";
import type { LimitClaim, LimitOver, Usage } from "./window.ts";

/** A limit across runs as a ToolSpec holds it (manifest `limits_across_runs`, defineTool `limitsAcrossRuns`). */
export type AcrossRunsLimit = {
  name: string;
  /** "user", "tenant" or "context.<field>". */
  subject: string;
  /** As written ("24h"), for messages; `windowMs` is what counts. */
  window: string;
  windowMs: number;
  measure: { kind: "sum"; field: string } | { kind: "count" };
  max: number;
  over: LimitOver;
};
export type ClaimRefusal = { code: "policy_denied"; message: string };

export function claimsFor(
  limits: readonly AcrossRunsLimit[],
  input: Record<string, unknown>,
  context: Record<string, unknown>,
  userId: string,
): Result<LimitClaim[], ClaimRefusal> {
  const claims: LimitClaim[] = [];
  for (const limit of limits) {
    let subject: string;
    if (limit.subject === "user") subject = userId;
    else if (limit.subject === "tenant") subject = "tenant";
    else {
      const value = contextSubject(context[limit.subject.slice("context.".length)]);
      if (value === null)
        return deny(
          `${limit.name} is counted per ${limit.subject}, which this run does not define; tell the user the tool is not set up for them.`,
        );
      subject = value;
    }
    let amount = 1;
    if (limit.measure.kind === "sum") {
      const value = input[limit.measure.field];
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0)
        return deny(
          `${limit.measure.field} counts toward ${limit.name} and must be given as a number of 0 or more. Give it explicitly if the user stated it; otherwise tell the user.`,
        );
      amount = value;
    }
    claims.push({
      name: limit.name,
      subject,
      amount,
      max: limit.max,
      windowMs: limit.windowMs,
      over: limit.over,
    });
  }
  return ok(claims);
}

/**
 * A context value as a subject: a non-empty string or a finite number. Anything else (absent, "",
 * an object) is no subject: counting it would make one bucket every such run shares.
 */
export function contextSubject(value: unknown): string | null {
  if (typeof value === "string") return value === "" ? null : value;
  return typeof value === "number" && Number.isFinite(value) ? String(value) : null;
}

const deny = (why: string): Result<never, ClaimRefusal> =>
  err({ code: "policy_denied", message: `Policy does not allow this: ${why}` });

/**
 * What the model is told when a window is full: what remains, and when enough of it frees
 * (`freesAt`: an ISO time the shell formats; null: this amount never fits).
 */
export function overLimitMessage(claim: LimitClaim, usage: Usage, freesAt: string | null): string {
  const window = describeWindow(claim.windowMs);
  const head = `Policy does not allow this now: ${claim.name} allows ${claim.max} per ${window} for ${claim.subject}, ${usage.used} is already used or reserved and ${usage.remaining} remains; this call needs ${claim.amount}.`;
  return freesAt === null
    ? `${head} It can never fit in the window. Do not retry; tell the user it needs a person's decision.`
    : `${head} Enough of the window frees at ${freesAt}. Do not retry before then; tell the user.`;
}

/** A window in words for the model ("24h" → "24 hours"). */
export function describeWindow(windowMs: number): string {
  for (const [unit, ms] of [
    ["day", 86_400_000],
    ["hour", 3_600_000],
    ["minute", 60_000],
    ["second", 1_000],
  ] as const)
    if (windowMs % ms === 0) {
      const n = windowMs / ms;
      return `${n} ${unit}${n === 1 ? "" : "s"}`;
    }
  return `${windowMs} ms`;
}
