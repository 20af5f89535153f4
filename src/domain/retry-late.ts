// Late settlement (issue 24): a keyed write (or a status lookup) whose attempts ran out while its
// outcome is unknown keeps being settled by toolgate itself, on a sparse schedule, for as long as
// the upstream keeps the idempotency key (the tool's `key_ttl_ms`). Each late try is a resend with
// the same key (or a lookup), so it can never apply the effect twice; once the key's window ends,
// nothing more is sent and a person decides. Pure: the caller passes the clock reading.

/** Stripe keeps idempotency keys for 24 hours: the default window a resend with the same key is safe in. */
export const DEFAULT_KEY_TTL_MS = 24 * 60 * 60_000;
export const MIN_KEY_TTL_MS = 1_000;
export const MAX_KEY_TTL_MS = 30 * 24 * 60 * 60_000;

/**
 * The gaps between late tries, counted from the first attempt: 1 min, 5 min, 30 min, 2 h, then
 * every 6 h (the last gap repeats). An outage of minutes is settled within minutes, one of hours
 * within hours, and a day-long window costs at most seven requests per write.
 */
export const DEFAULT_SETTLE_SCHEDULE_MS: readonly number[] = [
  60_000, 300_000, 1_800_000, 7_200_000, 21_600_000,
];

/** Frozen with an operation's plan (absent in plans frozen before late settlement existed). */
export type LateSettle = { keyTtlMs: number; scheduleMs: readonly number[] };

/** When the key's window ends: the key was first used at the first attempt. */
export const settleUntilMs = (firstAttemptAtMs: number, keyTtlMs: number): number =>
  firstAttemptAtMs + keyTtlMs;

/**
 * The first slot of the schedule strictly after `nowMs`. Slots are anchored at the first attempt
 * (anchor + g1, + g1 + g2, …, the last gap repeating), so the schedule needs no stored counter and a
 * deferral, a restart or a person's resend never shifts it.
 */
export function nextSlotAtMs(
  anchorMs: number,
  nowMs: number,
  scheduleMs: readonly number[],
): number {
  const gaps = scheduleMs.length > 0 ? scheduleMs : DEFAULT_SETTLE_SCHEDULE_MS;
  let atMs = anchorMs;
  for (const gap of gaps) {
    atMs += gap;
    if (atMs > nowMs) return atMs;
  }
  const last = Math.max(1, gaps[gaps.length - 1]!);
  return atMs + Math.ceil((nowMs - atMs + 1) / last) * last;
}

export type LateTry =
  /** Try again at `atMs` (a resend with the same key, or a lookup). */
  | { kind: "try"; atMs: number; untilMs: number }
  /** No try fits in the key's window any more: a person decides. Nothing is sent. */
  | { kind: "window_ended"; untilMs: number };

/**
 * The next late try after `nowMs`, or the end of the window. A try must finish inside the window
 * (`atMs + timeoutMs <= untilMs`): a resend that reaches the upstream after it forgot the key would
 * be a new effect.
 */
export function planLateTry(args: {
  settle: LateSettle;
  firstAttemptAtMs: number;
  timeoutMs: number;
  nowMs: number;
}): LateTry {
  const untilMs = settleUntilMs(args.firstAttemptAtMs, args.settle.keyTtlMs);
  const atMs = nextSlotAtMs(args.firstAttemptAtMs, args.nowMs, args.settle.scheduleMs);
  return atMs + args.timeoutMs <= untilMs
    ? { kind: "try", atMs, untilMs }
    : { kind: "window_ended", untilMs };
}

/** Whether a try starting at `nowMs` still finishes inside the window ending at `untilMs`. */
export const fitsWindow = (nowMs: number, timeoutMs: number, untilMs: number): boolean =>
  nowMs + timeoutMs <= untilMs;
