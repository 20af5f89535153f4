// A turn's admission as pure functions: the gate's verdict per call, freezing (operation ids and
// idempotency keys), calls of one model response posted separately (turn groups), and planTurn:
// budgets in call order with cost reservations, refusals in a cancelled run, and replays of
// operations that already exist (peeked). The shell commits the plan in one transaction and only
// then dispatches (durable/run/admit.ts).
import { admitTurn, type BudgetCode, type JoinedTurn, type Usage } from "./budget.ts";
import { canonicalJson, sha256Hex } from "../canonical-json.ts";
import { refusal, RUN_TEXT } from "../envelope.ts";
import { admitCall, type GateRefusal, type ProposedCall } from "./gate.ts";
import { claimsFor } from "../limit/claims.ts";
import { isShadow, shadowClaims, shadowRefusal } from "./shadow.ts";
import type { LimitClaim } from "../limit/window.ts";
import { freezeCall, idempotencyKeyFor } from "../identity.ts";
import { err, ok, type Result } from "../result.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { CallRef, RunState, Submission, TurnCall, TurnIdentity, TurnRecord } from "./turn.ts";

export type GateVerdict = { call: CallRef } & (
  | { refused: GateRefusal }
  | { spec: ToolSpec; input: Record<string, unknown>; claims: LimitClaim[] }
);

export function gateTurn(
  run: RunState,
  offered: ReadonlyMap<string, ToolSpec>,
  calls: readonly ProposedCall[],
): GateVerdict[] {
  return calls.map((proposed) => {
    const call = { id: proposed.id, name: proposed.name };
    const admitted = admitCall(proposed, offered, run.context, run.user.scopes);
    if (!admitted.ok) return { call, refused: admitted.error };
    // What it claims of each limit across runs (reserved by its operation before the first attempt).
    const { spec, input } = admitted.value;
    const shadow = shadowRefusal(run, spec);
    if (shadow) return { call, refused: shadow };
    const claims = claimsFor(spec.limitsAcrossRuns, input, run.context, run.user.id);
    return claims.ok
      ? { call, spec, input, claims: shadowClaims(run, claims.value) }
      : { call, refused: claims.error };
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
      const { spec, input, claims } = verdict;
      const frozen = await freezeCall({
        tenantId: run.tenantId,
        runId: run.runId,
        tool: spec.name,
        risk: spec.risk,
        scope: spec.operationScope,
        operationKey: spec.operationKey,
        input,
        callId: verdict.call.id,
        shadow: isShadow(run),
      });
      const submit: Submission = {
        operationId: frozen.operationId,
        idempotencyKey: await idempotencyKeyFor(frozen.operationId, keySecret),
        input: { value: input, canonical: frozen.canonicalInput, hash: frozen.inputHash },
        source: run.tools[verdict.call.name]!,
        cost: spec.cost,
        ...(claims.length > 0 ? { claims } : {}),
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
