// Undo (issue 22, DESIGN "Shadow runs and undo"): a write tool's declared compensation as pure
// functions. Templates: a string that is exactly `{input.<path>}` or `{result.<path>}` becomes that
// JSON value of the original's frozen input or recorded result (type kept, dotted paths into
// objects); any other value is a literal. A compensation's identity derives from the original's
// operation id and a generation, so however often and however concurrently it is asked it is ONE
// operation; a next generation exists only once the current one is recorded as having applied
// nothing (`asksAnew`). Only an original recorded as applied may be compensated, and a
// compensation is not compensable.
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { idPrefix, jurisdictionOf } from "./jurisdiction.ts";
import type { OperationId } from "./identity.ts";
import { claimsFor } from "./limit/claims.ts";
import type { LimitClaim } from "./limit/window.ts";
import { tookEffect } from "./operation/index.ts";
import { admitCall } from "./turn/gate.ts";
import type { RunState } from "./turn/turn.ts";
import type { ToolSpec } from "../tools/spec.ts";
import { err, ok, type Result } from "./result.ts";

/** `approval`: "required" (default) — a person approves each compensation; "none": the tool's own rule. */
export type Compensation = {
  tool: string;
  arguments: Record<string, unknown>;
  approval: "required" | "none";
};
export type TemplateRef = { from: "input" | "result"; path: string[] };

const TEMPLATE = /^\{(input|result)\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\}$/;

/** The reference a value stands for, or null: a literal (any string with other text is a literal too). */
export function templateRef(value: unknown): TemplateRef | null {
  if (typeof value !== "string") return null;
  const match = TEMPLATE.exec(value);
  return match ? { from: match[1] as TemplateRef["from"], path: match[2]!.split(".") } : null;
}

/** Looks like a template but is not one (`{input.}`, `{results.id}`): refused at PUT, never a literal. */
export const looksLikeTemplate = (value: unknown): boolean =>
  typeof value === "string" && /^\{(input|result)s?\b/.test(value) && templateRef(value) === null;

export type RenderError = { code: "compensation_arguments_invalid"; detail: string };

/** The compensating call's arguments from the original's frozen input and recorded result. */
export function renderArguments(
  args: Record<string, unknown>,
  input: Record<string, unknown>,
  result: unknown,
): Result<Record<string, unknown>, RenderError> {
  const rendered: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(args)) {
    const ref = templateRef(value);
    if (!ref) {
      rendered[name] = value;
      continue;
    }
    const found = valueAt(ref.from === "input" ? input : result, ref.path);
    if (found === undefined)
      return err({
        code: "compensation_arguments_invalid",
        detail: `${name}: the original's ${ref.from} has no ${ref.path.join(".")} (template ${String(value)}); nothing was sent`,
      });
    rendered[name] = found;
  }
  return ok(rendered);
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let at: unknown = root;
  for (const key of path) {
    if (typeof at !== "object" || at === null || Array.isArray(at) || !Object.hasOwn(at, key))
      return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

/**
 * The JSON Schema a template path points at inside `schema` (following `properties`), or null when
 * the schema does not declare it. Used at PUT: `{input.x}` must exist in the input schema,
 * `{result.x}` in the output schema when one is declared.
 */
export function schemaAt(schema: unknown, path: readonly string[]): Record<string, unknown> | null {
  let at: unknown = schema;
  for (const key of path) {
    const properties =
      typeof at === "object" && at !== null
        ? (at as { properties?: Record<string, unknown> }).properties
        : undefined;
    if (!properties || typeof properties !== "object" || !Object.hasOwn(properties, key))
      return null;
    at = properties[key];
  }
  return typeof at === "object" && at !== null ? (at as Record<string, unknown>) : {};
}

/** What the compensate rule needs to know about the original, read from its log. */
export type OriginalFacts = {
  phase: string;
  /** The recorded outcome's status (null: not recorded). */
  status: string | null;
  /** The recorded outcome's code when it did not succeed (`invalid_output`: it took effect). */
  code: string | null;
  /** Recorded by a person's verdict (`resolve`) rather than an attempt or a lookup. */
  via: string | null;
  shadow: boolean;
  /** The original is itself a compensation (of this operation id). */
  compensates: string | null;
  /** Its tool declares a compensation. */
  declared: boolean;
};
export type NotCompensable = {
  code: "operation_not_compensable";
  state: string;
  detail: string;
};

/** A render error about an original whose answer could not be read: say why there is no result. */
export function withoutResult(error: RenderError): RenderError {
  return {
    ...error,
    detail: `${error.detail}. The operation took effect, but the tool's answer could not be read (failed/invalid_output), so there is no result to take {result.*} from; undo it by hand`,
  };
}

/** What a compensation was admitted with: its gated input and what it claims of limits across runs. */
export type CompensationAdmission = { input: Record<string, unknown>; claims: LimitClaim[] };

/**
 * A compensation's admission, before Cedar and before anything is recorded: the compensating tool
 * as it stands now (`spec`) must still write; the declared arguments are rendered over the
 * original's frozen input and recorded result; then the turn's gate (`admitCall`) and its claims of
 * limits across runs, as for a model's call, except that the scopes are the person's
 * (operations:compensate, so the tool's own `requiresScopes`), not the run user's.
 */
export function admitCompensation(
  spec: ToolSpec,
  declared: Compensation,
  original: {
    operationId: string;
    facts: Pick<OriginalFacts, "status">;
    input: Record<string, unknown>;
    result: unknown;
  },
  run: Pick<RunState, "context" | "user">,
): Result<CompensationAdmission, RenderError> {
  const refused = (detail: string) =>
    err({ code: "compensation_arguments_invalid" as const, detail: `${detail}; nothing was sent` });
  if (spec.risk === "read") return refused(`${declared.tool} is now a read`);
  const rendered = renderArguments(declared.arguments, original.input, original.result);
  if (!rendered.ok)
    return err(
      original.facts.status === "succeeded" ? rendered.error : withoutResult(rendered.error),
    );
  const call = { id: `undo_${original.operationId}`, name: spec.name, arguments: rendered.value };
  const offered = new Map([[spec.name, spec]]);
  const admitted = admitCall(call, offered, run.context, spec.requiresScopes);
  if (!admitted.ok)
    return refused(`${declared.tool} refuses the rendered arguments: ${admitted.error.message}`);
  const input = admitted.value.input;
  const claims = claimsFor(spec.limitsAcrossRuns, input, run.context, run.user.id);
  if (!claims.ok) return refused(claims.error.message);
  return ok({ input, claims: claims.value });
}

/**
 * Only an original recorded as applied (succeeded by an attempt, a lookup or a person's verdict,
 * or failed/invalid_output: it took effect, its answer was unreadable) may be compensated. Any
 * other failed, rejected, cancelled or budget-stopped one applied nothing; one
 * awaiting approval, a lock or an attempt has not happened yet; an outcome_unknown one may or may
 * not have applied — a person resolves it first (then it is "recorded", and compensable if it
 * succeeded). A shadow run's write never reached production: a real refund would be wrong. A
 * compensation is not itself compensable (undoing a refund is a new charge: a new decision, made by
 * a person or an agent, not an automatic inverse).
 */
export function compensable(facts: OriginalFacts): Result<true, NotCompensable> {
  const state = facts.phase === "recorded" ? (facts.status ?? "recorded") : facts.phase;
  const refuse = (detail: string) =>
    err({ code: "operation_not_compensable" as const, state, detail });
  if (facts.compensates !== null)
    return refuse(
      `the operation is itself the compensation of ${facts.compensates}; a compensation is not compensable`,
    );
  if (facts.shadow)
    return refuse(
      "the operation belongs to a shadow run: nothing reached production, nothing to undo",
    );
  if (facts.phase !== "recorded")
    return refuse(
      facts.phase === "outcome_unknown" || facts.phase === "reconciling"
        ? `the operation's outcome is unknown (${facts.phase}); resolve it first (POST /v1/operations/{id}/resolve), then compensate if it succeeded`
        : `the operation is ${facts.phase}: nothing has been applied yet`,
    );
  if (!tookEffect(facts.status, facts.code))
    return refuse(
      `the operation was recorded as ${facts.status}: nothing was applied, nothing to undo`,
    );
  if (!facts.declared)
    return refuse("its tool declares no compensate; undo it by hand or declare one on the tool");
  return ok(true);
}

/**
 * The compensation's name: the same for every request about one original and generation. The
 * first generation's name is the original's id alone (as before generations existed).
 */
export const compensationNamed = (originalId: string, generation = 1): unknown[] =>
  generation === 1 ? ["compensation", originalId] : ["compensation", originalId, generation];

/** The compensation's operation id: from the original's and the generation, in its jurisdiction. */
export async function compensationIdOf(originalId: string, generation = 1): Promise<OperationId> {
  const digest = await sha256Hex(canonicalJson(compensationNamed(originalId, generation)));
  return `${idPrefix("op", jurisdictionOf(originalId))}${digest.slice(0, 32)}` as OperationId;
}

/** How the current compensation stands, as its operation reports it. */
export type CompensationStanding = { phase: string; status: string | null; code: string | null };

/**
 * Whether asking again makes a NEW compensation (the next generation): only once the current one is
 * recorded as having applied nothing — rejected by a person, its approval expired, refused by a
 * policy or the tool, failed without effect. One that succeeded or took effect, is still under
 * way, or whose outcome is unknown stays THE compensation: asking again returns it. So an
 * original is compensated at most once however often it is asked.
 */
export function asksAnew(current: CompensationStanding): boolean {
  return current.phase === "recorded" && !tookEffect(current.status, current.code);
}

/**
 * After a person approved a compensation: the compensating tool as registered now (its canonical
 * source, null when deleted) must still be the one the compensation was asked with and the
 * approver saw. A re-PUT (another URL, other idempotency) or a DELETE since then voids the
 * approval: the message to return, or null when it still applies.
 */
export function toolChangedSinceAsked(
  tool: string,
  asked: string,
  current: string | null,
): string | null {
  if (current === asked) return null;
  return `The tool ${tool} was ${current === null ? "deleted" : "changed"} after this compensation was asked for, so its approval no longer applies and nothing was sent. This compensation is closed; asking again asks for a new one, with the tool as it stands then.`;
}
