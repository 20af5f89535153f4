// Approval policy, pure: whether a frozen input needs a person's decision, and whether a decision
// may be taken. An approval binds to operation id + input hash + policy version (the hash of the
// tool's source): the operation holds all three from the moment it is frozen, so changed
// arguments are another operation and a changed tool is refused at decision time. It expires;
// it is decided once; by default the approver must not be the run's own user (four eyes).
// Approval is not authorization: the run's scopes, deadline and tool are checked again after it.
import type { ApprovalRule, Comparison } from "../tools/spec.ts";
import { err, ok, type Result } from "./result.ts";

export const DEFAULT_APPROVAL_TTL_MS = 15 * 60_000;

/**
 * `when` rules ask when ANY listed condition holds (the conservative reading of a list of reasons
 * to ask). A condition on a field the input does not carry asks too: a rule that cannot be
 * evaluated must not let an irreversible action through unasked.
 */
export function needsApproval(rule: ApprovalRule, input: Record<string, unknown>): boolean {
  switch (rule.mode) {
    case "always":
      return true;
    case "never":
      return false;
    case "when":
      return Object.entries(rule.when ?? {}).some(
        ([field, comparison]) => input[field] === undefined || matches(comparison, input[field]),
      );
  }
}

function matches(c: Comparison, value: unknown): boolean {
  const n = typeof value === "number" ? value : null;
  // A numeric comparison against a non-number cannot be decided: ask.
  if (
    (c.gt !== undefined || c.gte !== undefined || c.lt !== undefined || c.lte !== undefined) &&
    n === null
  )
    return true;
  if (c.gt !== undefined && n! > c.gt) return true;
  if (c.gte !== undefined && n! >= c.gte) return true;
  if (c.lt !== undefined && n! < c.lt) return true;
  if (c.lte !== undefined && n! <= c.lte) return true;
  if (c.eq !== undefined && value === c.eq) return true;
  if (c.in !== undefined && c.in.some((item) => item === value)) return true;
  return false;
}

export type ApprovalRequest = {
  inputHash: string;
  policyVersion: string;
  requestedBy: string;
  fourEyes: boolean;
  expiresAtMs: number;
};
export type Decision = {
  verdict: "approve" | "reject";
  approverId: string;
  reason: string | null;
  inputHash: string | null;
  policyVersion: string | null;
};
export type DecisionRefusal =
  { code: "self_approval"; detail: string } | { code: "approval_mismatch"; detail: string };

/** Checks a decision against the request it answers (expiry is the state machine's: it records it). */
export function checkDecision(
  request: ApprovalRequest,
  decision: Decision,
): Result<true, DecisionRefusal> {
  if (request.fourEyes && decision.approverId === request.requestedBy) {
    return err({
      code: "self_approval",
      detail: `${decision.approverId} asked for this call and cannot decide it (four eyes); another person must`,
    });
  }
  if (decision.inputHash !== null && decision.inputHash !== request.inputHash)
    return err({
      code: "approval_mismatch",
      detail: "the decision names other arguments than this operation holds",
    });
  if (decision.policyVersion !== null && decision.policyVersion !== request.policyVersion)
    return err({
      code: "approval_mismatch",
      detail: "the decision names another version of the tool than this operation holds",
    });
  return ok(true);
}
