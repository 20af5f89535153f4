// The answer shapes the client package speaks as well as the server: the envelope the model reads
// and a rollback's view. No imports, on purpose: packages/client compiles src/client/ with this file
// and journal/trace-event.ts and nothing else of the server, so its `.d.ts` need nothing but TypeScript.
// The logic lives beside its concept (envelope.ts, rollback.ts), which re-export these types.

export type ModelStatus =
  | "succeeded"
  | "rejected"
  | "failed"
  | "budget_exhausted"
  | "cancelled"
  | "outcome_unknown"
  | "awaiting_approval"
  | "pending";

export type Envelope =
  | { status: "succeeded"; operation_id: string; result: unknown }
  | {
      status: Exclude<ModelStatus, "succeeded">;
      operation_id: string;
      code: string;
      message: string;
      allowed_next_actions: string[];
      /** The operator's freeze holding this call (issue 34): nothing is sent until it is lifted. */
      freeze?: { id: string; reason: string };
    };

/**
 * `pending`: to compensate; `submitted`: its compensation exists and is not recorded yet;
 * `compensated`: recorded as succeeded; `failed` / `outcome_unknown`: the compensation ended so
 * and the rollback stopped there; `not_compensable`: applied, but its tool declares no compensate;
 * `unsettled`: the write's own outcome is unknown (a person resolves it, then may compensate it).
 */
export type StepState =
  | "pending"
  | "submitted"
  | "compensated"
  | "failed"
  | "outcome_unknown"
  | "not_compensable"
  | "unsettled";
export type RollbackState = "running" | "completed" | "stopped";
export type RollbackStep = {
  operation_id: string;
  tool: string;
  compensation_id: string | null;
  state: StepState;
  detail: string | null;
};
export type RollbackView = { state: RollbackState; steps: RollbackStep[] };
