// The quota object's core (domain/quota/slots.ts) as tables: slots are reserved in arrival order
// and never put more than `limit` in any window, `burst` spaces them, a grant asked again is the
// same grant, a cap queues in order and frees on release or expiry, a pause holds everything, a
// slot past the deadline is not reserved. And what an upstream's answer says (upstream.ts).
import { describe, expect, it } from "vitest";
import type { QuotaClaim } from "../../../src/domain/quota/definition.ts";
import {
  acquire,
  EMPTY_QUOTA,
  LONG_PAUSE_MS,
  nextWakeMs,
  pauseUntil,
  release,
  type QuotaAnswer,
  type QuotaState,
} from "../../../src/domain/quota/slots.ts";
import { rateLimitResetMs, upstreamPause } from "../../../src/domain/quota/upstream.ts";

const T = 1_000_000;
const rate = (limit: number, windowMs: number, burst = limit): QuotaClaim => ({
  id: "q",
  object: "o",
  rate: { limit, windowMs, burst },
});
const cap = (n: number): QuotaClaim => ({ id: "q", object: "o", concurrency: n });

/** Asks for grants `g1`, `g2`, … in order at `nowMs`; the answers and the state after. */
function askAll(
  claim: QuotaClaim,
  n: number,
  nowMs = T,
  state: QuotaState = EMPTY_QUOTA,
  deadlineAtMs: number | null = null,
) {
  const answers: QuotaAnswer[] = [];
  for (let i = 1; i <= n; i++) {
    const step = acquire(state, {
      grant: `g${i}`,
      operationId: `op${i}`,
      claim,
      nowMs,
      deadlineAtMs,
      holdMs: 10_000,
    });
    state = step.state;
    answers.push(step.answer);
  }
  return { answers, state };
}
const slotsOf = (answers: QuotaAnswer[]) =>
  answers.map((a) => (a.kind === "granted" ? a.atMs - T : a.kind));

describe("rate: slots in arrival order, at most `limit` in any window", () => {
  it.each([
    [
      "5/s, burst 5: five now, five a second later",
      rate(5, 1000),
      12,
      [0, 0, 0, 0, 0, 1000, 1000, 1000, 1000, 1000, 2000, 2000],
    ],
    ["5/s, burst 1: evenly spaced", rate(5, 1000, 1), 6, [0, 200, 400, 600, 800, 1000]],
    ["5/s, burst 2", rate(5, 1000, 2), 6, [0, 0, 400, 400, 800, 1000]],
    ["1 per minute", rate(1, 60_000), 3, [0, 60_000, 120_000]],
  ] as const)("%s", (_name, claim, n, expected) => {
    const { answers } = askAll(claim, n);
    expect(slotsOf(answers)).toEqual(expected);
    const times = answers.map((a) => (a.kind === "granted" ? a.atMs : 0)).sort((a, b) => a - b);
    for (let i = claim.rate!.limit; i < times.length; i++)
      expect(times[i]! - times[i - claim.rate!.limit]!).toBeGreaterThanOrEqual(
        claim.rate!.windowMs,
      );
  });

  it("a grant asked again (a retried RPC) is the same slot and takes no other", () => {
    const { state } = askAll(rate(1, 60_000), 1);
    const again = acquire(state, {
      grant: "g1",
      operationId: "op1",
      claim: rate(1, 60_000),
      nowMs: T + 5,
      deadlineAtMs: null,
      holdMs: 0,
    });
    expect(again.answer).toEqual({ kind: "granted", atMs: T });
    expect(again.state.slots).toEqual(state.slots);
    const next = acquire(again.state, {
      grant: "g2",
      operationId: "op2",
      claim: rate(1, 60_000),
      nowMs: T + 5,
      deadlineAtMs: null,
      holdMs: 0,
    });
    expect(next.answer).toEqual({ kind: "granted", atMs: T + 60_000 });
  });

  it("a slot at or past the deadline is refused and not reserved (the next caller is not pushed back)", () => {
    const { answers, state } = askAll(rate(1, 60_000), 2, T, EMPTY_QUOTA, T + 30_000);
    expect(answers).toEqual([
      { kind: "granted", atMs: T },
      { kind: "deadline", atMs: T + 60_000 },
    ]);
    expect(state.slots).toEqual([T]);
  });
});

describe("concurrency: a FIFO queue, freed on release or expiry", () => {
  it("two hold, the rest queue in order; a release makes room for the head only", () => {
    const { answers, state } = askAll(cap(2), 4);
    expect(answers.map((a) => a.kind)).toEqual(["granted", "granted", "wait", "wait"]);
    const freed = release(state, "g1", 2, T + 1);
    expect(freed.wake).toEqual(["op3"]);
    // The fourth asks first: still behind the third.
    const jump = acquire(freed.state, {
      grant: "g4",
      operationId: "op4",
      claim: cap(2),
      nowMs: T + 2,
      deadlineAtMs: null,
      holdMs: 10_000,
    });
    expect(jump.answer.kind).toBe("wait");
    const turn = acquire(jump.state, {
      grant: "g3",
      operationId: "op3",
      claim: cap(2),
      nowMs: T + 3,
      deadlineAtMs: null,
      holdMs: 10_000,
    });
    expect(turn.answer).toEqual({ kind: "granted", atMs: T + 3 });
  });

  it("a holder that never releases (its operation died) loses its place at expiry", () => {
    const { state } = askAll(cap(1), 2);
    expect(nextWakeMs(state)).toBe(T + 10_000);
    const later = acquire(state, {
      grant: "g2",
      operationId: "op2",
      claim: cap(1),
      nowMs: T + 10_000,
      deadlineAtMs: null,
      holdMs: 10_000,
    });
    expect(later.answer).toEqual({ kind: "granted", atMs: T + 10_000 });
  });

  it("a release asked twice frees one place", () => {
    const { state } = askAll(cap(2), 4);
    const once = release(state, "g1", 2, T + 1);
    const twice = release(once.state, "g1", 2, T + 2);
    expect(twice.wake).toEqual(["op3"]);
  });

  it("given back unsent (held by a freeze or a pause): asked again, a new place and a new slot", () => {
    const claim: QuotaClaim = { ...rate(1, 1000), concurrency: 1 };
    const { state } = askAll(claim, 1);
    const ask = { grant: "g1", operationId: "op1", claim, deadlineAtMs: null, holdMs: 10_000 };
    const kept = release(state, "g1", 1, T + 1);
    // Released after its attempt: the grant is remembered, asked again it takes no place.
    expect(acquire(kept.state, { ...ask, nowMs: T + 2 }).answer).toEqual({
      kind: "granted",
      atMs: T,
    });
    const forgotten = release(state, "g1", 1, T + 1, true);
    const again = acquire(forgotten.state, { ...ask, nowMs: T + 2 });
    // The slot at T stays counted: the next one is a window later; the cap's place is held anew.
    expect(again.answer).toEqual({ kind: "granted", atMs: T + 1000 });
    const other = acquire(again.state, { ...ask, grant: "g2", operationId: "op2", nowMs: T + 3 });
    expect(other.answer).toMatchObject({ kind: "wait", reason: "concurrency" });
  });
});

describe("the upstream's pause holds every grant not yet due", () => {
  it("a pause: new asks wait for its end; a long one is told apart", () => {
    const paused = pauseUntil(EMPTY_QUOTA, T + LONG_PAUSE_MS, "429", T);
    const { answers } = askAll(rate(5, 1000), 1, T, paused);
    expect(answers[0]).toMatchObject({
      kind: "wait",
      reason: "paused",
      untilMs: T + LONG_PAUSE_MS,
      long: true,
    });
    const short = pauseUntil(EMPTY_QUOTA, T + 1_000, "429", T);
    expect(askAll(rate(5, 1000), 1, T, short).answers[0]).toMatchObject({ long: false });
    // After it: granted.
    expect(askAll(rate(5, 1000), 1, T + 1_000, short).answers[0]).toEqual({
      kind: "granted",
      atMs: T + 1_000,
    });
  });

  it("a shorter pause never shortens a longer one", () => {
    const long = pauseUntil(EMPTY_QUOTA, T + 3_600_000, "a", T);
    expect(pauseUntil(long, T + 1_000, "b", T).pause?.untilMs).toBe(T + 3_600_000);
  });
});

describe("what an upstream's answer says (Retry-After, RateLimit)", () => {
  const h = (retryAfter: string | null, rateLimit: string | null = null) => ({
    retryAfter,
    rateLimit,
    rateLimitPolicy: null,
  });
  it.each([
    ["429 Retry-After: 3600", 429, h("3600"), T + 3_600_000],
    ["503 Retry-After: 1", 503, h("1"), T + 1_000],
    ["500 Retry-After: 10 (not a pause)", 500, h("10"), null],
    ["429 without a header (nothing to go by)", 429, h(null), null],
    ["429 Retry-After: soon (unreadable)", 429, h("soon"), null],
    ['RateLimit "day";r=0;t=7200', 429, h(null, '"day";r=0;t=7200'), T + 7_200_000],
    ['RateLimit "min";r=3;t=20 (some left)', 200, h(null, '"min";r=3;t=20'), null],
    ["RateLimit on a 200 with none left", 200, h(null, '"min";r=0;t=20'), T + 20_000],
    ["the longer of the two wins", 429, h("5", '"min";r=0;t=60'), T + 60_000],
    ["a Retry-After of a year is clamped to a day", 429, h(String(365 * 86_400)), T + 86_400_000],
  ] as const)("%s", (_name, status, headers, untilMs) => {
    expect(upstreamPause(status, headers, T)?.untilMs ?? null).toBe(untilMs);
  });

  it.each([
    ['"a";r=0;t=10, "b";r=0;t=30', 30_000],
    ["not a structured field ((", null],
    ['"a";r=0', null],
    ["limit=100, remaining=0, reset=30", null],
  ] as const)("RateLimit: %s → %s", (header, ms) => {
    expect(rateLimitResetMs(header)).toBe(ms);
  });
});

describe("a waiter that stops waiting", () => {
  it("leaves the queue at once: the next one is at the head", () => {
    const { state } = askAll(cap(1), 3);
    const gone = release(state, "g2", 1, T + 1);
    expect(gone.state.queue.map((w) => w.grant)).toEqual(["g3"]);
    expect(release(gone.state, "g1", 1, T + 2).wake).toEqual(["op3"]);
  });
});
