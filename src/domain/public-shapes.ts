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

/**
 * A person edited the call's arguments before approving it (issue 35 item 2): what ran — the
 * executed arguments (bound fields left out) — the fields that differ from the proposal, and the
 * approver's reason verbatim. Stored with the edit: every re-post reads the same words.
 */
export type EditedCall = {
  arguments: Record<string, unknown>;
  changes: Array<{ field: string; proposed?: unknown; executed?: unknown }>;
  reason: string | null;
  note: string;
};

/**
 * x402 (issue 37): what a paid call paid, with the merchant's settlement (its PAYMENT-RESPONSE:
 * null when no answer carried one, e.g. settled by a lookup or a person). Amount in the asset's
 * atomic units. Never the signed payload.
 */
export type PaidCall = {
  amount: string;
  asset: string;
  network: string;
  pay_to: string;
  payment_id: string | null;
  settlement: { success: boolean; transaction: string; network: string } | null;
};

export type Envelope =
  | {
      status: "succeeded";
      operation_id: string;
      result: unknown;
      edited?: EditedCall;
      payment?: PaidCall;
    }
  | {
      status: Exclude<ModelStatus, "succeeded">;
      operation_id: string;
      code: string;
      message: string;
      allowed_next_actions: string[];
      /** `approval_rejected`: the approver's reason, verbatim (also quoted in `message`). */
      reason?: string;
      /** The operator's freeze holding this call (issue 34): nothing is sent until it is lifted. */
      freeze?: { id: string; reason: string };
      /** `credential_required` (issue 36): the link the user opens to connect; the call then continues. */
      connect_url?: string;
      edited?: EditedCall;
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
  /**
   * The compensation's frozen input hash (issue 35): with `compensation_id`, what a person names to
   * approve it — alone or in a batch (POST /v1/approvals/batch). Null until it is submitted.
   */
  compensation_input_hash?: string | null;
  state: StepState;
  detail: string | null;
};
export type RollbackView = { state: RollbackState; steps: RollbackStep[] };
