// Windowed limits across runs (issue 21): the arithmetic of one (tenant, limit, subject) — a
// rolling window over reservations keyed by operation id. A reservation is `held` from before the
// first attempt; it stays held when the operation succeeds or its outcome is unknown and becomes
// `released` only when nothing was applied. It counts from its reservation until one window after
// its operation was recorded (audit N5). Reserving again under the same operation id changes
// nothing (re-posts, re-proposals, retries and a crash between reserve and commit count once).
// Pure: rows and the clock in, the decision and the rows to write out; also the sweep's schedule.

export type LimitOver = "refuse" | "approve";
/** What one operation claims of one limit (frozen at the gate, carried to the operation). */
export type LimitClaim = {
  /** The limit's name (one definition per tenant) and its subject's key ("context.customer_id:cus_1", "user:u1", "tenant"). */
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
  /**
   * When its operation was recorded, as the limit's sweep learned it from the operation; null
   * until then. A held reservation counts until one window after its operation was recorded — an
   * effect happens at the latest then — so a call held for approval, a lock or retries never ages
   * out of its window unsent (audit N5).
   */
  recordedAtMs: number | null;
};
export type Usage = {
  used: number;
  remaining: number;
  /** Held reservations that count. */
  held: number;
  /**
   * Of those, the ones past one window from their reservation whose operation is not yet known
   * recorded (awaiting approval, a lock, a retry or an unknown outcome): no time frees them.
   */
  waiting: number;
  /** The earliest a counting reservation can leave (null: none held, or only waiting ones). */
  nextFreeAtMs: number | null;
};
/** When enough of a window frees for an amount: at a time (at the earliest), never (amount > max), or only once waiting calls are done. */
export type Frees = number | "never" | "waiting";
export type ReserveDecision =
  /** `already`: this operation held it before (nothing written); `over`: reserved past max (over: "approve"). */
  | { kind: "reserved"; row: Reservation; already: boolean; over: boolean; usage: Usage }
  /** Not reserved: `frees` says when enough of the window frees for this amount. */
  | { kind: "refused"; usage: Usage; frees: Frees };

const WINDOW_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
export const MAX_WINDOW_MS = 31 * 86_400_000;

/** "24h", "90m", "7d", "30s" → milliseconds (null: not a window of 1 s … 31 d). */
export function parseWindow(text: string): number | null {
  const match = /^([1-9][0-9]{0,6})(s|m|h|d)$/.exec(text);
  if (!match) return null;
  const ms = Number(match[1]) * WINDOW_UNITS[match[2]!]!;
  return ms <= MAX_WINDOW_MS ? ms : null;
}

/** When a held reservation stops counting: one window after its operation was recorded (null: not known yet). */
export const leavesAtMs = (row: Reservation, windowMs: number): number | null =>
  row.recordedAtMs === null ? null : Math.max(row.atMs, row.recordedAtMs) + windowMs;

/** A held reservation counts inside the window from its reservation, and after it until it leaves. */
const counts = (row: Reservation, windowMs: number, nowMs: number): boolean => {
  if (row.state !== "held") return false;
  const leaves = leavesAtMs(row, windowMs);
  return leaves === null || leaves > nowMs;
};

/**
 * The earliest a counting reservation can leave: when it leaves, if known; one window after its
 * reservation while that is still ahead (its operation may have been recorded at once);
 * Infinity once that has passed with its operation not known recorded (it is waiting).
 */
const earliestLeaveMs = (row: Reservation, windowMs: number, nowMs: number): number => {
  const leaves = leavesAtMs(row, windowMs);
  if (leaves !== null) return leaves;
  return row.atMs + windowMs > nowMs ? row.atMs + windowMs : Infinity;
};

export function usageOf(
  rows: readonly Reservation[],
  max: number,
  windowMs: number,
  nowMs: number,
): Usage {
  const live = rows.filter((row) => counts(row, windowMs, nowMs));
  const used = live.reduce((sum, row) => sum + row.amount, 0);
  const leaves = live.map((row) => earliestLeaveMs(row, windowMs, nowMs));
  const next = leaves.reduce((min, at) => Math.min(min, at), Infinity);
  return {
    used,
    remaining: Math.max(0, max - used),
    held: live.length,
    waiting: leaves.filter((at) => at === Infinity).length,
    nextFreeAtMs: Number.isFinite(next) ? next : null,
  };
}

/**
 * When `amount` first fits: the counting reservations leave one by one (earliest first); the first
 * moment the rest plus `amount` is within `max`. "waiting": only once a waiting one is done.
 */
export function freesAtMs(
  rows: readonly Reservation[],
  amount: number,
  max: number,
  windowMs: number,
  nowMs: number,
): Frees {
  if (amount > max) return "never";
  const live = rows
    .filter((row) => counts(row, windowMs, nowMs))
    .map((row) => ({ amount: row.amount, leavesAt: earliestLeaveMs(row, windowMs, nowMs) }))
    .sort((a, b) => a.leavesAt - b.leavesAt);
  let used = live.reduce((sum, row) => sum + row.amount, 0);
  if (used + amount <= max) return nowMs;
  for (const row of live) {
    used -= row.amount;
    if (used + amount <= max) return Number.isFinite(row.leavesAt) ? row.leavesAt : "waiting";
  }
  return "never";
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
      frees: freesAtMs(rows, claim.amount, claim.max, claim.windowMs, nowMs),
    };
  const row: Reservation = {
    operationId: claim.operationId,
    amount: claim.amount,
    atMs: nowMs,
    state: "held",
    recordedAtMs: null,
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

/**
 * A person's edit re-sizes what an operation holds (issue 35 item 2): its held reservation takes
 * the new amount, checked against everything else the window holds (its own old amount left out),
 * at its old time (an edit never moves it later in the window). Not held (released, or never
 * reserved): reserved as new. Refused: the old reservation stands unchanged. Re-sizing to the
 * amount it holds changes nothing (`already`), so a repeat counts once.
 */
export function decideResize(
  rows: readonly Reservation[],
  claim: { operationId: string; amount: number; max: number; windowMs: number; over: LimitOver },
  nowMs: number,
): ReserveDecision {
  const mine = rows.find((row) => row.operationId === claim.operationId);
  if (mine?.state !== "held") return decideReserve(rows, claim, nowMs);
  const others = rows.filter((r) => r.operationId !== claim.operationId);
  if (mine.amount === claim.amount)
    return {
      kind: "reserved",
      row: mine,
      already: true,
      over: false,
      usage: usageOf(rows, claim.max, claim.windowMs, nowMs),
    };
  const usage = usageOf(others, claim.max, claim.windowMs, nowMs);
  const over = usage.used + claim.amount > claim.max;
  if (over && claim.over === "refuse")
    return {
      kind: "refused",
      usage: usageOf(rows, claim.max, claim.windowMs, nowMs),
      frees: freesAtMs(others, claim.amount, claim.max, claim.windowMs, nowMs),
    };
  const row: Reservation = { ...mine, amount: claim.amount };
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

/**
 * Whether the object may delete a row: it can never count again under any window the limit has had
 * (`longestWindowMs`: definitions of one name may differ between runs made before and after a
 * change, or were registered before one name had one definition — audit N4). A held row whose
 * operation is not known recorded is never forgotten.
 */
export function forgettable(row: Reservation, longestWindowMs: number, nowMs: number): boolean {
  if (row.state === "released") return row.atMs + longestWindowMs <= nowMs;
  const leaves = leavesAtMs(row, longestWindowMs);
  return leaves !== null && leaves <= nowMs;
}

/** How long after a reservation the sweep asks its operation (its start has committed by then). */
export const SWEEP_AFTER_MS = 120_000;
/** The sweep asks no operation more often than this. */
export const MIN_ASK_GAP_MS = 10_000;

/**
 * When the sweep first asks a reservation's operation how it stands: two minutes after, or one
 * window after for a shorter window (a reservation leaves only once its operation is known recorded).
 */
export const firstAskAtMs = (atMs: number, windowMs: number): number =>
  atMs + Math.max(MIN_ASK_GAP_MS, Math.min(SWEEP_AFTER_MS, windowMs));

/**
 * Not recorded yet when asked: asked again one window later. It counts meanwhile, and learning of a
 * recording within one window of it loses nothing (it counts until one window after it anyway).
 */
export const askAgainAtMs = (nowMs: number, windowMs: number): number =>
  nowMs + Math.max(MIN_ASK_GAP_MS, windowMs);
