// The wire shapes the client speaks, as plain TypeScript (no zod: the client needs nothing but
// fetch). Results are typed per format so they drop straight into that SDK's next request: an
// Anthropic `user` message of `tool_result` blocks, OpenAI Responses `function_call_output` items,
// Chat Completions `role: "tool"` messages, or native envelopes.

export type Format = "anthropic" | "openai-responses" | "openai-chat" | "native";

// The envelope is the server's own type (public-shapes.ts has no imports: the package ships it).
import type { Envelope, ModelStatus, RollbackView } from "../domain/public-shapes.ts";
export type { Envelope, RollbackView };
export type Status = ModelStatus;

export type AnthropicToolResults = {
  role: "user";
  content: Array<{ type: "tool_result"; tool_use_id: string; content: string; is_error: boolean }>;
};
export type ResponsesToolResults = Array<{
  type: "function_call_output";
  call_id: string;
  output: string;
}>;
export type ChatToolResults = Array<{ role: "tool"; tool_call_id: string; content: string }>;

export type ResultsOf<F extends Format> = F extends "anthropic"
  ? AnthropicToolResults
  : F extends "openai-responses"
    ? ResponsesToolResults
    : F extends "openai-chat"
      ? ChatToolResults
      : Envelope[];

/** One call of a turn and what toolgate says about it now. */
export type CallState = { call_id: string; envelope: Envelope };

/**
 * What `turn()` hands back. `settled`: every call has its final result, `results` is ready to
 * append. `waiting`: some calls are still running or wait for a person; their interim envelopes are
 * in `pending` / `awaiting_approval` and there are no `results` to append yet (appending a 202's
 * results would tell the model a call finished). `no_tool_calls`: nothing to post.
 */
export type TurnOutcome<F extends Format> =
  | { status: "no_tool_calls" }
  | { status: "settled"; turn_id: string; results: ResultsOf<F>; calls: CallState[] }
  | {
      status: "waiting";
      turn_id: string;
      calls: CallState[];
      pending: CallState[];
      awaiting_approval: CallState[];
    };

export type RunBudgets = {
  max_turns?: number;
  max_tool_calls?: number;
  max_duration_ms?: number;
  max_cost?: number;
};
export type CreateRunRequest = {
  user: { id: string; scopes: string[] };
  tools: string[];
  context?: Record<string, unknown>;
  budgets?: RunBudgets;
  /** Names this creation (1-128 of A-Z a-z 0-9 . _ : -): the same request again returns the same run. */
  request_id?: string;
};
export type RunCreated = {
  run_id: string;
  run_token: string;
  expires_at: string;
  tools: unknown[];
};

export type OperationView = {
  operation_id: string;
  tool: string;
  run_id: string;
  call_id: string;
  phase: string;
  input_hash: string;
  idempotency_key: string;
  created_at: string;
  result: Envelope;
  late: boolean;
  approval: {
    state: "pending" | "approved" | "rejected" | "expired" | "cancelled";
    input_hash: string;
    policy_version: string;
    /** What a decision binds to: `input_hash`, or an x402 payment's approval's own hash. */
    approval_hash: string;
    expires_at: string;
    decided_by: string | null;
    /** How `decided_by` was verified: Cloudflare Access (a person), an API key, a console session, delegated. */
    decided_via: "access" | "api_key" | "console" | "delegated" | null;
    /** Approving needs a passkey assertion over `challenge` (the tool's `approval.step_up`). */
    step_up: { kind: "passkey"; challenge: string } | null;
    reason: string | null;
    /** The approval is for the compensation of this operation (undo); null: an ordinary call. */
    compensates: string | null;
  } | null;
  /** Undo: this operation compensates that one (null: it is an ordinary call). */
  compensates: string | null;
  /** Undo: that operation compensates this one (null: not compensated). */
  compensated_by: string | null;
};

/** POST /v1/operations/{id}/compensate: `created` false when it was asked before (same operation). */
export type Compensation = { created: boolean; operation: OperationView };

/** POST /v1/runs/{id}/cancel: the run as it stands; `rollback` once cancelled with rollback. */
export type CancelledRun = {
  run_id: string;
  status: "active" | "cancelled";
  mode: "live" | "shadow";
  rollback?: RollbackView;
} & Record<string, unknown>;

/** GET /v1/runs/{id}/trace: the server's closed union of trace events (import-free, shipped with the package). */
export type { TraceEvent } from "../domain/journal/trace-event.ts";
