// The one policy function (issue 21 part 2): a tenant's Cedar policy set decides one call, at the
// operation's start and again before every attempt. `forbid` wins over `permit` (Cedar's own
// rule); a set with no permit that applies denies (Cedar's default deny). The decision and the ids
// of the determining policies (their @id annotation, else Cedar's position id) go to the trace,
// the model and the approver. Errors in a policy's evaluation deny, naming the erroring policies
// (Cedar itself skips a policy that errors, so a forbid that errors would let the call through);
// a set marked invalid (a forced tool change broke it) denies every call (fail closed).
import { cedar } from "./cedar.ts";
import { argumentTypes } from "./schema.ts";
import type { PolicyRequest, PolicySet } from "../domain/policy-request.ts";
import type { ToolSpec } from "../tools/spec.ts";

export type PolicyDecision = {
  version: string;
  decision: "allow" | "deny";
  /** The ids of the policies that determined it (for a deny by default: none). */
  policies: string[];
  errors: string[];
};

/** The request for one call: scalar arguments (as the generated schema declares), string tags. */
export function policyRequestFor(
  spec: Pick<ToolSpec, "name" | "inputJsonSchema" | "resourceKey">,
  input: Record<string, unknown>,
  user: { id: string; scopes: string[]; attributes?: Record<string, string> },
  runId: string,
  context: Record<string, unknown>,
): PolicyRequest {
  const args: PolicyRequest["arguments"] = {};
  const fractional: string[] = [];
  for (const { name } of argumentTypes(spec)) {
    const value = input[name];
    if (typeof value === "string" || typeof value === "boolean") args[name] = value;
    else if (typeof value === "number" && Number.isSafeInteger(value)) args[name] = value;
    else if (typeof value === "number") fractional.push(name);
  }
  const run: Record<string, string> = {};
  for (const [key, value] of Object.entries(context))
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
      run[key] = String(value);
  return {
    tool: spec.name,
    user: { id: user.id, scopes: user.scopes, attributes: user.attributes ?? {} },
    target: spec.resourceKey(input) ?? spec.name,
    arguments: args,
    runId,
    run,
    ...(fractional.length > 0 ? { fractional } : {}),
  };
}

/** Policy ids as people wrote them: `@id("…")` when a policy has one, else `policyN` (its position). */
function policyIds(policies: readonly string[]): string[] {
  return policies.map(
    (policy, i) => /@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)/.exec(policy)?.[1] ?? `policy${i}`,
  );
}

/** Per isolate, by text: the set split into its policies (a set changes rarely; splitting parses it). */
const split = new Map<string, Record<string, string>>();

/** Splits the set so each policy keeps the id people see. */
function staticPolicies(text: string): Record<string, string> | null {
  const known = split.get(text);
  if (known) return known;
  const parts = cedar().policySetTextToParts(text);
  if (parts.type !== "success") return null;
  const ids = policyIds(parts.policies);
  const policies = Object.fromEntries(parts.policies.map((p, i) => [ids[i]!, p]));
  if (split.size >= 64) split.clear();
  split.set(text, policies);
  return policies;
}

export function evaluatePolicies(set: PolicySet, req: PolicyRequest): PolicyDecision {
  const deny = (policies: string[], errors: string[]): PolicyDecision => ({
    version: set.version,
    decision: "deny",
    policies,
    errors,
  });
  if (set.invalid !== undefined)
    return deny(
      [],
      [
        `the policy set is marked invalid (${set.invalid}): every call is refused until the set is PUT again (PUT /v1/policies)`,
      ],
    );
  if (req.fractional?.length)
    return deny(
      [],
      req.fractional.map((name) => `${name} is not a whole number (Cedar's Long)`),
    );
  const policies = staticPolicies(set.text);
  if (!policies) return deny([], ["the policy set does not parse"]);
  const answer = cedar().isAuthorized({
    principal: { type: "User", id: req.user.id },
    action: { type: "Action", id: req.tool },
    resource: { type: "Target", id: req.target },
    context: { arguments: req.arguments, run: { __entity: { type: "Run", id: req.runId } } },
    policies: { staticPolicies: policies },
    entities: [
      {
        uid: { type: "User", id: req.user.id },
        attrs: { id: req.user.id, scopes: req.user.scopes },
        parents: [],
        tags: req.user.attributes,
      },
      { uid: { type: "Run", id: req.runId }, attrs: {}, parents: [], tags: req.run },
      { uid: { type: "Target", id: req.target }, attrs: {}, parents: [] },
    ],
  });
  if (answer.type === "failure")
    return deny(
      [],
      answer.errors.map((e) => e.message),
    );
  const { decision, diagnostics } = answer.response;
  // Cedar skips a policy whose condition errors (an overflow, a missing tag or attribute): a
  // skipped forbid would silently allow. Any error denies, naming the policies that errored.
  if (diagnostics.errors.length > 0) {
    const erring = diagnostics.errors.map((e) => e.policyId);
    const named = [...new Set([...(decision === "deny" ? diagnostics.reason : []), ...erring])];
    return deny(
      named,
      diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`),
    );
  }
  return { version: set.version, decision, policies: diagnostics.reason, errors: [] };
}

/** Cedar's own verdict on a set against the generated schema: null when it validates. */
export function validationProblem(text: string, schema: string): string | null {
  const policies = staticPolicies(text);
  if (!policies) {
    const parsed = cedar().checkParsePolicySet({ staticPolicies: text });
    return parsed.type === "failure"
      ? parsed.errors.map((e) => e.message).join("; ")
      : "the policy set does not parse";
  }
  const count = Object.keys(policies).length;
  const parts = cedar().policySetTextToParts(text);
  if (parts.type === "success" && parts.policies.length !== count)
    return "two policies have the same @id: each id must name one policy";
  const answer = cedar().validate({ schema, policies: { staticPolicies: policies } });
  if (answer.type === "failure") return answer.errors.map((e) => e.message).join("; ");
  if (answer.validationErrors.length === 0) return null;
  return answer.validationErrors
    .map((e) => `${e.policyId}: ${e.error.message}${e.error.help ? ` (${e.error.help})` : ""}`)
    .join("; ");
}

type Denied = { version: string; policies: string[]; errors?: string[] };

/** Which policy refused (or that none permits, or why the set could not be evaluated). */
function deniedBy(d: Denied): string {
  const errors = d.errors ?? [];
  const named = `policy ${d.policies.join(", ")}`;
  if (errors.length === 0) return d.policies.length > 0 ? named : "no policy permitting it";
  const why = errors.join("; ");
  return d.policies.length > 0
    ? `${named}: an error in a policy's evaluation denies (${why})`
    : `it could not be evaluated: ${why}`;
}

/** What the model is told when the tenant's policy set refuses a call. */
export function policyRefusal(d: Denied): string {
  return `Policy does not allow this: the organisation's access policy denies it (${deniedBy(d)}; policy set ${d.version}). Do not retry; tell the user it needs a person with the right permissions.`;
}

/** A compensation (undo) the tenant's policy set refuses when asked: nothing recorded, ask again later. */
export function compensationPolicyRefusal(d: Denied): string {
  return `the organisation's access policy denies this compensation (${deniedBy(d)}; policy set ${d.version}); nothing was sent and nothing recorded: ask again once the policy allows it`;
}
