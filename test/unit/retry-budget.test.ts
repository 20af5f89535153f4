import { describe, expect, it } from "vitest";
import {
  allowance,
  budgetKey,
  EMPTY_BUDGET,
  noteFirstAttempts,
  spendRetry,
  type RetryBudgetConfig,
  type RetryBudgetState,
} from "../../src/domain/retry-budget.ts";

const CONFIG: RetryBudgetConfig = { ratio: 0.1, minRetriesPerWindow: 2, windowSeconds: 10 };
const T0 = 1_000_000;

function spendAll(state: RetryBudgetState, times: number, nowMs: number) {
  const verdicts = [];
  for (let i = 0; i < times; i++) {
    const step = spendRetry(state, nowMs, CONFIG);
    state = step.state;
    verdicts.push(step.verdict);
  }
  return { state, verdicts };
}

describe("retry budget per tenant and host", () => {
  it("a quiet host still gets its floor of retries, then retries wait", () => {
    const { verdicts } = spendAll(EMPTY_BUDGET, 3, T0);
    expect(verdicts.map((v) => v.ok)).toEqual([true, true, false]);
    const refused = verdicts[2]!;
    expect(refused.ok === false && refused.reason).toBe("retry_budget");
    // The first retries (second 1000) leave the window at second 1010: 10 s from now.
    expect(refused.ok === false && refused.waitMs).toBe(10_000);
  });

  it("retries may add 10% of the window's first attempts", () => {
    const busy = noteFirstAttempts(EMPTY_BUDGET, 100, T0, CONFIG);
    expect(allowance(busy, T0, CONFIG)).toBe(2 + 10);
    const { verdicts } = spendAll(busy, 13, T0 + 500);
    expect(verdicts.filter((v) => v.ok)).toHaveLength(12);
    expect(verdicts[12]!.ok).toBe(false);
  });

  it("first attempts and retries age out of the sliding window", () => {
    const busy = noteFirstAttempts(EMPTY_BUDGET, 100, T0, CONFIG);
    const { state } = spendAll(busy, 12, T0);
    expect(spendRetry(state, T0 + 9_999, CONFIG).verdict.ok).toBe(false);
    // Ten seconds on, the old first attempts and retries are gone: only the floor is left, and unspent.
    expect(allowance(state, T0 + 10_000, CONFIG)).toBe(2);
    expect(spendRetry(state, T0 + 10_000, CONFIG).verdict.ok).toBe(true);
  });

  it("a refused retry changes nothing: asking again at once is refused the same way", () => {
    const { state } = spendAll(EMPTY_BUDGET, 2, T0);
    const once = spendRetry(state, T0 + 3_000, CONFIG);
    const twice = spendRetry(once.state, T0 + 3_000, CONFIG);
    expect(twice.verdict).toEqual(once.verdict);
    expect(once.verdict.ok === false && once.verdict.waitMs).toBe(7_000);
  });

  it("keys by tenant and origin: other paths share a budget, other ports and tenants do not", () => {
    expect(budgetKey("ten_a", "https://api.example.com/v1/charges")).toBe(
      budgetKey("ten_a", "https://api.example.com/refunds?x=1"),
    );
    expect(budgetKey("ten_a", "https://api.example.com:8443/v1")).not.toBe(
      budgetKey("ten_a", "https://api.example.com/v1"),
    );
    expect(budgetKey("ten_b", "https://api.example.com/v1")).not.toBe(
      budgetKey("ten_a", "https://api.example.com/v1"),
    );
  });
});

/**
 * The figure: requests sent to a 100%-failing upstream. 20 new operations a second for
 * 30 s, each retrying every second up to 4 attempts. Without a budget every operation sends 4
 * requests; with one, retries stay within 10% of first attempts (plus the floor) per window.
 */
export function outage(withBudget: boolean) {
  const config: RetryBudgetConfig = { ratio: 0.1, minRetriesPerWindow: 10, windowSeconds: 10 };
  let budget = EMPTY_BUDGET;
  const due: Array<{ atMs: number; attempt: number }> = [];
  let firsts = 0;
  let retries = 0;
  let deferred = 0;
  for (let ms = 0; ms < 60_000; ms += 50) {
    if (ms < 30_000 && ms % 1000 === 0) {
      budget = noteFirstAttempts(budget, 20, ms, config);
      firsts += 20;
      for (let i = 0; i < 20; i++) due.push({ atMs: ms + 1000, attempt: 2 });
    }
    for (const retry of due.filter((r) => r.atMs === ms)) {
      due.splice(due.indexOf(retry), 1);
      const step = withBudget
        ? spendRetry(budget, ms, config)
        : { state: budget, verdict: { ok: true as const } };
      budget = step.state;
      if (!step.verdict.ok) {
        deferred += 1;
        // A deferred retry keeps its attempt number; the operation's elapsed budget still ends it.
        const atMs = ms + Math.ceil(step.verdict.waitMs / 50) * 50;
        if (atMs < 60_000) due.push({ atMs, attempt: retry.attempt });
        continue;
      }
      retries += 1;
      if (retry.attempt < 4) due.push({ atMs: ms + 1000, attempt: retry.attempt + 1 });
    }
  }
  return { firsts, retries, deferred, requests: firsts + retries };
}

describe("a 100%-failing upstream", () => {
  it("without a budget every operation sends all its attempts; with one, retries are ≤ ~10%", () => {
    const without = outage(false);
    const withBudget = outage(true);
    expect(without).toMatchObject({ firsts: 600, retries: 1800, requests: 2400 });
    expect(withBudget.firsts).toBe(600);
    // Six 10 s windows over the minute: at most 10 + 10% of that window's first attempts each.
    expect(withBudget.retries).toBeLessThanOrEqual(6 * 10 + 600 * 0.1);
    expect(withBudget.deferred).toBeGreaterThan(0);
  });
});
