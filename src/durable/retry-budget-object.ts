// RetryBudgetObject: one per tenant + upstream origin (domain/retry-budget.ts budgetKey). It holds
// the sliding window in memory only: losing it (eviction, restart) merely resets the window, which
// lets retries through, the safe direction for a budget whose job is only to damp an outage. No
// operation ever waits on it for correctness: callers fail open (retry-budget-client.ts).
import { DurableObject } from "cloudflare:workers";
import {
  DEFAULT_RETRY_BUDGET,
  EMPTY_BUDGET,
  noteFirstAttempts,
  spendRetry,
  type RetryBudgetState,
  type RetryVerdict,
} from "../domain/retry-budget.ts";
import { retryBudgetConfig } from "../config.ts";
import type { Env } from "./env.ts";

export class RetryBudgetObject extends DurableObject<Env> {
  private window: RetryBudgetState = EMPTY_BUDGET;
  private readonly config = retryBudgetConfig(this.env) ?? DEFAULT_RETRY_BUDGET;

  /** Counts first attempts sent (reported in batches, never refused). */
  async noteFirsts(count: number, nowMs: number): Promise<void> {
    this.window = noteFirstAttempts(this.window, count, nowMs, this.config);
  }

  /** Asks for one automatic retry at `nowMs`; `firsts`: first attempts not yet reported, counted first. */
  async spend(nowMs: number, firsts = 0): Promise<RetryVerdict> {
    this.window = noteFirstAttempts(this.window, firsts, nowMs, this.config);
    const step = spendRetry(this.window, nowMs, this.config);
    this.window = step.state;
    return step.verdict;
  }
}
