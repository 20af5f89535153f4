// A new operation's plan, frozen with the call: how it may be repeated (after the tool's
// idempotency verification), its retry and timeout, its approval (bound to the exact tool source,
// whose hash is the policy version) and its resource. Pure: the shell gathers the verification
// status, the policy version and the clock. Also the refusal of a changed input under the same id.
import type { ToolSpec } from "../../tools/spec.ts";
import { refusal, type Envelope } from "../envelope.ts";
import { DEFAULT_SETTLE_SCHEDULE_MS } from "../retry-late.ts";
import type { FrozenInput } from "../turn/turn.ts";
import { idempotencyTrust, type VerificationStatus } from "../verification.ts";
import type { OperationPlan } from "./state.ts";

export type PlanCall = {
  operationId: string;
  idempotencyKey: string;
  input: FrozenInput;
  /** The run's end user: who asked, for the approvals inbox and four eyes. */
  userId: string;
};

/**
 * `toolVersion`: null when the call needs no approval. `verified`: the tool's idempotency
 * verification (null: none); `requireVerified`: a key not verified is then never resent.
 */
export function planOperation(
  spec: ToolSpec,
  call: PlanCall,
  toolVersion: string | null,
  verified: VerificationStatus | null,
  requireVerified: boolean,
  nowMs: number,
  settleScheduleMs: readonly number[] = DEFAULT_SETTLE_SCHEDULE_MS,
): OperationPlan {
  const rule = spec.approval;
  // Frozen with the plan: a tool whose key is not verified is flagged, or (policy on) never resent.
  const trust = idempotencyTrust(
    spec.risk,
    spec.idempotency.mode,
    spec.buildReconcile !== null,
    verified,
    requireVerified,
  );
  return {
    operationId: call.operationId,
    idempotencyKey: call.idempotencyKey,
    safety: trust.safety,
    retry: spec.retry,
    timeoutMs: spec.timeoutMs,
    hasLookup: trust.hasLookup,
    ...(trust.unverified ? { unverified: trust.unverified } : {}),
    settleMs: spec.reconcileSettleMs,
    // Late settlement (retry-late.ts) only where a late try is harmless: the same key, or a lookup.
    ...(trust.safety === "keyed" || trust.hasLookup
      ? { lateSettle: { keyTtlMs: spec.keyTtlMs, scheduleMs: [...settleScheduleMs] } }
      : {}),
    approval:
      toolVersion === null
        ? null
        : {
            inputHash: call.input.hash,
            toolVersion,
            requestedBy: call.userId,
            fourEyes: rule.fourEyes,
            ...(rule.stepUp ? { stepUp: rule.stepUp } : {}),
            ...(rule.route ? { route: rule.route } : {}),
            expiresAtMs: nowMs + rule.expiresInMs,
            preview: spec.buildPreview !== null,
          },
    resource: spec.risk === "read" ? null : spec.resourceKey(call.input.value),
  };
}

/** Same logical operation, different frozen input: a changed amount or recipient is a new decision. */
export function idempotencyConflict(operationId: string): Envelope {
  return refusal(
    "rejected",
    operationId,
    "idempotency_conflict",
    "This operation was already requested with different arguments; toolgate will not change it. Do not retry; tell the user what was already done.",
  );
}
