// Windowed limits across runs (issue 21): the arithmetic of one (tenant, limit, subject) — a
// rolling window over reservations keyed by operation id. A reservation is `held` from before the
// first attempt; it stays held when the operation succeeds or its outcome is unknown and becomes
// `released` only when nothing was applied. Reserving again under the same operation id changes
// nothing (re-posts, re-proposals, retries and a crash between reserve and commit count once).
// Pure: rows and the clock in, the decision and the rows to write out.

export type LimitOver = "refuse" | "approve";
/** What one operation claims of one limit (frozen at the gate, carried to the operation). */
export type LimitClaim = {
  /** The limit's name (shared by every tool that names it) and its subject's value ("cus_1", a user id, "tenant"). */
  name: string;
  subject: string;
  amount: number;
  max: number;
  windowMs: number;
  over: LimitOver;
};
export type Reservation = {
  operationId: string;
  amount: number;
  atMs: number;
  state: "held" | "released";
};
export type Usage = {
  used: number;
  remaining: number;
  /** Held reservations inside the window. */
  held: number;
  /** When the oldest held reservation in the window leaves it (null: none held). */
  nextFreeAtMs: number | null;
};
export type ReserveDecision =
  /** `already`: this operation held it before (nothing written); `over`: reserved past max (over: "approve"). */
  | { kind: "reserved"; row: Reservation; already: boolean; over: boolean; usage: Usage }
  /** Not reserved: `freesAtMs` is when enough of the window has passed for this amount (null: never, amount > max). */
  | { kind: "refused"; usage: Usage; freesAtMs: number | null };

const WINDOW_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
export const MAX_WINDOW_MS = 31 * 86_400_000;

/** "24h", "90m", "7d", "30s" → milliseconds (null: not a window of 1 s … 31 d). */
export function parseWindow(text: string): number | null {
  const match = /^([1-9][0-9]{0,6})(s|m|h|d)$/.exec(text);
  if (!match) return null;
  const ms = Number(match[1]) * WINDOW_UNITS[match[2]!]!;
  return ms <= MAX_WINDOW_MS ? ms : null;
}

/** A reservation counts while held and `now - windowMs < atMs` (the window is (now − window, now]). */
const inWindow = (row: Reservation, windowMs: number, nowMs: number) =>
  row.state === "held" && row.atMs > nowMs - windowMs;

export function usageOf(
  rows: readonly Reservation[],
  max: number,
  windowMs: number,
  nowMs: number,
): Usage {
  const live = rows.filter((row) => inWindow(row, windowMs, nowMs));
  const used = live.reduce((sum, row) => sum + row.amount, 0);
  const oldest = live.reduce((min, row) => Math.min(min, row.atMs), Infinity);
  return {
    used,
    remaining: Math.max(0, max - used),
    held: live.length,
    nextFreeAtMs: live.length === 0 ? null : oldest + windowMs,
  };
}

/**
 * When `amount` first fits: the oldest held reservations leave the window one by one (at their
 * time + window); the first moment the rest plus `amount` is within `max`. Null if it never fits.
 */
export function freesAtMs(
  rows: readonly Reservation[],
  amount: number,
  max: number,
  windowMs: number,
  nowMs: number,
): number | null {
  if (amount > max) return null;
  const live = rows.filter((row) => inWindow(row, windowMs, nowMs)).sort((a, b) => a.atMs - b.atMs);
  let used = live.reduce((sum, row) => sum + row.amount, 0);
  if (used + amount <= max) return nowMs;
  for (const row of live) {
    used -= row.amount;
    if (used + amount <= max) return row.atMs + windowMs;
  }
  return null;
}

export function decideReserve(
  rows: readonly Reservation[],
  claim: { operationId: string; amount: number; max: number; windowMs: number; over: LimitOver },
  nowMs: number,
): ReserveDecision {
  const mine = rows.find((row) => row.operationId === claim.operationId);
  const usage = usageOf(rows, claim.max, claim.windowMs, nowMs);
  // Held already (a re-post, a re-proposal, a start that crashed after reserving): counted once.
  // Its time is kept, so a repeat never moves it later in the window.
  if (mine?.state === "held")
    return { kind: "reserved", row: mine, already: true, over: false, usage };
  const over = usage.used + claim.amount > claim.max;
  if (over && claim.over === "refuse")
    return {
      kind: "refused",
      usage,
      freesAtMs: freesAtMs(rows, claim.amount, claim.max, claim.windowMs, nowMs),
    };
  const row: Reservation = {
    operationId: claim.operationId,
    amount: claim.amount,
    atMs: nowMs,
    state: "held",
  };
  const others = rows.filter((r) => r.operationId !== claim.operationId);
  return {
    kind: "reserved",
    row,
    already: false,
    over,
    usage: usageOf([...others, row], claim.max, claim.windowMs, nowMs),
  };
}

/** Released only when nothing was applied; releasing twice, or what was never held, changes nothing. */
export function decideRelease(
  rows: readonly Reservation[],
  operationId: string,
): Reservation | null {
  const mine = rows.find((row) => row.operationId === operationId);
  return mine?.state === "held" ? { ...mine, state: "released" } : null;
}

/** Held reservations older than the window never count again: the object may forget them. */
export const expiredBefore = (windowMs: number, nowMs: number) => nowMs - windowMs;
