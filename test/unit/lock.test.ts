// The resource lock as tables: given lock state S and event E at time T → state S', effects [...].
// Pure: no clock, no I/O. The scenarios replay event sequences through the same transition().
import { describe, expect, it } from "vitest";
import {
  ASK_RETRY_MS,
  EMPTY_LOCK,
  MAX_QUEUE,
  PERSON_LEASE_MS,
  standing,
  transition,
  type LockEvent,
  type LockHolder,
  type LockState,
  type LockStep,
} from "../../src/domain/lock.ts";

const T = 100_000;
const LEASE = 60_000;
const holder = (
  operationId: string,
  fencingToken: number,
  leaseExpiresAtMs = T + LEASE,
): LockHolder => ({
  operationId,
  fencingToken,
  leaseMs: LEASE,
  leaseExpiresAtMs,
  grantedAtMs: T - 1_000,
});
const waiter = (operationId: string, enqueuedAtMs = T - 500) => ({
  operationId,
  leaseMs: LEASE,
  enqueuedAtMs,
});
/** op_a holds token 7; op_b then op_c wait. */
const busy: LockState = {
  holder: holder("op_a", 7),
  queue: [waiter("op_b", T - 900), waiter("op_c", T - 800)],
  lastToken: 7,
};
const expired: LockState = { ...busy, holder: holder("op_a", 7, T - 1) };

const step = (state: LockState, event: LockEvent, nowMs = T): LockStep => {
  const result = transition(state, event, nowMs);
  if (!result.ok) throw new Error(`transition refused: ${result.error.code}`);
  return result.value;
};
/** Runs events in order (each at its own time) and returns every step. */
const replay = (events: Array<[LockEvent, number]>, from: LockState = EMPTY_LOCK) => {
  let state = from;
  return events.map(([event, nowMs]) => {
    const s = step(state, event, nowMs);
    state = s.state;
    return s;
  });
};
const acquire = (operationId: string, leaseMs = LEASE): LockEvent => ({
  type: "acquire",
  operationId,
  leaseMs,
});
const release = (operationId: string): LockEvent => ({ type: "release", operationId });

describe("lock transition table", () => {
  const table: Array<[string, LockState, LockEvent, Partial<LockState>, LockStep["effects"]]> = [
    [
      "free + acquire → held with token lastToken+1, alarm at lease end",
      { ...EMPTY_LOCK, lastToken: 4 },
      acquire("op_a"),
      {
        holder: {
          operationId: "op_a",
          fencingToken: 5,
          leaseMs: LEASE,
          leaseExpiresAtMs: T + LEASE,
          grantedAtMs: T,
        },
        queue: [],
        lastToken: 5,
      },
      [{ kind: "set_alarm", atMs: T + LEASE }],
    ],
    [
      "held + holder acquires again → same token, lease renewed from now",
      busy,
      acquire("op_a", 5_000),
      {
        holder: { ...holder("op_a", 7), leaseMs: 5_000, leaseExpiresAtMs: T + 5_000 },
        queue: busy.queue,
        lastToken: 7,
      },
      [{ kind: "set_alarm", atMs: T + 5_000 }],
    ],
    [
      "held + new op acquires → appended to the queue, no effect",
      busy,
      acquire("op_d"),
      { holder: busy.holder, queue: [...busy.queue, waiter("op_d", T)] },
      [],
    ],
    ["held + queued op acquires again → keeps its place", busy, acquire("op_b"), busy, []],
    [
      "holder releases → first in line holds the next token and is told",
      busy,
      release("op_a"),
      {
        holder: {
          operationId: "op_b",
          fencingToken: 8,
          leaseMs: LEASE,
          leaseExpiresAtMs: T + LEASE,
          grantedAtMs: T,
        },
        queue: [waiter("op_c", T - 800)],
        lastToken: 8,
      },
      [
        { kind: "set_alarm", atMs: T + LEASE },
        { kind: "notify_granted", operationId: "op_b", fencingToken: 8 },
      ],
    ],
    [
      "holder releases, nobody waits → free, token kept",
      { holder: holder("op_a", 7), queue: [], lastToken: 7 },
      release("op_a"),
      { holder: null, queue: [], lastToken: 7 },
      [{ kind: "clear_alarm" }],
    ],
    [
      "queued op releases → withdraws, order of the rest kept",
      busy,
      release("op_b"),
      { holder: busy.holder, queue: [waiter("op_c", T - 800)], lastToken: 7 },
      [],
    ],
    ["a stranger releases → no-op", busy, release("op_z"), busy, []],
    [
      "holder renews → lease from now",
      busy,
      { type: "renew", operationId: "op_a", leaseMs: 10_000 },
      { holder: { ...holder("op_a", 7), leaseMs: 10_000, leaseExpiresAtMs: T + 10_000 } },
      [{ kind: "set_alarm", atMs: T + 10_000 }],
    ],
    [
      "alarm before the lease ends → re-armed only",
      busy,
      { type: "alarm" },
      busy,
      [{ kind: "set_alarm", atMs: T + LEASE }],
    ],
    [
      "alarm after the lease ended → ask the holder, change nothing yet",
      expired,
      { type: "alarm" },
      expired,
      [{ kind: "ask_holder", operationId: "op_a", fencingToken: 7 }],
    ],
    ["alarm on a free lock → nothing", EMPTY_LOCK, { type: "alarm" }, EMPTY_LOCK, []],
    [
      "expired, holder active → lease extended, same token, grant notice repeated",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "active" },
      {
        holder: { ...holder("op_a", 7), leaseExpiresAtMs: T + LEASE },
        queue: busy.queue,
        lastToken: 7,
      },
      [
        { kind: "set_alarm", atMs: T + LEASE },
        { kind: "notify_granted", operationId: "op_a", fencingToken: 7 },
      ],
    ],
    [
      "expired, holder waiting for a person → held for PERSON_LEASE_MS this time, no grant notice, its own lease unchanged",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "waiting" },
      {
        holder: { ...holder("op_a", 7), leaseExpiresAtMs: T + PERSON_LEASE_MS },
        queue: busy.queue,
        lastToken: 7,
      },
      [{ kind: "set_alarm", atMs: T + PERSON_LEASE_MS }],
    ],
    [
      "expired, holder settled → next granted",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "settled" },
      {
        holder: {
          operationId: "op_b",
          fencingToken: 8,
          leaseMs: LEASE,
          leaseExpiresAtMs: T + LEASE,
          grantedAtMs: T,
        },
        queue: [waiter("op_c", T - 800)],
        lastToken: 8,
      },
      [
        { kind: "set_alarm", atMs: T + LEASE },
        { kind: "notify_granted", operationId: "op_b", fencingToken: 8 },
      ],
    ],
    [
      "expired, holder gone → next granted",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "gone" },
      {
        holder: {
          operationId: "op_b",
          fencingToken: 8,
          leaseMs: LEASE,
          leaseExpiresAtMs: T + LEASE,
          grantedAtMs: T,
        },
        lastToken: 8,
      },
      [
        { kind: "set_alarm", atMs: T + LEASE },
        { kind: "notify_granted", operationId: "op_b", fencingToken: 8 },
      ],
    ],
    [
      "expired, holder unreachable → kept, asked again later",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "unreachable" },
      expired,
      [{ kind: "set_alarm", atMs: T + ASK_RETRY_MS }],
    ],
    [
      "answer about an earlier grant (token differs) → ignored",
      expired,
      { type: "lease_expired", operationId: "op_a", fencingToken: 6, answer: "gone" },
      expired,
      [],
    ],
    [
      "answer about another op → ignored",
      expired,
      { type: "lease_expired", operationId: "op_b", fencingToken: 7, answer: "gone" },
      expired,
      [],
    ],
    [
      "lease renewed while the question was out, then gone → kept",
      busy,
      { type: "lease_expired", operationId: "op_a", fencingToken: 7, answer: "gone" },
      busy,
      [{ kind: "set_alarm", atMs: T + LEASE }],
    ],
  ];

  it.each(table)("%s", (_name, state, event, expected, effects) => {
    const s = step(state, event);
    expect(s.state).toMatchObject(expected);
    expect(s.effects).toEqual(effects);
    expect(s.changed).toBe(JSON.stringify(s.state) !== JSON.stringify(state));
  });

  it.each([
    [
      "renew by a queued op",
      busy,
      { type: "renew", operationId: "op_b", leaseMs: LEASE },
      { code: "not_holder", holder: "op_a" },
    ],
    [
      "renew on a free lock",
      EMPTY_LOCK,
      { type: "renew", operationId: "op_b", leaseMs: LEASE },
      { code: "not_holder", holder: null },
    ],
    ["acquire with a zero lease", EMPTY_LOCK, acquire("op_a", 0), { code: "invalid_request" }],
    [
      "acquire with a fractional lease",
      EMPTY_LOCK,
      acquire("op_a", 1.5),
      { code: "invalid_request" },
    ],
    [
      "acquire with a lease over a day",
      EMPTY_LOCK,
      acquire("op_a", 24 * 60 * 60_000 + 1),
      { code: "invalid_request" },
    ],
    [
      "acquire into a full queue",
      { ...busy, queue: Array.from({ length: MAX_QUEUE }, (_, i) => waiter(`op_${i}`)) },
      acquire("op_new"),
      { code: "queue_full", retryable: true },
    ],
  ] as const)("refused: %s", (_name, state, event, error) => {
    const result = transition(state, event as LockEvent, T);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatchObject(error);
  });
});

describe("lock scenarios", () => {
  it("grants in FIFO order of first request, with strictly increasing tokens", () => {
    const steps = replay([
      [acquire("op_1"), 1],
      [acquire("op_2"), 2],
      [acquire("op_3"), 3],
      [acquire("op_2"), 4],
      [acquire("op_4"), 5],
      [release("op_1"), 6],
      [release("op_2"), 7],
      [release("op_3"), 8],
      [release("op_4"), 9],
    ]);
    const grants = steps.flatMap((s) => s.effects.filter((e) => e.kind === "notify_granted"));
    expect(grants).toEqual([
      { kind: "notify_granted", operationId: "op_2", fencingToken: 2 },
      { kind: "notify_granted", operationId: "op_3", fencingToken: 3 },
      { kind: "notify_granted", operationId: "op_4", fencingToken: 4 },
    ]);
    expect(steps.at(-1)!.state).toEqual({ holder: null, queue: [], lastToken: 4 });
  });

  it("a token is never reused: the free lock's next grant continues from lastToken", () => {
    const steps = replay([
      [acquire("op_1"), 1],
      [release("op_1"), 2],
      [acquire("op_1"), 3],
      [release("op_1"), 4],
      [acquire("op_2"), 5],
    ]);
    const tokens = steps.map((s) => s.state.holder?.fencingToken ?? null);
    expect(tokens).toEqual([1, null, 2, null, 3]);
  });

  it("idempotent acquire: the holder asking again keeps its token; a waiter learns position and blocker", () => {
    const steps = replay([
      [acquire("op_1"), 1],
      [acquire("op_2"), 2],
      [acquire("op_1"), 3],
      [acquire("op_3"), 4],
    ]);
    const [first, , again] = steps;
    const state = steps.at(-1)!.state;
    expect(first!.state.holder!.fencingToken).toBe(again!.state.holder!.fencingToken);
    expect(standing(state, "op_1")).toEqual({
      state: "held",
      fencingToken: 1,
      leaseExpiresAtMs: 3 + LEASE,
    });
    expect(standing(state, "op_2")).toEqual({ state: "queued", position: 1, blockedBy: "op_1" });
    expect(standing(state, "op_3")).toEqual({ state: "queued", position: 2, blockedBy: "op_1" });
    expect(standing(state, "op_9")).toEqual({ state: "none" });
  });

  it("a withdrawn waiter is skipped and can rejoin only at the back", () => {
    const steps = replay([
      [acquire("op_1"), 1],
      [acquire("op_2"), 2],
      [acquire("op_3"), 3],
      [release("op_2"), 4],
      [acquire("op_2"), 5],
      [release("op_1"), 6],
    ]);
    expect(steps.at(-1)!.state.holder!.operationId).toBe("op_3");
    expect(steps.at(-1)!.state.queue.map((w) => w.operationId)).toEqual(["op_2"]);
  });

  it("an active holder is never released by expiry, however often its lease runs out", () => {
    let state = step(step(EMPTY_LOCK, acquire("op_1", 1_000), 0).state, acquire("op_2"), 1).state;
    for (let round = 1; round <= 50; round++) {
      const nowMs = round * 10_000;
      const alarm = step(state, { type: "alarm" }, nowMs);
      expect(alarm.effects).toEqual([{ kind: "ask_holder", operationId: "op_1", fencingToken: 1 }]);
      state = step(
        alarm.state,
        {
          type: "lease_expired",
          operationId: "op_1",
          fencingToken: 1,
          answer: round % 2 ? "active" : "unreachable",
        },
        nowMs,
      ).state;
      expect(state.holder).toMatchObject({ operationId: "op_1", fencingToken: 1 });
      expect(state.queue.map((w) => w.operationId)).toEqual(["op_2"]);
    }
  });

  it("a holder waiting for a person is asked once per PERSON_LEASE_MS, not once per lease (a day: 4 questions, not 1,440)", () => {
    let state = step(EMPTY_LOCK, acquire("op_1", 60_000), 0).state;
    let asks = 0;
    for (let nowMs = 60_000; nowMs <= 24 * 3_600_000; nowMs += 60_000) {
      const alarm = step(state, { type: "alarm" }, nowMs);
      if (!alarm.effects.some((effect) => effect.kind === "ask_holder")) continue;
      asks += 1;
      const answer = { operationId: "op_1", fencingToken: 1, answer: "waiting" } as const;
      state = step(alarm.state, { type: "lease_expired", ...answer }, nowMs).state;
    }
    expect(asks).toBe(4);
    expect(state.holder).toMatchObject({ operationId: "op_1", fencingToken: 1, leaseMs: 60_000 });
  });

  it("an answer arriving after the grant moved on cannot release the new holder", () => {
    // op_1's lease ran out, the question went out; meanwhile op_1 released and op_2 got token 2.
    const [, , released] = replay([
      [acquire("op_1", 1_000), 0],
      [acquire("op_2"), 1],
      [release("op_1"), 2_000],
    ]);
    const late = step(
      released!.state,
      { type: "lease_expired", operationId: "op_1", fencingToken: 1, answer: "gone" },
      2_001,
    );
    expect(late).toMatchObject({ changed: false, effects: [] });
    expect(late.state.holder).toMatchObject({ operationId: "op_2", fencingToken: 2 });
  });
});

describe("lock invariants over random event sequences (seeded)", () => {
  /** mulberry32: a fixed seed gives the same sequence on every run. */
  const rng = (seed: number) => () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const answers = ["active", "waiting", "settled", "gone", "unreachable"] as const;

  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    "seed %i: one holder, FIFO grants, tokens only ever increase",
    (seed) => {
      const random = rng(seed);
      const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
      const ops = ["op_a", "op_b", "op_c", "op_d", "op_e"];
      let state: LockState = EMPTY_LOCK;
      let nowMs = 0;
      let lastGranted = 0;
      for (let i = 0; i < 400; i++) {
        nowMs += Math.floor(random() * 40_000);
        const roll = random();
        const event: LockEvent =
          roll < 0.35
            ? acquire(pick(ops), 1_000 + Math.floor(random() * 60_000))
            : roll < 0.6
              ? release(pick(ops))
              : roll < 0.7
                ? { type: "renew", operationId: pick(ops), leaseMs: 30_000 }
                : roll < 0.8
                  ? { type: "alarm" }
                  : {
                      type: "lease_expired",
                      operationId: state.holder?.operationId ?? pick(ops),
                      fencingToken: state.holder?.fencingToken ?? 0,
                      answer: pick(answers),
                    };
        const before = state;
        const result = transition(state, event, nowMs);
        if (!result.ok) {
          expect(result.error.code).toBe("not_holder");
          continue;
        }
        state = result.value.state;
        // Free only when nobody waits; nobody both holds and waits; nobody waits twice.
        if (state.holder === null) expect(state.queue).toEqual([]);
        const waiting = state.queue.map((w) => w.operationId);
        expect(new Set(waiting).size).toBe(waiting.length);
        if (state.holder) expect(waiting).not.toContain(state.holder.operationId);
        // Tokens: never decrease, and a new holder always gets a token above every earlier one.
        expect(state.lastToken).toBeGreaterThanOrEqual(before.lastToken);
        if (state.holder && state.holder.fencingToken !== before.holder?.fencingToken) {
          expect(state.holder.fencingToken).toBeGreaterThan(lastGranted);
          lastGranted = state.holder.fencingToken;
          // FIFO: a new holder taken from the queue is the one that was first in line.
          if (before.holder) expect(state.holder.operationId).toBe(before.queue[0]!.operationId);
        }
        // Expiry alone never frees a holder that answered active, waiting, or could not be asked.
        if (
          event.type === "lease_expired" &&
          before.holder &&
          (event.answer === "active" ||
            event.answer === "waiting" ||
            event.answer === "unreachable")
        ) {
          expect(state.holder).toMatchObject({
            operationId: before.holder.operationId,
            fencingToken: before.holder.fencingToken,
          });
        }
        if (event.type === "alarm") expect(state).toBe(before);
      }
      // The sequence really exercised hand-overs (not just a lock that stayed free).
      expect(lastGranted).toBeGreaterThan(20);
    },
  );
});
