// A turn's identity and shape as plain data: the run it belongs to, its calls (fixed refusals or
// submissions that follow an operation), the id that names its slot (call ids) and the content hash
// that tells a replay from a conflict. Admission is admit.ts, settlement settle.ts, cancel close.ts;
// the RunObject loads rows, calls these, and writes what they return in one transactionSync
// (see durable/run/object.ts).
import type { LimitClaim } from "../limit/window.ts";
import type { ToolSource } from "../../tools/spec.ts";
import type { Budgets } from "./budget.ts";
import { canonicalJson, sha256Hex } from "../canonical-json.ts";
import type { Envelope } from "../envelope.ts";
import type { ProposedCall } from "./gate.ts";
import type { TraceEvent } from "../operation/index.ts";

import type { FrozenInput } from "../identity.ts";
export type { FrozenInput };

export type RunState = {
  runId: string;
  tenantId: string;
  /** `attributes`: the principal's tags for the tenant's Cedar policies (absent: none). */
  user: { id: string; scopes: string[]; attributes?: Record<string, string> };
  tools: Record<string, ToolSource>;
  /** Content hash of `tools`: keys the compiled-tool cache, so a re-registered tool is never a stale hit. */
  toolsHash: string;
  context: Record<string, unknown>;
  budgets: Budgets;
  createdAtMs: number;
  expiresAtMs: number;
  cancelledAtMs: number | null;
  /** A webhook endpoint of the tenant that gets this run's `turn.settled` events (issue 18). */
  notifyWebhookId?: string;
  /** A shadow run (absent: live): its writes go only to their tools' sandboxes (issue 22). */
  mode?: "shadow";
};

export type CallRef = { id: string; name: string };
export type Submission = {
  operationId: string;
  idempotencyKey: string;
  input: FrozenInput;
  source: ToolSource;
  cost: number;
  /** What it claims of the tool's limits across runs (absent: none, or a row written before them). */
  claims?: LimitClaim[];
};
/** A submitted call either still follows its operation, or was closed by a cancel (`closed`: what the turn says from then on). */
export type TurnCall =
  | { call: CallRef; fixed: Envelope }
  | { call: CallRef; submit: Submission; closed: Envelope | null };
export type TurnRecord = {
  id: string;
  contentHash: string;
  seq: number;
  calls: TurnCall[];
  reservedCost: number;
  settledCost: number | null;
  modelCost: number;
  createdAtMs: number;
};
export type TurnIdentity = { id: string; contentHash: string };
export type Denial = {
  status: "rejected" | "budget_exhausted" | "cancelled";
  code: string;
  message: string;
};

/**
 * The id names the turn by its call ids (the slot a re-post lands in); the content hash covers ids,
 * names and canonical arguments, so the same ids with other content is a conflict, never a replay.
 */
export async function turnIdentity(calls: readonly ProposedCall[]): Promise<TurnIdentity> {
  const id = `turn_${(await sha256Hex(canonicalJson(calls.map((call) => call.id)))).slice(0, 26)}`;
  const contentHash = await sha256Hex(
    canonicalJson(calls.map((call) => [call.id, call.name, canonicalArguments(call.arguments)])),
  );
  return { id, contentHash };
}

/** Arguments sent as a JSON string and as an object are the same content (the gate parses both alike). */
function canonicalArguments(args: unknown): unknown {
  if (typeof args !== "string") return { json: args ?? null };
  if (args.trim() === "") return { json: {} };
  try {
    return { json: JSON.parse(args) as unknown };
  } catch {
    return { text: args };
  }
}

/** The gate's verdicts depend on the offered tools and the user's scopes (the context never changes). */
export const sameGateInputs = (a: RunState, b: RunState): boolean =>
  a.toolsHash === b.toolsHash &&
  a.user.scopes.length === b.user.scopes.length &&
  a.user.scopes.every((scope, i) => scope === b.user.scopes[i]);

export const operationIds = (record: TurnRecord): string[] =>
  record.calls.flatMap((stored) => ("submit" in stored ? [stored.submit.operationId] : []));

/** Operations a cancel must ask about: every submitted call not yet closed. */
export const openOperations = (record: TurnRecord): string[] =>
  record.calls.flatMap((stored) =>
    "submit" in stored && stored.closed === null ? [stored.submit.operationId] : [],
  );

/** The input hashes this turn's submitted calls froze for `operationId` (a conflicting call's differs from the operation's). */
export const submittedHashes = (record: TurnRecord, operationId: string): string[] =>
  record.calls.flatMap((stored) =>
    "submit" in stored && stored.submit.operationId === operationId
      ? [stored.submit.input.hash]
      : [],
  );

/** Content hash of a run's offered tool sources (their canonical JSON). */
export const hashTools = async (tools: Record<string, ToolSource>): Promise<string> =>
  sha256Hex(canonicalJson(tools));

/** The run's trace event for one turn: each call with its operation, and how a fixed call ended. */
export const turnReceived = (turn: TurnRecord): TraceEvent => ({
  type: "turn_received",
  at_ms: turn.createdAtMs,
  turn_id: turn.id,
  calls: turn.calls.map((stored) =>
    "submit" in stored
      ? { call_id: stored.call.id, name: stored.call.name, operation_id: stored.submit.operationId }
      : {
          call_id: stored.call.id,
          name: stored.call.name,
          operation_id: stored.fixed.operation_id,
          fixed: stored.fixed.status,
          code: "code" in stored.fixed ? stored.fixed.code : null,
        },
  ),
});
