// Retry timing: capped exponential backoff with full jitter, seeded by (operation id, attempt) so
// a replay computes the same delay; Retry-After honoured but clamped to the cap; attempt and
// elapsed-time budgets. Pure: the caller passes the clock reading.
/** `minDelayMs` is a floor under the jitter (default 0: pure full jitter). */
export type RetryPolicy = {
  maxAttempts: number;
  minDelayMs: number;
  initialDelayMs: number;
  maxDelayMs: number;
  maxElapsedMs: number;
};

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 4,
  minDelayMs: 0,
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  maxElapsedMs: 300_000,
};

/** Delay before attempt `attempt + 1`, after attempt `attempt` (1-based) failed retryably. */
export function nextDelayMs(
  policy: RetryPolicy,
  operationId: string,
  attempt: number,
  retryAfterMs: number | null,
): number {
  const ceiling = Math.min(
    policy.maxDelayMs,
    policy.initialDelayMs * 2 ** Math.max(0, attempt - 1),
  );
  const floor = Math.min(policy.minDelayMs, ceiling);
  const jittered = floor + Math.floor(seededUnit(`${operationId}:${attempt}`) * (ceiling - floor));
  if (retryAfterMs === null) return jittered;
  return Math.min(policy.maxDelayMs, Math.max(jittered, retryAfterMs));
}

export type RetryPlan =
  | { kind: "retry"; delayMs: number; dueAtMs: number }
  | { kind: "exhausted"; budget: "attempts" | "elapsed" };

export function planRetry(args: {
  policy: RetryPolicy;
  operationId: string;
  attempt: number;
  firstAttemptAtMs: number;
  nowMs: number;
  retryAfterMs: number | null;
}): RetryPlan {
  if (args.attempt >= args.policy.maxAttempts) return { kind: "exhausted", budget: "attempts" };
  const delayMs = nextDelayMs(args.policy, args.operationId, args.attempt, args.retryAfterMs);
  const dueAtMs = args.nowMs + delayMs;
  if (dueAtMs - args.firstAttemptAtMs > args.policy.maxElapsedMs)
    return { kind: "exhausted", budget: "elapsed" };
  return { kind: "retry", delayMs, dueAtMs };
}

/** Retry-After is delta-seconds or an HTTP date (RFC 9110 §10.2.3); anything else is ignored. */
export function parseRetryAfterMs(header: string | null, nowMs: number): number | null {
  if (header === null) return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const dateMs = Date.parse(trimmed);
  return Number.isNaN(dateMs) ? null : Math.max(0, dateMs - nowMs);
}

/** A uniform number in [0, 1) from a string seed: FNV-1a to 32 bits, then one mulberry32 step. */
export function seededUnit(seed: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) {
    hash ^= seed.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  let t = (hash + 0x6d2b79f5) | 0;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
