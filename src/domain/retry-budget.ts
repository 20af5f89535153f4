// Retry budget per (tenant, upstream host) (issue 11, "retries are selfish"): retries may add at
// most `ratio` (10%) of the recent first attempts, plus a small floor so a quiet host can still be
// retried, counted over a sliding window of one-second buckets. First attempts are never asked:
// they are only counted (off the first-attempt path). A retry over budget is not dropped: it waits
// until the window has room (`waitMs`), and the caller traces the deferral with its reason.
// Pure: plain data and an injected clock (as Finagle's RetryBudget and gRPC's retry throttling).
export type RetryBudgetConfig = {
  /** Retries allowed per first attempt in the window (0.1: one retry per ten first attempts). */
  ratio: number;
  /** Retries always allowed per window, however quiet the host (keeps a lone operation alive). */
  minRetriesPerWindow: number;
  /** Length of the sliding window, in whole seconds (one bucket per second). */
  windowSeconds: number;
};
export const DEFAULT_RETRY_BUDGET: RetryBudgetConfig = {
  ratio: 0.1,
  minRetriesPerWindow: 10,
  windowSeconds: 10,
};

/** One bucket per second of the window: first attempts and retries started in it. */
type Bucket = { second: number; firsts: number; retries: number };
export type RetryBudgetState = { buckets: Bucket[] };
export const EMPTY_BUDGET: RetryBudgetState = { buckets: [] };

export type RetryVerdict =
  { ok: true } | { ok: false; waitMs: number; reason: "retry_budget"; detail: string };

const secondOf = (nowMs: number) => Math.floor(nowMs / 1000);

/** The buckets still inside the window at `nowMs` (oldest first). */
function live(state: RetryBudgetState, config: RetryBudgetConfig, nowMs: number): Bucket[] {
  const oldest = secondOf(nowMs) - config.windowSeconds + 1;
  return state.buckets.filter((bucket) => bucket.second >= oldest);
}

function bump(
  buckets: Bucket[],
  nowMs: number,
  field: "firsts" | "retries",
  by: number,
): RetryBudgetState {
  const second = secondOf(nowMs);
  const last = buckets[buckets.length - 1];
  const next =
    last && last.second === second
      ? [...buckets.slice(0, -1), { ...last, [field]: last[field] + by }]
      : [...buckets, { second, firsts: 0, retries: 0, [field]: by }];
  return { buckets: next };
}

/** Counts `count` first attempts sent at `nowMs` (reported in batches; never refused). */
export function noteFirstAttempts(
  state: RetryBudgetState,
  count: number,
  nowMs: number,
  config: RetryBudgetConfig = DEFAULT_RETRY_BUDGET,
): RetryBudgetState {
  return count <= 0 ? state : bump(live(state, config, nowMs), nowMs, "firsts", count);
}

/** Retries the window allows now: the floor plus `ratio` of its first attempts. */
export function allowance(
  state: RetryBudgetState,
  nowMs: number,
  config: RetryBudgetConfig = DEFAULT_RETRY_BUDGET,
): number {
  const firsts = live(state, config, nowMs).reduce((sum, b) => sum + b.firsts, 0);
  return config.minRetriesPerWindow + Math.floor(config.ratio * firsts);
}

/**
 * Asks to spend one retry at `nowMs`. Granted (and counted) while the window's retries are under
 * its allowance; otherwise the retry waits until the oldest retries leave the window, the earliest
 * moment the budget can have room without new first attempts.
 */
export function spendRetry(
  state: RetryBudgetState,
  nowMs: number,
  config: RetryBudgetConfig = DEFAULT_RETRY_BUDGET,
): { state: RetryBudgetState; verdict: RetryVerdict } {
  const buckets = live(state, config, nowMs);
  const spent = buckets.reduce((sum, b) => sum + b.retries, 0);
  const allowed = allowance({ buckets }, nowMs, config);
  if (spent < allowed) return { state: bump(buckets, nowMs, "retries", 1), verdict: { ok: true } };
  const oldest = buckets.find((b) => b.retries > 0)!;
  const waitMs = (oldest.second + config.windowSeconds) * 1000 - nowMs;
  return {
    state: { buckets },
    verdict: {
      ok: false,
      waitMs,
      reason: "retry_budget",
      detail: `the upstream host had ${spent} retries in the last ${config.windowSeconds} s (budget ${allowed}: ${config.minRetriesPerWindow} + ${Math.round(config.ratio * 100)}% of first attempts); this retry waits for room`,
    },
  };
}

/** The budget's key: one per tenant and upstream host (scheme and port included, path not). */
export const budgetKey = (tenantId: string, url: string): string =>
  `${tenantId}:${new URL(url).origin}`;
