// The OperationObject's contract: the RPC requests, replies and errors other objects and the edge
// see, and the shapes its modules pass each other (the frozen row, the head, the loaded tool). The
// frozen row is row 1 of the log and never changes; the head is the newest row with it.
import type { PaymentView } from "./payment.ts";
import type { RepeatSafety } from "../../domain/classify.ts";
import type { RouteData } from "../../domain/journal/events.ts";
import type { DeciderVia } from "../../domain/journal/trace-event.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import type { LimitUsage } from "../limit/contracts.ts";
import type { EditedCall, Envelope } from "../../domain/envelope.ts";
import type {
  Controls,
  OperationEvent,
  OperationPlan,
  OperationState,
  TransitionError,
} from "../../domain/operation/index.ts";
import type { Result } from "../../domain/result.ts";
import type { FrozenInput, RunState } from "../../domain/turn/turn.ts";
import type { CallFacts } from "../../domain/tenant-facts.ts";
import type { Env } from "../env.ts";
import type { Preview } from "../../tools/http-tool.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import type { Alarms } from "./alarm.ts";
import type { ShadowView } from "./views.ts";
import type { RedactedCall } from "./redacted-view.ts";
import type { UndoView } from "./compensation.ts";
import type { OperationLog } from "./log.ts";

export type SubmitRequest = {
  tenantId: string;
  runId: string;
  callId: string;
  source: ToolSource;
  /** The call's input as frozen by the run: value, canonical JSON text and its hash, as one value. */
  input: FrozenInput;
  operationId: string;
  idempotencyKey: string;
  /** The run's end user: who asked, for the approvals inbox and four eyes. */
  userId: string;
  waitMs: number;
  /** false: a default wait, over once only a person's decision is left (domain/wait.ts); absent: true. */
  holdForPeople?: boolean;
  /** What the call claims of its tool's limits across runs (reserved before the start; absent: none). */
  limitClaims?: LimitClaim[];
  /** The run's user (with attributes) and context, for the tenant's Cedar policies (absent: older callers). */
  principal?: { user: RunState["user"]; context: Record<string, unknown> };
  /**
   * What the run's tenant-facts snapshot says about this call's tool (sealed secrets, verdict), or
   * null: the operation asks the tenant itself (the snapshot was stale, absent or invalidated).
   */
  facts?: CallFacts | null;
  /** When the run's max_duration_ms ends (absent or null: no deadline): no quota wait reaches past it. */
  deadlineAtMs?: number | null;
  /** The call belongs to a shadow run (issue 22): a write is planned to reach its sandbox only. */
  shadow?: true;
  /** Undo (issue 22): the compensation of `of`; "required": a person approves it whatever the tool says. */
  compensation?: { of: string; approval: "required" | "none" };
};
/**
 * `executedBy`: the call that created the operation (a replay from another call did not execute it).
 * `terminal`: recorded, so this envelope will never change and callers may keep it.
 */
export type OperationReply = {
  envelope: Envelope;
  settled: boolean;
  terminal: boolean;
  inputHash: string;
  executedBy: string;
  rowsWritten: number;
  /** When it was recorded (null: not yet): a cached copy is good only until retention prunes it. */
  recordedAtMs: number | null;
};
export type OperationView = {
  operation_id: string;
  tool: string;
  run_id: string;
  call_id: string;
  phase: OperationState["phase"];
  /** The frozen version that runs (after a person's edit, the edited one: what an approval names). */
  input_hash: string;
  /**
   * A person edited the arguments (issue 35 item 2): the model's proposal (`input_hash`), who
   * edited, why, and what the model is told. Absent: never edited.
   */
  edited?: {
    proposed_input_hash: string;
    by: string;
    via: DeciderVia;
    reason: string | null;
    model: EditedCall;
  };
  idempotency_key: string;
  /** How the tool can be repeated: only `keyed` may be resent after an unknown outcome (the console's resolve form). */
  repeat_safety: RepeatSafety;
  created_at: string;
  result: Envelope;
  /** The result arrived after the operation was cancelled; it was not reported to the closed turn. */
  late: boolean;
  /** Present when the call needed a person's decision. */
  approval: ApprovalView | null;
  /** A standing grant approved it (issue 35): which, the amount it used, and whether it lapsed before the send (then `approval` is the person's). */
  grant?: { id: string; amount: number | null; lapsed: boolean };
  /**
   * Settling an unknown outcome by itself (domain/retry-late.ts): the next late try (null: one is
   * in flight now) and the end of the key's window, after which a person decides. Null otherwise.
   */
  settling: { next_try_at: string | null; until: string } | null;
  /** Held (issue 34): by an operator's freeze (named) or a person's pause, since when. Null otherwise. */
  held:
    | { kind: "freeze"; freeze_id: string; reason: string; since: string }
    | { kind: "pause"; by: string; since: string }
    | null;
  /** Which of pause / resume / retry-now apply now (the console's buttons; the routes decide again). */
  controls: Controls;
  /** The call as the console shows it: arguments, target and result, redacted like the trace. */
  redacted: RedactedCall;
} & ShadowView &
  UndoView &
  PaymentView;
/** A decision's answer: the operation now, and whether this decision is the one it recorded. */
/** `decided`: this request took the decision; `voted`: it counted as a vote, and more are needed. */
export type Decided = { view: OperationView; decided: boolean; voted: boolean };
export type ApprovalView = {
  state: "pending" | "approved" | "rejected" | "expired" | "cancelled";
  requested_by: string;
  requested_at: string;
  expires_at: string;
  input_hash: string;
  policy_version: string;
  /** What a decision binds to (approval.ts `approvalHashOf`): `input_hash`, or a payment's own. */
  approval_hash: string;
  four_eyes: boolean;
  /** Approving needs a passkey assertion over `challenge` (bound to this operation's input hash). */
  step_up: { kind: "passkey"; challenge: string } | null;
  /** A shadow run's call (issue 22): approving it sends it to the tool's sandbox only. */
  shadow: boolean;
  /** Undo (issue 22): the approval is for the compensation of this operation (null: an ordinary call). */
  compensates: string | null;
  /** The tool's preview answer, when it has one (null while it runs or when it has none). */
  preview: Preview | null;
  decided_by: string | null;
  /** How `decided_by` was verified (trace-event.ts DeciderVia); null before a decision or in older traces. */
  decided_via: DeciderVia | null;
  decided_at: string | null;
  reason: string | null;
  /** A routed approval (issue 35): the votes so far and who may still vote; null: one person decides. */
  route: RouteData | null;
  /** x402 (issue 37): the payment this approval is for, exactly what will be signed once approved. */
  payment?: ApprovalPaymentView;
};
/** A payment approval's requirement on the wire: amount in the asset's atomic units. */
export type ApprovalPaymentView = {
  amount: string;
  asset: string;
  network: string;
  pay_to: string;
};
/**
 * What a person deciding an approval sees: the frozen arguments and target as they will be sent,
 * hidden fields included, and which fields (`hidden`, the tool's `redact` pointers present in
 * them) every other copy — trace, inbox, logs, exports — shows as "[redacted]".
 */
export type ApprovalInput = {
  arguments: Record<string, unknown>;
  target: string;
  hidden: string[];
  input_hash: string;
  policy_version: string;
  /** What a decision binds to (approval.ts `approvalHashOf`): `input_hash`, or a payment's own. */
  approval_hash: string;
  /**
   * Fields an approver cannot edit (issue 35 item 2): bound from the run's context or naming the
   * operation (its operation key); an edit that sends one with another value is refused.
   */
  fixed: string[];
  /** A person edited it (issue 35 item 2): who, why, and each changed field, proposed and edited. */
  edited?: { by: string; reason: string | null; changes: EditedCall["changes"] };
  /** Acting as the user (issue 36): whose connection it sends with; the route adds its health now. */
  credential?: { provider: string; user: string; scopes: string[] };
  /** The passkey step-up approving it needs (the same as the view's `approval.step_up`). */
  step_up?: { kind: "passkey"; challenge: string };
  /** Its limits across runs as they stand (this call's reservation included; null: could not be read). */
  limits?: Array<{ name: string; subject: string; amount: number; usage: LimitUsage | null }>;
  /** The tenant's Cedar decision at the start: the version that decided and the determining policies. */
  cedar?: { version: string; decision: "allow" | "deny"; policies: string[] };
  /** x402 (issue 37): the payment this approval is for, exactly what will be signed once approved. */
  payment?: ApprovalPaymentView;
};
export type OperationError =
  | { code: "not_found" }
  | TransitionError
  | { code: "invalid_tool"; detail: string }
  /**
   * Settled (as `status`, the recorded outcome's) and pruned after the retention period: it will
   * not run again (HTTP 410). `input_hash`: what it was, so an identical request can be told apart.
   */
  | {
      code: "pruned";
      operation_id: string;
      pruned_at_ms: number;
      status: string;
      input_hash: string;
    }
  /** The run could not be asked before a send; nothing was decided or sent (HTTP 503, try again). */
  | { code: "unavailable"; detail: string }
  /** A person's send (a resend, retry-now) while a freeze applies to it (issue 34): nothing sent. */
  | { code: "frozen"; detail: string; freeze_id: string }
  /** Retry-now: the host's retry budget refused it; nothing was sent (issue 34). */
  | { code: "retry_budget_exhausted"; detail: string; retry_after_ms: number }
  /** Retry-now while the upstream has paused the call's origin (Retry-After, RateLimit); nothing sent. */
  | { code: "origin_paused"; detail: string; retry_after_ms: number }
  /** A person's edit (issue 35 item 2) refused; nothing was changed. */
  | { code: "invalid_arguments"; detail: string }
  | { code: "policy_denied"; detail: string }
  | { code: "forbidden"; detail: string }
  | { code: "field_not_editable"; detail: string; field: string };
/** What `peek` saw: the operation as it stands, never created or changed by asking. */
export type OperationPeek = {
  phase: OperationState["phase"];
  run_id: string;
  input_hash: string;
  envelope: Envelope;
};
/** A person's verdict on an outcome_unknown (the `resolve` event without its type). */
export type Verdict = Omit<Extract<OperationEvent, { type: "resolve" }>, "type">;

/** The call as frozen at validation (row 1 of the log); it never changes afterwards. */
export type FrozenRow = {
  id: string;
  tenant_id: string;
  run_id: string;
  call_id: string;
  source: ToolSource;
  input: string;
  input_hash: string;
  plan: OperationPlan;
  created_at: number;
  /** The tool's risk, redaction pointers and trace opt-ins, frozen with the call (absent in older rows). */
  risk?: string;
  redact?: string[];
  trace_content?: { arguments: boolean; result: boolean };
  /**
   * This version was made by a person's edit while it awaited approval (issue 35 item 2; absent:
   * the model's own arguments, row 1). `proposed_hash`: the model's input hash — the operation's
   * identity, what re-posts and re-proposals are matched against; `model`: what the model reads.
   */
  edit?: {
    proposed_hash: string;
    /** The model's own input (canonical JSON): the difference the model is told is from it. */
    proposed_input: string;
    from_hash: string;
    by: string;
    via: DeciderVia;
    reason: string | null;
    at_ms: number;
    model: EditedCall;
  };
};
export type Head = { seq: number; state: OperationState; frozen: FrozenRow };
export type Fixed = { spec: ToolSpec; input: FrozenInput };
export type Loaded = Fixed & { plan: OperationPlan };
/** The tenant secrets one attempt may use, fetched before its row is written (no await between row and fetch). */
export type Secrets = Result<Record<string, string>, string>;

/** What the object lends the modules beside it: its log, its one way to transition, its alarm. */
export type Shell = {
  env: Env;
  log: OperationLog;
  /** One transition (OperationObject.apply); `secrets`: prefetched for an attempt it starts. */
  apply(event: OperationEvent, secrets?: Secrets | null): unknown;
  /** The one alarm: set (never past an outbox row's redelivery) or back to the state's own time. */
  alarms: Alarms;
  /** The tenant facts the run last submitted this operation with (memory only; gather.ts checks their age). */
  facts: CallFacts | null;
};
