// A turn as pure functions over plain data: identity (call ids + content), the gate's verdict per
// call, freezing, budget admission with cost reservations in call order, refusals in a cancelled
// run, settlement of the reservation, closing calls on cancel, and `mayExecute` (the gate's own
// checks, asked again before each retry). The RunObject loads rows, calls these, writes what they
// return in one transactionSync and only then dispatches operations (see run-object.ts).
import type { ToolSource, ToolSpec } from "../tools/spec.ts";
import {
  admitTurn,
  pastDeadline,
  type BudgetCode,
  type Budgets,
  type JoinedTurn,
  type Usage,
} from "./budget.ts";
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { refusal, RUN_TEXT, type Envelope } from "./envelope.ts";
import { admitCall, type GateRefusal, type ProposedCall } from "./gate.ts";
import { freezeCall, idempotencyKeyFor } from "./identity.ts";
import type { TraceEvent } from "./operation/index.ts";
import { checkScopes } from "./policy.ts";
import { err, ok, type Result } from "./result.ts";

import type { FrozenInput } from "./identity.ts";
export type { FrozenInput };

export type RunState = {
  runId: string;
  tenantId: string;
  user: { id: string; scopes: string[] };
  tools: Record<string, ToolSource>;
  /** Content hash of `tools`: keys the compiled-tool cache, so a re-registered tool is never a stale hit. */
  toolsHash: string;
  context: Record<string, unknown>;
  budgets: Budgets;
  createdAtMs: number;
  expiresAtMs: number;
  cancelledAtMs: number | null;
};

export type CallRef = { id: string; name: string };
export type Submission = {
  operationId: string;
  idempotencyKey: string;
  input: FrozenInput;
  source: ToolSource;
  cost: number;
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

export type GateVerdict = { call: CallRef } & (
  { refused: GateRefusal } | { spec: ToolSpec; input: Record<string, unknown> }
);

export function gateTurn(
  run: RunState,
  offered: ReadonlyMap<string, ToolSpec>,
  calls: readonly ProposedCall[],
): GateVerdict[] {
  return calls.map((proposed) => {
    const call = { id: proposed.id, name: proposed.name };
    const admitted = admitCall(proposed, offered, run.context, run.user.scopes);
    return admitted.ok ? { call, ...admitted.value } : { call, refused: admitted.error };
  });
}

/** Names the gate refused as not offered: only these need asking whether the tenant knows them. */
export const unofferedNames = (verdicts: readonly GateVerdict[]): string[] => [
  ...new Set(
    verdicts.flatMap((v) =>
      "refused" in v && v.refused.code === "tool_not_allowed" ? [v.call.name] : [],
    ),
  ),
];

/**
 * Freezes the admitted calls; a refusal becomes its envelope (`unknown_tool` for names the tenant
 * does not know). `keySecret`: the deployment's key material for upstream idempotency keys.
 */
export async function freezeTurn(
  run: RunState,
  verdicts: readonly GateVerdict[],
  registered: ReadonlySet<string>,
  keySecret: Uint8Array<ArrayBuffer>,
): Promise<TurnCall[]> {
  return Promise.all(
    verdicts.map(async (verdict): Promise<TurnCall> => {
      if ("refused" in verdict) {
        const id = `op_${(await sha256Hex(canonicalJson([run.tenantId, run.runId, "refused", verdict.call.id]))).slice(0, 32)}`;
        const unknown =
          verdict.refused.code === "tool_not_allowed" && !registered.has(verdict.call.name);
        const fixed = unknown
          ? refusal("rejected", id, "unknown_tool", RUN_TEXT.unknownTool(verdict.call.name))
          : refusal("rejected", id, verdict.refused.code, verdict.refused.message);
        return { call: verdict.call, fixed };
      }
      const { spec, input } = verdict;
      const frozen = await freezeCall({
        tenantId: run.tenantId,
        runId: run.runId,
        tool: spec.name,
        risk: spec.risk,
        scope: spec.operationScope,
        operationKey: spec.operationKey,
        input,
        callId: verdict.call.id,
      });
      const submit: Submission = {
        operationId: frozen.operationId,
        idempotencyKey: await idempotencyKeyFor(frozen.operationId, keySecret),
        input: { value: input, canonical: frozen.canonicalInput, hash: frozen.inputHash },
        source: run.tools[verdict.call.name]!,
        cost: spec.cost,
      };
      return { call: verdict.call, submit, closed: null };
    }),
  );
}

/**
 * One model response whose calls an SDK posts separately (one tool execution each) under one turn
 * key: it is one model turn. Its first post counts the turn against max_turns and records the
 * verdict; later posts with other call ids join it (no new turn, the same verdict). The model's
 * usage is charged once per key: by the first post that carries it; a later post may repeat the
 * same usage, and other usage for that key is a conflict (one response has one usage). The key is
 * the agent's to choose, so it holds at most what one post may: MAX_CALLS_PER_TURN calls over all
 * its posts (`calls`); a post past that is a conflict, else one key would be every turn's.
 */
export type TurnGroup = {
  key: string;
  turnStop: BudgetCode | null;
  usageHash: string | null;
  calls: number;
};
export type GroupAdmission = { joined: JoinedTurn | null; chargeModel: boolean };

/** `postCalls`: the calls of this post; `maxCalls`: what one model response may hold (MAX_CALLS_PER_TURN). */
export function admitToGroup(
  existing: TurnGroup | null,
  usageHash: string | null,
  postCalls: number,
  maxCalls: number,
): Result<GroupAdmission, { code: "turn_conflict"; detail: string }> {
  if (!existing) return ok({ joined: null, chargeModel: true });
  if (existing.calls + postCalls > maxCalls)
    return err({
      code: "turn_conflict",
      detail: `turn_key ${JSON.stringify(existing.key)} already holds ${existing.calls} calls, and one model response has at most ${maxCalls}; post the next model response's calls under a new turn_key`,
    });
  if (existing.usageHash !== null && usageHash !== null && existing.usageHash !== usageHash)
    return err({
      code: "turn_conflict",
      detail: `turn_key ${JSON.stringify(existing.key)} already carries other model usage; one model response has one usage (post it once, or the same usage with every call)`,
    });
  return ok({
    joined: { turnStop: existing.turnStop },
    chargeModel: existing.usageHash === null && usageHash !== null,
  });
}

export type TurnPlan = {
  record: TurnRecord;
  usage: Usage;
  dispatch: Submission[];
  /** The group row to store (its calls counted, its usage charged if now); null without a turn key. */
  group: TurnGroup | null;
  /** The run admitted no new turn here (cancelled, or its turn budget or deadline spent). */
  runStopped: boolean;
  /** Operations of refused calls not yet peeked: non-empty means "peek these, then plan again". */
  unpeeked: string[];
};

/**
 * Admits a frozen turn against the run's state and usage: a cancelled run refuses every call; else
 * the turn and call budgets decide in call order, reserving each admitted call's cost. The usage
 * returned counts this turn; `dispatch` is what may be sent once the record is durable.
 * `recorded`: operations known to be recorded with these very inputs. A call of one can never
 * execute, so it reserves nothing (and its settlement has nothing to refund); it still counts as a
 * tool call and is still checked at its full cost, so a verdict never depends on what the run
 * happens to remember. Every other call, a concurrent new one included, reserves its full cost.
 * `peeked`: what the operations themselves said (read-only, never created) for calls a budget or a
 * cancel refuses: the input hash of the existing (or pruned) operation, null when there is none or
 * it could not be asked. A refused call whose operation exists with this very input is a replay,
 * not a new execution: it is dispatched (it can only read the stored outcome), free and uncounted,
 * whatever the budgets or the cancel say. A refused call not yet peeked is listed in `unpeeked`;
 * such a plan must not be committed (the shell peeks those and plans again).
 */
export function planTurn(
  run: RunState,
  usage: Usage,
  identity: TurnIdentity,
  frozen: readonly TurnCall[],
  proposedModelCost: number,
  nowMs: number,
  group: {
    key: string;
    existing: TurnGroup | null;
    usageHash: string | null;
    admission: GroupAdmission;
  } | null = null,
  recorded: ReadonlySet<string> = new Set(),
  peeked: ReadonlyMap<string, string | null> = new Map(),
): TurnPlan {
  const cancelled = run.cancelledAtMs !== null;
  const unpeeked: string[] = [];
  /** The call as a replay of its existing operation, or null: then it is refused (after a peek). */
  const replay = (stored: Extract<TurnCall, { submit: Submission }>): TurnCall | null => {
    const { operationId, input } = stored.submit;
    if (!peeked.has(operationId)) unpeeked.push(operationId);
    return peeked.get(operationId) === input.hash
      ? { ...stored, submit: { ...stored.submit, cost: 0 } }
      : null;
  };
  const modelCost = group && !group.admission.chargeModel ? 0 : proposedModelCost;
  const costs = frozen.map((stored) => ("submit" in stored ? stored.submit.cost : null));
  const admission = admitTurn(
    run.budgets,
    { ...usage, cost: usage.cost + modelCost },
    costs,
    run.createdAtMs,
    nowMs,
    group?.admission.joined ?? null,
  );
  let unreserved = 0;
  const calls = frozen.map((stored, index): TurnCall => {
    if (!("submit" in stored)) return stored;
    const operationId = stored.submit.operationId;
    if (cancelled)
      return (
        replay(stored) ?? {
          call: stored.call,
          fixed: refusal("cancelled", operationId, "cancelled", RUN_TEXT.runCancelled),
        }
      );
    const verdict = admission.verdicts[index];
    if (verdict)
      return (
        replay(stored) ?? {
          call: stored.call,
          fixed: refusal("budget_exhausted", operationId, verdict.code, verdict.message),
        }
      );
    if (!recorded.has(operationId)) return stored;
    unreserved += stored.submit.cost;
    return { ...stored, submit: { ...stored.submit, cost: 0 } };
  });
  const dispatch = calls.flatMap((stored) => ("submit" in stored ? [stored.submit] : []));
  const record: TurnRecord = {
    id: identity.id,
    contentHash: identity.contentHash,
    // A post that joins a model turn already counted carries that turn's number.
    seq: group?.admission.joined ? usage.turns : usage.turns + 1,
    calls,
    reservedCost: dispatch.reduce((sum, submit) => sum + submit.cost, 0),
    settledCost: null,
    modelCost: cancelled ? 0 : modelCost,
    createdAtMs: nowMs,
  };
  const joined = group?.admission.joined ?? null;
  const groupRow: TurnGroup | null = !group
    ? null
    : !group.existing
      ? {
          key: group.key,
          turnStop: admission.turnStop?.code ?? null,
          usageHash: group.usageHash,
          calls: frozen.length,
        }
      : {
          ...group.existing,
          usageHash: group.admission.chargeModel ? group.usageHash : group.existing.usageHash,
          calls: group.existing.calls + frozen.length,
        };
  return {
    record,
    usage: cancelled
      ? { ...usage, turns: usage.turns + (joined ? 0 : 1) }
      : { ...admission.usage, cost: admission.usage.cost - unreserved },
    dispatch,
    group: groupRow,
    runStopped: cancelled || admission.turnStop !== null,
    unpeeked,
  };
}

/** What the run learned from a call's operation while settling the turn. */
export type CallObservation =
  /** `terminal`: the envelope is the operation's recorded outcome (it will never change). */
  | { kind: "reply"; envelope: Envelope; settled: boolean; terminal: boolean; executedBy: string }
  /** The operation settled long ago (as `status`) and was pruned (retention): it is not run again. */
  | { kind: "pruned"; prunedAt: string; status: string }
  /** The operation refused to start: its stored tool does not compile (it never ran). */
  | { kind: "invalid_tool" }
  /** The operation could not be asked (RPC failure): still pending, ask again on the next poll. */
  | { kind: "unavailable" };

export type TurnResult = { call: CallRef; envelope: Envelope };
export type Settlement = {
  status: "settled" | "pending";
  results: TurnResult[];
  spent: number;
  refund: number;
  /** First settlement whose accounting could still change later: store `spent` now (refund or not), so it is final. */
  finalize: boolean;
};

/**
 * The turn's answer from its calls' observations (index-aligned; ignored for fixed or closed calls).
 * Once every call is settled the reservation settles to what was spent: only a call that executed
 * its operation pays (a replay of another call's operation, a conflict, or a cancel before any
 * attempt does not). Closed and unrunnable calls keep their reservation: toolgate cannot prove
 * they never ran, and a budget may over-count but never under-count. A pruned call keeps it too:
 * retention removed the record of who executed it, and pruning must never give budget back.
 * The first settlement is final: `finalize` stores it (compare-and-set on the settled cost), so
 * `refund` applies at most once and a later poll never settles it again. One case is left
 * unstored, the common new write (one row less on its path): nothing refunded and every call
 * answered by a recorded outcome. Each call then counted its full cost, and what later polls can
 * see of it (the same recorded outcome, pruned, closed) counts its full cost again: the same sum.
 */
export function settleTurn(
  record: TurnRecord,
  observed: ReadonlyArray<CallObservation | null>,
): Settlement {
  let settled = true;
  let final = true;
  let spent = 0;
  const results = record.calls.map((stored, index): TurnResult => {
    if ("fixed" in stored) return { call: stored.call, envelope: stored.fixed };
    const { operationId, cost } = stored.submit;
    if (stored.closed) {
      spent += cost;
      return { call: stored.call, envelope: stored.closed };
    }
    const seen = observed[index] ?? { kind: "unavailable" };
    switch (seen.kind) {
      case "invalid_tool":
        spent += cost;
        final = false; // the operation may still be created later (the deployment fixed)
        return {
          call: stored.call,
          envelope: refusal("failed", operationId, "permanent_failure", RUN_TEXT.toolUnavailable),
        };
      case "pruned":
        spent += cost;
        return {
          call: stored.call,
          envelope: refusal(
            "rejected",
            operationId,
            "operation_pruned",
            RUN_TEXT.pruned(seen.prunedAt, seen.status),
          ),
        };
      case "unavailable":
        settled = false;
        return {
          call: stored.call,
          envelope: refusal("pending", operationId, "executing", RUN_TEXT.toolBusy),
        };
      case "reply":
        settled &&= seen.settled;
        final &&= seen.terminal;
        if (executedHere(seen.envelope, seen.executedBy, stored.call.id)) spent += cost;
        return { call: stored.call, envelope: seen.envelope };
    }
  });
  const first = settled && record.settledCost === null && record.reservedCost > 0;
  const refund = first ? record.reservedCost - spent : 0;
  const finalize = first && (refund !== 0 || !final);
  return { status: settled ? "settled" : "pending", results, spent, refund, finalize };
}

/**
 * The operations whose recorded outcome this turn response delivers (their `reported` event): the
 * call is still open in the turn as stored now (a closed call says cancelled instead) and its
 * operation answered with its terminal envelope.
 */
export function reportedOperations(
  record: TurnRecord,
  observed: ReadonlyArray<CallObservation | null>,
): string[] {
  return record.calls.flatMap((stored, index) => {
    if (!("submit" in stored) || stored.closed) return [];
    const seen = observed[index];
    return seen?.kind === "reply" && seen.terminal ? [stored.submit.operationId] : [];
  });
}

function executedHere(envelope: Envelope, executedBy: string, callId: string): boolean {
  if (executedBy !== callId) return false;
  if (envelope.status === "cancelled") return false;
  return !(envelope.status === "rejected" && envelope.code === "idempotency_conflict");
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

/** What a cancel learned about an operation a call points at: `absent` when it does not exist yet or could not be asked. */
export type Standing =
  { kind: "recorded" } | { kind: "open"; runId: string; inputHash: string } | { kind: "absent" };
export type ClosePlan = { close: Set<string>; cancel: Set<string> };

/**
 * What a cancel of this run (all its calls, or `only` one operation) does. A run cancels only
 * operations it created: another run's operation (a tenant-scoped key shared across runs) is never
 * cancelled from here. Its calls that joined it (identical input) are only closed; a call it
 * refused as a conflict keeps that answer. An operation that is absent is cancelled all the same:
 * the operation keeps a tombstone bound to this run, or refuses if another run created it.
 */
export function planClose(
  runId: string,
  turns: readonly TurnRecord[],
  standing: ReadonlyMap<string, Standing>,
  only: string | null,
): ClosePlan {
  const close = new Set<string>();
  const cancel = new Set<string>();
  const ours = (seen: Standing | undefined) =>
    seen?.kind === "absent" || (seen?.kind === "open" && seen.runId === runId);
  for (const turn of turns)
    for (const stored of turn.calls) {
      if (!("submit" in stored) || stored.closed !== null) continue;
      const { operationId, input } = stored.submit;
      if (only !== null && operationId !== only) continue;
      const seen = standing.get(operationId);
      if (ours(seen)) {
        close.add(operationId);
        cancel.add(operationId);
      } else if (seen?.kind === "open" && seen.inputHash === input.hash) close.add(operationId);
    }
  if (only !== null && ours(standing.get(only))) cancel.add(only);
  return { close, cancel };
}

/**
 * Closes, in one step, every open call of the turn whose operation is in `unsettled` (not yet
 * recorded, or never created): from now on the turn says cancelled, and a late result stays on the
 * operation. Null when nothing changed.
 */
export function closeCalls(record: TurnRecord, unsettled: ReadonlySet<string>): TurnRecord | null {
  let changed = false;
  const calls = record.calls.map((stored): TurnCall => {
    if (
      !("submit" in stored) ||
      stored.closed !== null ||
      !unsettled.has(stored.submit.operationId)
    )
      return stored;
    changed = true;
    const id = stored.submit.operationId;
    return {
      ...stored,
      closed: refusal("cancelled", id, "cancelled", RUN_TEXT.closedWhileRunning(id)),
    };
  });
  return changed ? { ...record, calls } : null;
}

/**
 * Asked by an operation before each retry or resend. The same checks as the gate (`admitCall`):
 * the tool must still be offered and the user must hold its scopes (`checkScopes`, one function
 * for both); plus the run-level stops (cancelled, deadline).
 */
export function mayExecute(
  run: RunState | null,
  offered: ReadonlyMap<string, ToolSpec>,
  tool: string,
  nowMs: number,
): Result<true, Denial> {
  if (!run || run.cancelledAtMs !== null)
    return err({ status: "cancelled", code: "cancelled", message: RUN_TEXT.cancelledBeforeRetry });
  if (pastDeadline(run.budgets, run.createdAtMs, nowMs))
    return err({
      status: "budget_exhausted",
      code: "deadline",
      message: RUN_TEXT.deadlineBeforeRetry,
    });
  const spec = offered.get(tool);
  if (!spec)
    return err({
      status: "rejected",
      code: "tool_not_allowed",
      message: RUN_TEXT.withdrawnBeforeRetry(tool),
    });
  const scopes = checkScopes(spec.name, spec.requiresScopes, run.user.scopes);
  return scopes.ok
    ? ok(true)
    : err({ status: "rejected", code: scopes.error.code, message: scopes.error.message });
}

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
