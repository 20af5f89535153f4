// Retry timing: full jitter within bounds, deterministic per (operation, attempt), Retry-After
// honoured and clamped, attempt and elapsed budgets, Retry-After parsing.
import { describe, expect, it } from "vitest";
import {
  nextDelayMs,
  parseRetryAfterMs,
  planRetry,
  seededUnit,
  type RetryPolicy,
} from "../../src/domain/retry.ts";

const policy: RetryPolicy = {
  maxAttempts: 5,
  minDelayMs: 0,
  initialDelayMs: 500,
  maxDelayMs: 8_000,
  maxElapsedMs: 60_000,
};

describe("nextDelayMs", () => {
  it("stays within [min, min(max, initial·2^(attempt-1))] for many operations", () => {
    for (let op = 0; op < 200; op++) {
      for (let attempt = 1; attempt <= 6; attempt++) {
        const delay = nextDelayMs(policy, `op_${op}`, attempt, null);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(Math.min(8_000, 500 * 2 ** (attempt - 1)));
      }
    }
  });

  it("is deterministic per (operation, attempt) and spreads across operations", () => {
    expect(nextDelayMs(policy, "op_a", 3, null)).toBe(nextDelayMs(policy, "op_a", 3, null));
    const spread = new Set(
      Array.from({ length: 50 }, (_, i) => nextDelayMs(policy, `op_${i}`, 4, null)),
    );
    expect(spread.size).toBeGreaterThan(40);
  });

  it("respects the floor under the jitter", () => {
    const floored = { ...policy, minDelayMs: 1_000 };
    for (let i = 0; i < 100; i++)
      expect(nextDelayMs(floored, `op_${i}`, 3, null)).toBeGreaterThanOrEqual(1_000);
  });

  it("honours Retry-After, clamped to the cap", () => {
    expect(nextDelayMs(policy, "op_a", 1, 3_000)).toBe(3_000);
    expect(nextDelayMs(policy, "op_a", 1, 3_600_000)).toBe(8_000);
    expect(nextDelayMs(policy, "op_a", 4, 0)).toBe(nextDelayMs(policy, "op_a", 4, null));
  });
});

describe("planRetry", () => {
  const base = { policy, operationId: "op_a", firstAttemptAtMs: 0, retryAfterMs: null };
  it("schedules a retry at now + delay", () => {
    expect(planRetry({ ...base, attempt: 1, nowMs: 100 })).toEqual({
      kind: "retry",
      delayMs: nextDelayMs(policy, "op_a", 1, null),
      dueAtMs: 100 + nextDelayMs(policy, "op_a", 1, null),
    });
  });
  it("is exhausted by attempts", () => {
    expect(planRetry({ ...base, attempt: 5, nowMs: 100 })).toEqual({
      kind: "exhausted",
      budget: "attempts",
    });
  });
  it("is exhausted by elapsed time", () => {
    expect(planRetry({ ...base, attempt: 1, nowMs: 59_900, retryAfterMs: 5_000 })).toEqual({
      kind: "exhausted",
      budget: "elapsed",
    });
  });
});

describe("parseRetryAfterMs", () => {
  const now = Date.parse("2026-12-02T12:00:00Z");
  it.each([
    ["120", 120_000],
    ["0", 0],
    ["Wed, 02 Dec 2026 12:00:30 GMT", 30_000],
    ["Wed, 02 Dec 2026 11:00:00 GMT", 0],
    ["soon", null],
    [null, null],
  ])("%s → %s", (header, expected) => {
    expect(parseRetryAfterMs(header, now)).toBe(expected);
  });
});

it("seededUnit is in [0, 1)", () => {
  for (let i = 0; i < 1000; i++) {
    const u = seededUnit(`s${i}`);
    expect(u).toBeGreaterThanOrEqual(0);
    expect(u).toBeLessThan(1);
  }
});
