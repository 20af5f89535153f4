// Run budgets: whichever of max_turns, max_tool_calls, max_duration_ms or max_cost runs out first
// stops the run. The RunObject derives usage from its turn rows and calls these checks inside one
// synchronous block, so concurrent turns cannot both take the last unit.
import { err, ok, type Result } from "../result.ts";
export type Budgets = {
  max_turns?: number;
  max_tool_calls?: number;
  max_duration_ms?: number;
  max_cost?: number;
};
export type Usage = { turns: number; toolCalls: number; cost: number };
export type BudgetCode = "max_turns" | "max_tool_calls" | "deadline" | "max_cost";
export type BudgetRefusal = { code: BudgetCode; message: string };

const stop = (code: BudgetCode, what: string): BudgetRefusal => ({
  code,
  // True even if an identical earlier call ran (its operation could not be asked): never "not executed".
  message: `This conversation has used up its ${what}, so toolgate did not send this call now. If an identical earlier call already ran, its result stands. Do not retry; tell the user.`,
});

export function checkTurn(
  budgets: Budgets,
  usage: Usage,
  createdAtMs: number,
  nowMs: number,
): BudgetRefusal | null {
  if (budgets.max_duration_ms !== undefined && nowMs - createdAtMs >= budgets.max_duration_ms)
    return stop("deadline", "time budget");
  if (budgets.max_turns !== undefined && usage.turns >= budgets.max_turns)
    return stop("max_turns", "turn budget");
  return null;
}

/** Reserves one call of `cost` units: the usage after it, or the budget that refuses it. */
export function reserveCall(
  budgets: Budgets,
  usage: Usage,
  cost: number,
): Result<Usage, BudgetRefusal> {
  if (budgets.max_tool_calls !== undefined && usage.toolCalls >= budgets.max_tool_calls)
    return err(stop("max_tool_calls", "tool-call budget"));
  if (budgets.max_cost !== undefined && usage.cost + cost > budgets.max_cost)
    return err(stop("max_cost", "cost budget"));
  return ok({ ...usage, toolCalls: usage.toolCalls + 1, cost: usage.cost + cost });
}

/** Deadline check for work that happens later than admission (retries scheduled by alarm). */
export const pastDeadline = (budgets: Budgets, createdAtMs: number, nowMs: number) =>
  budgets.max_duration_ms !== undefined && nowMs - createdAtMs >= budgets.max_duration_ms;

/** `turnStop`: the turn-level verdict the model turn got (null: admitted), for joining calls. */
export type TurnAdmission = {
  verdicts: Array<BudgetRefusal | null>;
  usage: Usage;
  turnStop: BudgetRefusal | null;
};

/**
 * How a post joins a model turn already counted (calls of one model response posted separately,
 * sharing a turn key): it counts no new turn and gets that turn's verdict, except that a deadline
 * passed since then stops it too.
 */
export type JoinedTurn = { turnStop: BudgetCode | null };

export const budgetRefusal = (code: BudgetCode): BudgetRefusal =>
  code === "deadline"
    ? stop("deadline", "time budget")
    : code === "max_turns"
      ? stop("max_turns", "turn budget")
      : code === "max_tool_calls"
        ? stop("max_tool_calls", "tool-call budget")
        : stop("max_cost", "cost budget");

/**
 * Admits one turn: the turn budgets first, then each call's reservation in call order. `costs`
 * holds null for calls the gate already refused (they use no budget). `usage.turns` counts this
 * turn, unless it `joined` a model turn already counted.
 */
export function admitTurn(
  budgets: Budgets,
  usage: Usage,
  costs: Array<number | null>,
  createdAtMs: number,
  nowMs: number,
  joined: JoinedTurn | null = null,
): TurnAdmission {
  const turnStop = joined
    ? joined.turnStop
      ? budgetRefusal(joined.turnStop)
      : pastDeadline(budgets, createdAtMs, nowMs)
        ? budgetRefusal("deadline")
        : null
    : checkTurn(budgets, usage, createdAtMs, nowMs);
  let next: Usage = joined ? { ...usage } : { ...usage, turns: usage.turns + 1 };
  const verdicts = costs.map((cost): BudgetRefusal | null => {
    if (cost === null) return null;
    if (turnStop) return turnStop;
    const reservation = reserveCall(budgets, next, cost);
    if (!reservation.ok) return reservation.error;
    next = reservation.value;
    return null;
  });
  return { verdicts, usage: next, turnStop };
}
