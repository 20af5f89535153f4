// The resource lock as a pure state machine: a FIFO queue in front of one exclusive lease, with a
// fencing token that strictly increases with every grant and is never reused (it survives release).
// Invariants: the lock is free only when nobody waits (a release always grants the next in line);
// a lease expiry alone never frees the lock — only the holder's own answer "settled" or "gone" does,
// because expiry protects against a holder that vanished, never against one that is slow or unknown.
import { err, ok, type Result } from "./result.ts";

export type LockHolder = {
  operationId: string;
  fencingToken: number;
  leaseMs: number;
  leaseExpiresAtMs: number;
  grantedAtMs: number;
};
export type LockWaiter = { operationId: string; leaseMs: number; enqueuedAtMs: number };
export type LockState = { holder: LockHolder | null; queue: LockWaiter[]; lastToken: number };

/**
 * What the holder said when its lease ran out; `unreachable` = the question itself failed (no
 * answer is not "gone"); `waiting` = active, but only a person can move it on (an unknown outcome).
 */
export type HolderAnswer = "active" | "waiting" | "settled" | "gone" | "unreachable";

export type LockEvent =
  | { type: "acquire"; operationId: string; leaseMs: number }
  | { type: "release"; operationId: string }
  | { type: "renew"; operationId: string; leaseMs: number }
  /** The alarm fired: if the lease ran out, ask the holder whether it still needs the lock. */
  | { type: "alarm" }
  /** The holder's answer to that question; applies only to the same grant (operation + token). */
  | { type: "lease_expired"; operationId: string; fencingToken: number; answer: HolderAnswer };

export type LockEffect =
  | { kind: "set_alarm"; atMs: number }
  | { kind: "clear_alarm" }
  /** At least once: a grant notice may repeat (same token) when an expired lease is extended. */
  | { kind: "notify_granted"; operationId: string; fencingToken: number }
  | { kind: "ask_holder"; operationId: string; fencingToken: number };

export type LockStep = { state: LockState; effects: LockEffect[]; changed: boolean };
export type LockError =
  | { code: "invalid_request"; detail: string }
  | { code: "not_holder"; detail: string; holder: string | null }
  | { code: "queue_full"; detail: string; retryable: true };

/** Where one operation stands: what `acquire` answers. */
export type Standing =
  | { state: "held"; fencingToken: number; leaseExpiresAtMs: number }
  | { state: "queued"; position: number; blockedBy: string }
  | { state: "none" };

export const EMPTY_LOCK: LockState = { holder: null, queue: [], lastToken: 0 };
export const MAX_LEASE_MS = 24 * 60 * 60_000;
export const MAX_QUEUE = 1_000;
/** How soon to ask again when the holder could not be asked at all. */
export const ASK_RETRY_MS = 30_000;
/**
 * The lease given to a holder that waits for a person (hours or days): asking it every lease period
 * cost a write and an RPC each time for nothing, since only its own release (when the person
 * settles it) frees the lock anyway.
 */
export const PERSON_LEASE_MS = 6 * 60 * 60_000;

export function transition(
  state: LockState,
  event: LockEvent,
  nowMs: number,
): Result<LockStep, LockError> {
  switch (event.type) {
    case "acquire": {
      const lease = checkLease(event.leaseMs);
      if (!lease.ok) return lease;
      const { holder } = state;
      if (holder === null)
        return ok(
          grant(
            state,
            { operationId: event.operationId, leaseMs: event.leaseMs, enqueuedAtMs: nowMs },
            nowMs,
            false,
          ),
        );
      if (holder.operationId === event.operationId)
        return ok(extend(state, holder, event.leaseMs, nowMs, false));
      // Asking again keeps the place in line (the first request's time decides the order).
      if (state.queue.some((w) => w.operationId === event.operationId)) return ok(unchanged(state));
      if (state.queue.length >= MAX_QUEUE)
        return err({
          code: "queue_full",
          detail: `${MAX_QUEUE} operations already wait for this resource`,
          retryable: true,
        });
      return ok({
        state: {
          ...state,
          queue: [
            ...state.queue,
            { operationId: event.operationId, leaseMs: event.leaseMs, enqueuedAtMs: nowMs },
          ],
        },
        effects: [],
        changed: true,
      });
    }
    case "release": {
      if (state.holder?.operationId === event.operationId) return ok(handOver(state, nowMs));
      const queue = state.queue.filter((w) => w.operationId !== event.operationId);
      if (queue.length === state.queue.length) return ok(unchanged(state));
      return ok({ state: { ...state, queue }, effects: [], changed: true });
    }
    case "renew": {
      const lease = checkLease(event.leaseMs);
      if (!lease.ok) return lease;
      const { holder } = state;
      if (holder?.operationId !== event.operationId) {
        return err({
          code: "not_holder",
          detail: `operation ${event.operationId} does not hold this lock`,
          holder: holder?.operationId ?? null,
        });
      }
      return ok(extend(state, holder, event.leaseMs, nowMs, false));
    }
    case "alarm": {
      const { holder } = state;
      if (holder === null) return ok(unchanged(state));
      if (holder.leaseExpiresAtMs > nowMs)
        return ok({
          ...unchanged(state),
          effects: [{ kind: "set_alarm", atMs: holder.leaseExpiresAtMs }],
        });
      return ok({
        ...unchanged(state),
        effects: [
          {
            kind: "ask_holder",
            operationId: holder.operationId,
            fencingToken: holder.fencingToken,
          },
        ],
      });
    }
    case "lease_expired": {
      const { holder } = state;
      // A stale answer: this grant ended (or was renewed) while the question was out.
      if (
        holder === null ||
        holder.operationId !== event.operationId ||
        holder.fencingToken !== event.fencingToken
      )
        return ok(unchanged(state));
      if (holder.leaseExpiresAtMs > nowMs)
        return ok({
          ...unchanged(state),
          effects: [{ kind: "set_alarm", atMs: holder.leaseExpiresAtMs }],
        });
      switch (event.answer) {
        case "active":
          // Slow or waiting on a person is not vanished: extend, and repeat the grant notice in
          // case the first one was lost (the shell may stop between commit and notify).
          return ok(extend(state, holder, holder.leaseMs, nowMs, true));
        case "waiting":
          // Its first attempt ran, so it knows it holds the lock: no grant notice, a longer lease.
          return ok(
            extend(
              state,
              holder,
              holder.leaseMs,
              nowMs,
              false,
              Math.max(holder.leaseMs, PERSON_LEASE_MS),
            ),
          );
        case "unreachable":
          return ok({
            ...unchanged(state),
            effects: [{ kind: "set_alarm", atMs: nowMs + ASK_RETRY_MS }],
          });
        case "settled":
        case "gone":
          return ok(handOver(state, nowMs));
      }
    }
  }
}

/** Where `operationId` stands in `state`. */
export function standing(state: LockState, operationId: string): Standing {
  const { holder } = state;
  if (holder?.operationId === operationId)
    return {
      state: "held",
      fencingToken: holder.fencingToken,
      leaseExpiresAtMs: holder.leaseExpiresAtMs,
    };
  const index = state.queue.findIndex((w) => w.operationId === operationId);
  if (index >= 0 && holder)
    return { state: "queued", position: index + 1, blockedBy: holder.operationId };
  return { state: "none" };
}

/** The holder leaves; the first in line (if any) becomes holder with the next token. */
function handOver(state: LockState, nowMs: number): LockStep {
  const [next, ...rest] = state.queue;
  if (!next)
    return { state: { ...state, holder: null }, effects: [{ kind: "clear_alarm" }], changed: true };
  return grant({ ...state, queue: rest }, next, nowMs, true);
}

function grant(state: LockState, waiter: LockWaiter, nowMs: number, notify: boolean): LockStep {
  const fencingToken = state.lastToken + 1;
  const holder: LockHolder = {
    operationId: waiter.operationId,
    fencingToken,
    leaseMs: waiter.leaseMs,
    leaseExpiresAtMs: nowMs + waiter.leaseMs,
    grantedAtMs: nowMs,
  };
  const effects: LockEffect[] = [{ kind: "set_alarm", atMs: holder.leaseExpiresAtMs }];
  if (notify)
    effects.push({ kind: "notify_granted", operationId: holder.operationId, fencingToken });
  return { state: { ...state, holder, lastToken: fencingToken }, effects, changed: true };
}

/** Same holder, same token, a lease of `leaseMs` (this time only: `forMs`) from now. */
function extend(
  state: LockState,
  holder: LockHolder,
  leaseMs: number,
  nowMs: number,
  notify: boolean,
  forMs = leaseMs,
): LockStep {
  const next: LockHolder = { ...holder, leaseMs, leaseExpiresAtMs: nowMs + forMs };
  const effects: LockEffect[] = [{ kind: "set_alarm", atMs: next.leaseExpiresAtMs }];
  if (notify)
    effects.push({
      kind: "notify_granted",
      operationId: holder.operationId,
      fencingToken: holder.fencingToken,
    });
  return { state: { ...state, holder: next }, effects, changed: true };
}

function checkLease(leaseMs: number): Result<true, LockError> {
  if (Number.isInteger(leaseMs) && leaseMs > 0 && leaseMs <= MAX_LEASE_MS) return ok(true);
  return err({
    code: "invalid_request",
    detail: `leaseMs must be a whole number of milliseconds in 1..${MAX_LEASE_MS}`,
  });
}

const unchanged = (state: LockState): LockStep => ({ state, effects: [], changed: false });
