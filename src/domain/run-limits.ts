// What one run may store, whatever its budgets. A spent budget answers each call with an envelope
// in a 200 (DESIGN), and each such answer is a stored turn; these limits refuse the post itself
// (409 run_turn_limit, nothing stored, nothing sent) once a run holds as much as any agent run
// needs, so a runaway or hostile agent cannot grow a run's storage, nor the memory a cancel, a
// trace or the retention pass needs to read it, without bound. Pure.
import type { TurnRecord } from "./turn/turn.ts";

export const RUN_LIMITS = {
  /** Turn rows (each post of a turn key is one): one every 9 s for a run token's 24 h. */
  maxStoredTurns: 10_000,
  /**
   * UTF-8 bytes of the turn rows' calls as stored (arguments included, tool sources excluded:
   * those are stored once per run). Decoded, a run's turns take about three times this in memory,
   * and a cancel or a trace holds all of them: 8 MiB stays well inside an isolate's 128 MB.
   */
  maxStoredBytes: 8 * 1024 * 1024,
  /**
   * Turns the run's budgets or a cancel stopped in full (see `stoppedTurn`). The first ones are
   * answered as usual, so an agent learns its budget is spent; an agent still posting after 16 of
   * them is not reading its results.
   */
  maxStoppedTurns: 16,
  /** toolgate_check_status calls per run (each is answered by an RPC): a few per pending call. */
  maxStatusChecks: 50,
} as const;

/** What a run has stored so far (its usage row). */
export type StoredCounts = { turns: number; bytes: number; stopped: number; checks: number };
export const NO_STORED: StoredCounts = { turns: 0, bytes: 0, stopped: 0, checks: 0 };
export type LimitRefusal = { code: "run_turn_limit"; detail: string };

/** A new turn row of `bytes` (`stopped`: see stoppedTurn) may be stored, or the limit it would pass. */
export function admitStored(
  counts: StoredCounts,
  bytes: number,
  stopped: boolean,
): LimitRefusal | null {
  const full = (what: string): LimitRefusal => ({
    code: "run_turn_limit",
    detail: `this run has stored ${what}; nothing was stored or sent. Start a new run (a re-post of a stored turn is still answered)`,
  });
  if (counts.turns >= RUN_LIMITS.maxStoredTurns)
    return full(`the most turns a run keeps (${RUN_LIMITS.maxStoredTurns})`);
  if (counts.bytes + bytes > RUN_LIMITS.maxStoredBytes)
    return full(`the most call data a run keeps (${RUN_LIMITS.maxStoredBytes} bytes)`);
  if (stopped && counts.stopped >= RUN_LIMITS.maxStoppedTurns)
    return full(
      `${counts.stopped} turns that its budgets or its cancellation refused in full; its budgets are spent`,
    );
  return null;
}

/** The counts once a turn row of `bytes` with `checks` status checks is stored. */
export const countStored = (
  counts: StoredCounts,
  bytes: number,
  stopped: boolean,
  checks: number,
): StoredCounts => ({
  turns: counts.turns + 1,
  bytes: counts.bytes + bytes,
  stopped: counts.stopped + (stopped ? 1 : 0),
  checks: counts.checks + checks,
});

/**
 * A turn that only repeats that the run is stopped: nothing sent, nothing looked up, and the run
 * refused it (its turn budget or deadline, a cancel, or a spent budget on one of its calls). A turn
 * whose calls the gate refused (bad arguments) counts only once the run refuses new turns.
 */
export function stoppedTurn(record: TurnRecord, runStopped: boolean): boolean {
  let byBudget = false;
  for (const stored of record.calls) {
    if (!("fixed" in stored) || stored.fixed.status === "succeeded") return false;
    if (stored.fixed.status === "budget_exhausted" || stored.fixed.status === "cancelled")
      byBudget = true;
  }
  return runStopped || byBudget;
}
