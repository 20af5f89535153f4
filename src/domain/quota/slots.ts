// The quota object's core (issue 34 item 4): first attempts ask for a slot, keyed by their grant
// (operation id + attempt), so an RPC asked twice is granted once. A rate slot is reserved in
// arrival order (FIFO by construction): the k-th grant is never earlier than the (k-limit)-th plus
// the window, nor than the (k-burst)-th plus burst/limit of it — so no window ever holds more than
// `limit` sends. A concurrency cap holds a place from grant to release, or to `untilMs` if its
// operation died holding it; waiters queue in order and the head is granted first. An upstream's
// pause (429/503 Retry-After, RateLimit r=0) holds every grant until it ends. Pure: the caller
// passes the clock reading and persists the state it gets back.
import type { QuotaClaim } from "./definition.ts";

/** A grant: the slot reserved for it (`atMs`) and, under a cap, how long it holds its place. */
type Grant = { atMs: number; holdsUntilMs: number | null };
export type QuotaState = {
  /** Slot times of the latest grants, ascending (at most the largest `limit` asked with). */
  slots: number[];
  grants: Record<string, Grant>;
  /** Waiting for the cap, in order: grant key → operation id and when it last asked. */
  queue: Array<{ grant: string; operationId: string; askedAtMs: number }>;
  pause: { untilMs: number; long: boolean; detail: string } | null;
};
export const EMPTY_QUOTA: QuotaState = { slots: [], grants: {}, queue: [], pause: null };

/** A pause this long or longer is a used-up quota (a daily limit), not a transient 429. */
export const LONG_PAUSE_MS = 5 * 60_000;
/** A queued waiter that has not asked again for this long is gone (its operation rechecks sooner). */
export const QUEUE_TTL_MS = 120_000;
/** Grants are remembered this long after their slot (an RPC retried later still finds its own). */
const GRANT_MEMORY_MS = 15 * 60_000;

export type QuotaAsk = {
  grant: string;
  operationId: string;
  claim: QuotaClaim;
  nowMs: number;
  /** The operation's own deadline (null: none): a slot after it is not reserved. */
  deadlineAtMs: number | null;
  /** How long a cap's place is held if never released (the attempt's timeout and grace). */
  holdMs: number;
};
export type QuotaAnswer =
  | { kind: "granted"; atMs: number }
  | {
      kind: "wait";
      untilMs: number | null;
      reason: "rate" | "concurrency" | "paused";
      long: boolean;
      detail: string;
    }
  | { kind: "deadline"; atMs: number | null };

/** Drops what no longer counts: expired places, gone waiters, old grants, a pause that ended. */
export function tidy(state: QuotaState, nowMs: number): QuotaState {
  const grants: Record<string, Grant> = {};
  for (const [key, g] of Object.entries(state.grants)) {
    const holding = g.holdsUntilMs !== null && g.holdsUntilMs > nowMs;
    if (holding) grants[key] = g;
    else if (g.atMs + GRANT_MEMORY_MS > nowMs) grants[key] = { ...g, holdsUntilMs: null };
  }
  return {
    slots: state.slots,
    grants,
    queue: state.queue.filter((w) => w.askedAtMs + QUEUE_TTL_MS > nowMs && !(w.grant in grants)),
    pause: state.pause && state.pause.untilMs > nowMs ? state.pause : null,
  };
}

const holding = (state: QuotaState, nowMs: number) =>
  Object.values(state.grants).filter((g) => g.holdsUntilMs !== null && g.holdsUntilMs > nowMs)
    .length;

/** The earliest slot a new grant may have under `rate`, given the slots reserved so far. */
function nextSlot(slots: number[], rate: NonNullable<QuotaClaim["rate"]>, fromMs: number): number {
  const n = slots.length;
  let at = fromMs;
  if (n >= rate.limit) at = Math.max(at, slots[n - rate.limit]! + rate.windowMs);
  if (n >= rate.burst)
    at = Math.max(
      at,
      slots[n - rate.burst]! + Math.ceil((rate.burst * rate.windowMs) / rate.limit),
    );
  return at;
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

export function acquire(
  before: QuotaState,
  ask: QuotaAsk,
): { state: QuotaState; answer: QuotaAnswer } {
  const { grant, claim, nowMs } = ask;
  let state = tidy(before, nowMs);
  const pause = state.pause;
  const known = state.grants[grant];
  if (pause && (!known || known.atMs > nowMs))
    return {
      state,
      answer: {
        kind: "wait",
        untilMs: pause.untilMs,
        reason: "paused",
        long: pause.long,
        detail: pause.detail,
      },
    };
  if (known) return { state, answer: { kind: "granted", atMs: known.atMs } };
  if (claim.concurrency !== undefined) {
    const queue = state.queue.some((w) => w.grant === grant)
      ? state.queue.map((w) => (w.grant === grant ? { ...w, askedAtMs: nowMs } : w))
      : [...state.queue, { grant, operationId: ask.operationId, askedAtMs: nowMs }];
    const free = claim.concurrency - holding(state, nowMs);
    const position = queue.findIndex((w) => w.grant === grant);
    if (position >= free) {
      const detail = `${claim.concurrency} call(s) at a time; ${position + 1 - Math.max(free, 0)} ahead of it`;
      return {
        state: { ...state, queue },
        answer: { kind: "wait", untilMs: null, reason: "concurrency", long: false, detail },
      };
    }
    state = { ...state, queue: queue.filter((w) => w.grant !== grant) };
  }
  const atMs = claim.rate ? nextSlot(state.slots, claim.rate, nowMs) : nowMs;
  if (ask.deadlineAtMs !== null && atMs >= ask.deadlineAtMs)
    return { state, answer: { kind: "deadline", atMs } };
  const keep = claim.rate ? claim.rate.limit : 0;
  const slots = claim.rate ? [...state.slots, atMs].slice(-Math.max(keep, 1)) : state.slots;
  const holdsUntilMs = claim.concurrency !== undefined ? atMs + ask.holdMs : null;
  return {
    state: { ...state, slots, grants: { ...state.grants, [grant]: { atMs, holdsUntilMs } } },
    answer: { kind: "granted", atMs },
  };
}

/**
 * The attempt ended, or its operation stopped waiting (cancelled, denied, past its deadline, held
 * by a freeze or a pause): its place under the cap is free and it leaves the queue; the waiters
 * now at the head are named. `forget` (it stopped waiting with nothing sent): the grant is dropped,
 * so the same key asked again after a hold takes a new slot and place — never the old slot's time
 * nor a place it no longer holds (the slot it was given stays counted: a window never gains one).
 */
export function release(
  before: QuotaState,
  grant: string,
  concurrency: number,
  nowMs: number,
  forget = false,
): { state: QuotaState; wake: string[] } {
  let state = tidy(before, nowMs);
  const g = state.grants[grant];
  if (g && forget) {
    const { [grant]: _dropped, ...grants } = state.grants;
    state = { ...state, grants };
  } else if (g)
    state = { ...state, grants: { ...state.grants, [grant]: { ...g, holdsUntilMs: null } } };
  state = { ...state, queue: state.queue.filter((w) => w.grant !== grant) };
  return { state, wake: headOf(state, concurrency, nowMs) };
}

/** The operations at the head of the queue that the cap now has room for. */
export function headOf(state: QuotaState, concurrency: number, nowMs: number): string[] {
  const free = concurrency - holding(state, nowMs);
  return state.queue.slice(0, Math.max(free, 0)).map((w) => w.operationId);
}

/** The upstream asked for a pause: kept if it ends later than the one already held. */
export function pauseUntil(
  state: QuotaState,
  untilMs: number,
  detail: string,
  nowMs: number,
): QuotaState {
  const tidied = tidy(state, nowMs);
  if (untilMs <= nowMs || (tidied.pause && tidied.pause.untilMs >= untilMs)) return tidied;
  return { ...tidied, pause: { untilMs, long: untilMs - nowMs >= LONG_PAUSE_MS, detail } };
}

/** The next moment the object must look again (an expiring place, a pause ending), or null. */
export function nextWakeMs(state: QuotaState): number | null {
  const times = Object.values(state.grants).flatMap((g) =>
    g.holdsUntilMs === null ? [] : [g.holdsUntilMs],
  );
  if (state.pause) times.push(state.pause.untilMs);
  if (state.queue.length > 0)
    times.push(Math.min(...state.queue.map((w) => w.askedAtMs + QUEUE_TTL_MS)));
  return times.length > 0 ? Math.min(...times) : null;
}

/** In words, for the model and the console: how long until the wait ends. */
export function waitWords(answer: Extract<QuotaAnswer, { kind: "wait" }>, nowMs: number): string {
  if (answer.untilMs === null) return `waiting for a free place (${answer.detail})`;
  return `next slot in ~${seconds(answer.untilMs - nowMs)} s`;
}
