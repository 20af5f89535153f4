// The operation state machine's public surface: `transition` is the one entry, the types it speaks,
// the approval policy the shell asks before freezing a plan, and the read-only views of a state.
// Everything else in this folder is internal to the machine (state ← steps ← arms ← transition).
export { approvalHashOf, DEFAULT_APPROVAL_TTL_MS, needsApproval } from "./approval.ts";
export type {
  ApprovalEdit,
  Decision,
  Effect,
  Exchange,
  OperationEvent,
  OperationPlan,
  OperationState,
  SentRequest,
  Step,
  TraceEvent,
  TransitionError,
  UpstreamAnswer,
} from "./state.ts";
export { tookEffect } from "./state.ts";
export {
  LOCK_RECHECK_MAX_MS,
  LOCK_WAITING_LONG_MS,
  LOCK_RECHECK_MS,
  nextLockRecheckAtMs,
  QUOTA_RECHECK_MS,
  WATCHDOG_GRACE_MS,
} from "./steps.ts";
export { controlsOf, type Controls } from "./hold.ts";
export { transition } from "./transition.ts";
export { isSettled, nextDueAtMs, settlingUntilMs, stateAlarmAtMs } from "./view.ts";
