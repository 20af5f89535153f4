// What the RunObject answers over RPC (routes, the console and other objects call it through
// stubs): the run as the API shows it, a turn's reply, and the closed set of run errors; and
// `RunParts`, what it hands the modules beside it. Types only, plus `notFound`; the one error →
// HTTP map is src/http/problem.ts.
import type { ContextMissing } from "../../domain/context-needs.ts";
import type { Envelope } from "../../domain/envelope.ts";
import { err, type Result } from "../../domain/result.ts";
import type { Budgets } from "../../domain/turn/budget.ts";
import type { TurnResult } from "../../domain/turn/settle.ts";
import type { FrozenInput, RunState } from "../../domain/turn/turn.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import type { RollbackView } from "../../domain/rollback.ts";
import type { VerificationStatus } from "../../domain/verification.ts";
import type { Jurisdiction } from "../../domain/jurisdiction.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { RunEvents } from "./events.ts";
import type { RunRows } from "./rows.ts";
import type { TurnSettler } from "./settle.ts";
import type { ToolSources } from "./sources.ts";

export type RunInit = Omit<RunState, "toolsHash" | "createdAtMs" | "cancelledAtMs">;
export type RunView = {
  run_id: string;
  status: "active" | "cancelled";
  user: RunState["user"];
  tools: string[];
  context: Record<string, unknown>;
  budgets: Budgets;
  usage: { turns: number; tool_calls: number; cost: number };
  created_at: string;
  expires_at: string;
  mode: "live" | "shadow";
  /** The data-residency jurisdiction the run's objects are placed in (null: none). */
  jurisdiction: Jurisdiction | null;
  /** The webhook endpoint that gets this run's turn.settled (`notify` at creation; null: none). */
  notify_webhook_id: string | null;
  /** Present once the run was cancelled with rollback: true (issue 22): each step and how it stands. */
  rollback?: RollbackView;
};
/** `results`: each call's envelope paired with the call, in call order. `pruned`: calls whose operation retention removed (`settled_as`: how it had settled). */
export type TurnReply = {
  turn_id: string;
  status: "settled" | "pending";
  results: TurnResult[];
  pruned: Array<{ call_id: string; operation_id: string; pruned_at: string; settled_as: string }>;
  rowsWritten: number;
};
export type IdempotencyWarning = {
  tool: string;
  code: "idempotency_unverified";
  /** The tool's answer to "is it verified?" (domain/verification.ts), anything but "verified". */
  status: Exclude<VerificationStatus, "verified">;
  /** TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY is on: the tool runs without automatic resends. */
  enforced: boolean;
  detail: string;
};
/** What POST /v1/runs, PATCH and GET …/tools answer beside the tools (always a list, maybe empty). */
export type RunWarning = IdempotencyWarning | ContextMissing;
/** A person's edit admitted by the run's gate (issue 35 item 2): the new frozen input and its claims. */
export type EditAdmitted = {
  input: FrozenInput;
  claims: LimitClaim[];
  /** The run's user and context now: the edited call's Cedar request is built from them. */
  principal: { user: RunState["user"]; context: Record<string, unknown> };
  /** The tool's bound fields (never shown to the model). */
  bound: string[];
};

export type RunError =
  | { code: "not_found"; detail: string }
  | { code: "invalid_request"; detail: string }
  | { code: "turn_conflict"; detail: string }
  /** POST /v1/runs: this request_id already created a run from another body. */
  | { code: "request_id_conflict"; detail: string }
  | { code: "unknown_tool"; detail: string }
  /** The run stores no more turns (domain/run-limits.ts): nothing stored, nothing sent. */
  | { code: "run_turn_limit"; detail: string }
  /** TOOLGATE_SIGNING_KEY is unset: no upstream idempotency key can be derived. */
  | { code: "misconfigured"; detail: string }
  /** Undo (issue 22): the original was not recorded as applied, or is itself a compensation. */
  | { code: "operation_not_compensable"; state: string; detail: string }
  /** Undo: the rendered arguments fail the compensating tool as it stands now (nothing sent). */
  | { code: "compensation_arguments_invalid"; detail: string }
  /** Undo: the tenant's Cedar set refuses the compensation now (nothing recorded, ask again later). */
  | { code: "policy_denied"; detail: string }
  /** Undo: the compensation was recorded but its operation did not answer; asking again submits it. */
  | { code: "unavailable"; detail: string }
  /** A rollback's plan (issue 35 item 4): none running, or nothing left in it to approve. */
  | { code: "rollback_not_running"; detail: string }
  /** A plan approval named other hashes or tool versions than the plan holds now (nothing approved). */
  | { code: "approval_mismatch"; field: "input_hash" | "policy_version"; detail: string }
  /** A plan approval by the run's own user under four eyes (nothing approved). */
  | { code: "self_approval"; detail: string }
  /** Expired, every operation pruned, then its own rows (retention): it answers 410 from then on. */
  | { code: "run_pruned"; run_id: string; pruned_at_ms: number };
/** One MCP tools/call: `requestKey` names it for cancellation, `nonce` names a read (domain/mcp-call.ts). */
export type McpCall = {
  requestKey: string;
  /** The caller's `Mcp-Session-Id` (null: none): a request id names a call only within it. */
  session: string | null;
  name: string;
  arguments: Record<string, unknown>;
  nonce: string;
};
/** `checkStatus`: the run offers toolgate_check_status (the result text may point at it). */
export type McpCallReply = { envelope: Envelope; checkStatus: boolean };

export const notFound = (what: string): Result<never, RunError> =>
  err({ code: "not_found", detail: `no such ${what}` });

/**
 * What a RunObject owns and hands to the modules beside it: its environment, its SQL store, its
 * rows and tool sources, the settler (recorded replies and reports) and its events. Plain
 * references, no behaviour: each module takes the parts it uses.
 */
export type RunParts = {
  env: Env;
  store: SqlStore;
  rows: RunRows;
  sources: ToolSources;
  settler: TurnSettler;
  events: RunEvents;
};
