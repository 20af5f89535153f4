// When a retry the host's retry budget refused (domain/retry-budget.ts) runs instead: at the moment
// the budget expects room, plus 0–1 s of jitter seeded by (operation id, attempt) so that the
// retries one outage deferred together do not all wake in the same instant and refuse each other
// again. The deferral keeps the attempt number and counts against the operation's own elapsed
// budget: past `maxElapsedMs` the retry is exhausted instead (the caller applies the honest
// exhaustion rules). Pure: the caller passes the clock reading.
import { seededUnit, type RetryPolicy } from "./retry.ts";

export const DEFERRAL_JITTER_MS = 1_000;

export type DeferralPlan = { kind: "defer"; dueAtMs: number } | { kind: "exhausted" };

export function planDeferral(args: {
  policy: RetryPolicy;
  operationId: string;
  attempt: number;
  firstAttemptAtMs: number;
  /** When the budget expects room (never before now). */
  untilMs: number;
  nowMs: number;
}): DeferralPlan {
  const jitterMs = Math.floor(
    seededUnit(`${args.operationId}:${args.attempt}:deferred`) * DEFERRAL_JITTER_MS,
  );
  const dueAtMs = Math.max(args.untilMs, args.nowMs) + jitterMs;
  if (dueAtMs - args.firstAttemptAtMs > args.policy.maxElapsedMs) return { kind: "exhausted" };
  return { kind: "defer", dueAtMs };
}

/** Bounds of backoffSinceMs: the first wait, and the longest. */
export const UNAVAILABLE_MIN_MS = 5_000;
export const UNAVAILABLE_MAX_MS = 600_000;

/**
 * How long to wait before trying again when something toolgate itself needs did not answer (the
 * run, the tenant, a failing alarm): as long as it has been failing since `sinceMs`, within
 * 5 s–10 min. Each wait at least doubles the time since `sinceMs`, so it backs off with no counter.
 */
export const backoffSinceMs = (sinceMs: number, nowMs: number): number =>
  Math.min(UNAVAILABLE_MAX_MS, Math.max(UNAVAILABLE_MIN_MS, nowMs - sinceMs));
