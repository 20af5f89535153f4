// Batch decisions (issue 35): many (operation id, input hash, verdict) decided in one request, each
// by the single decision's own path — OperationObject.decide, bound to the input hash the approver
// saw — so each is taken or refused exactly as if it came alone (four eyes, expiry, decided once,
// the tenant's own operations only). Nothing here decides: it asks every operation and words the
// answers, one per item, in the request's order. The API route and the console's batch form share it.
import type { Decider } from "../domain/operation/state.ts";
import type { Decided, OperationError } from "../durable/operation/contracts.ts";
import type { Env } from "../durable/env.ts";
import { operationStub } from "../durable/stubs.ts";
import type { Result } from "../domain/result.ts";
import { toApiError } from "./problem.ts";
import { OPERATION_ID } from "./request.ts";
import type { ApprovalBatch } from "./schemas.ts";

/**
 * Why an item was not decided: its arguments or tool version changed since the approver looked,
 * another approval of it is pending (an x402 payment's, after the call's own was decided), it
 * expired, someone decided it first, it was cancelled, the decider asked for it (four eyes), the
 * tool never asked for approval, no such operation in this tenant (another tenant's is the same),
 * or the operation did not answer (it may have been decided: read it).
 */
export type SkipReason =
  | "input_hash_changed"
  | "policy_version_changed"
  | "approval_hash_changed"
  | "expired"
  | "already_decided"
  | "cancelled"
  | "self_approval"
  | "step_up_required"
  | "not_an_approver"
  | "not_awaiting_approval"
  | "not_found"
  | "unavailable";

export type BatchItemResult =
  | {
      operation_id: string;
      result: "decided";
      state: "approved" | "rejected";
      /** The operation now: `executing` once approved, `recorded` once rejected (or refused by the run). */
      phase: string;
    }
  /** A routed approval (issue 35): this vote counted; `needed` more distinct approvers must vote. */
  | { operation_id: string; result: "voted"; votes: number; needed: number }
  | { operation_id: string; result: "skipped"; reason: SkipReason; detail: string };

export type BatchDecider = Decider;

/** Every item decided at once (different operations, so no item waits for another), answers in order. */
export async function decideBatch(
  env: Env,
  tenantId: string,
  decider: BatchDecider,
  items: ApprovalBatch,
): Promise<BatchItemResult[]> {
  return Promise.all(
    items.map(async (item): Promise<BatchItemResult> => {
      const id = item.operation_id;
      if (!OPERATION_ID.test(id)) return skipped(id, "not_found", NOT_FOUND);
      let answer: Result<Decided, OperationError>;
      try {
        answer = await operationStub(env, id).decide(tenantId, {
          verdict: item.decision,
          approverId: decider.id,
          via: decider.via,
          scopes: decider.scopes,
          ...(decider.claims ? { claims: decider.claims } : {}),
          reason: item.reason ?? null,
          inputHash: item.input_hash,
          toolVersion: item.policy_version ?? null,
          ...(item.approval_hash ? { approvalHash: item.approval_hash } : {}),
        });
      } catch {
        return skipped(id, "unavailable", UNANSWERED);
      }
      return itemResult(id, answer);
    }),
  );
}

const NOT_FOUND = "no such operation in this tenant";
/** What changed since the approver looked; `approval_hash`: another approval of it is pending now (a payment's). */
const MISMATCH = {
  input_hash: "input_hash_changed",
  policy_version: "policy_version_changed",
  approval_hash: "approval_hash_changed",
} as const satisfies Record<string, SkipReason>;
const UNANSWERED =
  "the operation did not answer; it may or may not have taken this decision: read GET /v1/operations/{id}";

const skipped = (operationId: string, reason: SkipReason, detail: string): BatchItemResult => ({
  operation_id: operationId,
  result: "skipped",
  reason,
  detail,
});

/** The operation's answer to one item, in words. Pure. */
export function itemResult(
  operationId: string,
  answer: Result<Decided, OperationError>,
): BatchItemResult {
  if (!answer.ok) {
    const error = answer.error;
    switch (error.code) {
      case "approval_mismatch":
        return skipped(
          operationId,
          MISMATCH[error.field],
          `${error.detail}; nothing was decided: look at it again`,
        );
      case "self_approval":
      case "not_an_approver":
      case "step_up_required":
        // A batch carries no passkey: a step-up call is approved alone, with its own assertion.
        return skipped(operationId, error.code, error.detail);
      case "not_awaiting_approval":
        return skipped(operationId, "not_awaiting_approval", "this call never waited for approval");
      case "not_found":
      case "pruned":
        // Retention removed it long after it was decided: for a decision, as good as absent.
        return skipped(operationId, "not_found", NOT_FOUND);
      default:
        // Refused before any step (the operation could not gather what a send needs): not decided.
        return skipped(
          operationId,
          "unavailable",
          `nothing was decided: ${toApiError(error).detail}`,
        );
    }
  }
  const { view, decided, voted } = answer.value;
  const state = view.approval?.state ?? "pending";
  if (decided && (state === "approved" || state === "rejected"))
    return { operation_id: operationId, result: "decided", state, phase: view.phase };
  const route = view.approval?.route;
  if (voted && route)
    return {
      operation_id: operationId,
      result: "voted",
      votes: route.votes.length,
      needed: route.needed,
    };
  switch (state) {
    case "expired":
      return skipped(operationId, "expired", "its approval expired; nothing was run");
    case "cancelled":
      return skipped(operationId, "cancelled", "it was cancelled before it was decided");
    case "approved":
    case "rejected":
      return skipped(
        operationId,
        "already_decided",
        `already ${state} by ${view.approval?.decided_by ?? "someone"}; this decision was not recorded`,
      );
    case "pending":
      return skipped(operationId, "unavailable", UNANSWERED);
  }
}
