// From a tool's limits across runs to what one call claims of each (frozen at the gate, pure): the
// subject (a bound context field's value, the run's user, or the tenant, named with its kind: see
// subjectKey) and the amount (a numeric argument's value for `sum`, 1 for `count`). Fails closed
// like the per-call limits: a subject the run does not define (`contextSubject`), or a summed field
// that is absent or not a non-negative number, denies. Also the words the model reads when a window
// is full.
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
  /** `payment` (issue 37): the atomic amount an accepted x402 requirement asks, claimed at its 402. */
  measure: { kind: "sum"; field: string } | { kind: "count" } | { kind: "payment" };
  max: number;
  over: LimitOver;
};
export type ClaimRefusal = { code: "policy_denied"; message: string };

export function claimsFor(
  limits: readonly AcrossRunsLimit[],
  input: Record<string, unknown>,
  context: Record<string, unknown>,
  userId: string,
  /** Given: the claims of an accepted x402 payment of this amount only; absent: every other claim. */
  payment: number | null = null,
  /** The run, for a payment limit counted per run (subject "run": the run's spend budget). */
  runId: string | null = null,
): Result<LimitClaim[], ClaimRefusal> {
  const claims: LimitClaim[] = [];
  for (const limit of limits) {
    if ((limit.measure.kind === "payment") !== (payment !== null)) continue;
    let value: string;
    if (limit.subject === "user") value = userId;
    else if (limit.subject === "tenant") value = "";
    else if (limit.subject === "run") {
      if (runId === null) return deny(`${limit.name} is counted per run, and the run is not known`);
      value = runId;
    } else {
      const field = contextSubject(context[limit.subject.slice("context.".length)]);
      if (field === null)
        return deny(
          `${limit.name} is counted per ${limit.subject}, which this run does not define; tell the user the tool is not set up for them.`,
        );
      value = field;
    }
    const subject = subjectKey(limit.subject, value);
    let amount = payment ?? 1;
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

/**
 * The bucket a subject names, its kind first (audit N7): `user:<id>`, `context.<field>:<value>`,
 * `tenant`. A user and a customer with the same id, or a user whose id is "tenant", never share a
 * bucket. (LimitObjects made before this are keyed by the bare value: see legacySubject.)
 */
export const subjectKey = (kind: string, value: string): string =>
  kind === "tenant" ? "tenant" : `${kind}:${value}`;

/** A subject key as `GET /v1/limits/{name}/{subject}` accepts it (a bare value is not one). */
export const SUBJECT_KEY = /^(tenant|user:.+|run:.+|context\.[a-zA-Z0-9_]+:.+)$/s;

/**
 * The key the same subject had before subjects were namespaced (the bare value; the tenant's key
 * did not change): the LimitObject a new one adopts live reservations from. Null: nothing to adopt.
 */
export function legacySubject(key: string): string | null {
  // A run's key (issue 37) was never bare: nothing to adopt.
  if (key === "tenant" || key.startsWith("run:") || !SUBJECT_KEY.test(key)) return null;
  return key.slice(key.indexOf(":") + 1);
}

/** A subject key in words for the model and the approver ("customer_id cus_1", "user u1", "the tenant"). */
export function describeSubject(key: string): string {
  if (key === "tenant") return "the tenant";
  if (!SUBJECT_KEY.test(key)) return key;
  const colon = key.indexOf(":");
  const kind = key.slice(0, colon);
  return `${kind.startsWith("context.") ? kind.slice("context.".length) : kind} ${key.slice(colon + 1)}`;
}

const deny = (why: string): Result<never, ClaimRefusal> =>
  err({ code: "policy_denied", message: `Policy does not allow this: ${why}` });

/**
 * What the model is told when a window is full: what remains, and when enough of it frees
 * (`frees`: an ISO time the shell formats — at the earliest, another call may take it first —,
 * "never": this amount never fits, "waiting": only once calls still waiting are done).
 */
export function overLimitMessage(
  claim: LimitClaim,
  usage: Usage,
  frees: string | "never" | "waiting",
): string {
  const window = describeWindow(claim.windowMs);
  const head = `Policy does not allow this now: ${claim.name} allows ${claim.max} per ${window} for ${describeSubject(claim.subject)}, ${usage.used} is already used or reserved and ${usage.remaining} remains; this call needs ${claim.amount}.`;
  if (frees === "never")
    return `${head} It can never fit in the window. Do not retry; tell the user it needs a person's decision.`;
  if (frees === "waiting")
    return `${head} ${usage.waiting} of the calls counted have not finished yet (waiting for approval, a lock or a retry, or their outcome is unknown); each counts until it finishes and for ${window} after, so when enough frees cannot be said yet. Do not retry now; tell the user.`;
  return `${head} Enough of the window frees at ${frees} at the earliest. Do not retry before then; tell the user.`;
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
