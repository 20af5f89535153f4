// Late settlement's schedule (issue 24): a pure table of when each late try runs, where the
// key's window stops it, and the deployment variable that compresses it for tests.
import { describe, expect, it } from "vitest";
import { settleScheduleMs } from "../../src/config.ts";
import { isoUtc } from "../../src/domain/envelope.ts";
import {
  DEFAULT_KEY_TTL_MS,
  DEFAULT_SETTLE_SCHEDULE_MS,
  nextSlotAtMs,
  planLateTry,
} from "../../src/domain/retry-late.ts";

const MIN = 60_000;
const H = 60 * MIN;
const settle = { keyTtlMs: DEFAULT_KEY_TTL_MS, scheduleMs: DEFAULT_SETTLE_SCHEDULE_MS };

describe("the late schedule: 1 min, 5 min, 30 min, 2 h, then every 6 h from the first attempt", () => {
  // [now, after the first attempt] → the next late try, after the first attempt
  const table: Array<[number, number]> = [
    [0, 1 * MIN],
    [30_000, 1 * MIN],
    [1 * MIN, 6 * MIN], // strictly after now: the slot that is due now is the one being run
    [3 * MIN, 6 * MIN],
    [6 * MIN, 36 * MIN],
    [36 * MIN, 2 * H + 36 * MIN],
    [2 * H + 36 * MIN, 8 * H + 36 * MIN],
    [9 * H, 14 * H + 36 * MIN],
    [20 * H, 20 * H + 36 * MIN],
  ];
  it.each(table)("at +%i ms the next try is at +%i ms", (now, next) => {
    expect(nextSlotAtMs(1_000_000, 1_000_000 + now, DEFAULT_SETTLE_SCHEDULE_MS)).toBe(
      1_000_000 + next,
    );
  });

  it("a day-long window holds eight tries, each finishing inside it", () => {
    const slots: number[] = [];
    let now = 0;
    for (;;) {
      const late = planLateTry({ settle, firstAttemptAtMs: 0, timeoutMs: 10_000, nowMs: now });
      if (late.kind === "window_ended") break;
      expect(late.untilMs).toBe(24 * H);
      slots.push(late.atMs);
      now = late.atMs;
    }
    expect(slots).toEqual([
      1 * MIN,
      6 * MIN,
      36 * MIN,
      2 * H + 36 * MIN,
      8 * H + 36 * MIN,
      14 * H + 36 * MIN,
      20 * H + 36 * MIN,
    ]);
  });

  it("a try that could not finish before the key expires is never planned", () => {
    // Window of 61 s with a 2 s timeout: the 1-minute try would end at 62 s, after the key is gone.
    expect(
      planLateTry({
        settle: { keyTtlMs: 61_000, scheduleMs: DEFAULT_SETTLE_SCHEDULE_MS },
        firstAttemptAtMs: 0,
        timeoutMs: 2_000,
        nowMs: 10_000,
      }),
    ).toEqual({ kind: "window_ended", untilMs: 61_000 });
    expect(
      planLateTry({
        settle: { keyTtlMs: 62_000, scheduleMs: DEFAULT_SETTLE_SCHEDULE_MS },
        firstAttemptAtMs: 0,
        timeoutMs: 2_000,
        nowMs: 10_000,
      }),
    ).toEqual({ kind: "try", atMs: 60_000, untilMs: 62_000 });
  });
});

describe("TOOLGATE_SETTLE_SCHEDULE_MS", () => {
  it("compresses the schedule; anything malformed keeps the default", () => {
    expect(settleScheduleMs({})).toEqual(DEFAULT_SETTLE_SCHEDULE_MS);
    expect(settleScheduleMs({ TOOLGATE_SETTLE_SCHEDULE_MS: "1000, 2000" })).toEqual([1000, 2000]);
    for (const bad of ["0", "500", "1000,x", "-5", "1.5e3.2", Array(21).fill(1000).join(",")])
      expect(settleScheduleMs({ TOOLGATE_SETTLE_SCHEDULE_MS: bad })).toEqual(
        DEFAULT_SETTLE_SCHEDULE_MS,
      );
  });
});

it("isoUtc formats like Date#toISOString, to the second", () => {
  for (const ms of [0, 951_782_400_000, 1_796_000_123_456, 4_102_444_799_000, 1_709_164_800_000])
    expect(isoUtc(ms)).toBe(
      new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000", ""),
    );
});
