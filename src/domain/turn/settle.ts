// A turn's settlement as a pure function: its answer from what each call's operation said, and the
// reservation settled to what was spent (at most once: `finalize` is a compare-and-set in the
// shell). Plus the operations whose recorded outcome the answer delivers (`reported`).
import { refusal, RUN_TEXT, type Envelope } from "../envelope.ts";
import type { CallRef, TurnRecord } from "./turn.ts";

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
