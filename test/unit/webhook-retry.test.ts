// Webhook retry timing: the Standard Webhooks schedule as a table, jitter within [half, all] of each
// step, deterministic per (event, endpoint, attempt), about a day in all, then `failed` (also past the
// event's age limit); when an endpoint shows as failing; the queue's own retry delays.
import { describe, expect, it } from "vitest";
import {
  endpointState,
  FAILING_AFTER,
  planWebhookRetry,
  queueRetryDelaySeconds,
  WEBHOOK_MAX_AGE_MS,
  WEBHOOK_MAX_ATTEMPTS,
} from "../../src/domain/webhook-retry.ts";

const S = 1_000;
const M = 60 * S;
const H = 60 * M;
/** A first attempt just now and a retention far away: only the schedule decides. */
const FAR = { firstAttemptAtMs: 0, notAfterMs: 30 * 24 * H };

describe("planWebhookRetry", () => {
  // [failed attempt, step: the delay lies in [step/2, step]]
  const table: Array<[number, number]> = [
    [1, 5 * S],
    [2, 5 * M],
    [3, 30 * M],
    [4, 2 * H],
    [5, 5 * H],
    [6, 10 * H],
    [7, 10 * H],
  ];
  it.each(table)(
    "after failed attempt %i the delay is jittered within [step/2, step] of %i ms",
    (attempt, step) => {
      for (let event = 0; event < 100; event++) {
        const plan = planWebhookRetry({
          eventId: `evt_${event}`,
          endpointId: "wh_a",
          attempt,
          nowMs: 1_000,
          ...FAR,
        });
        expect(plan.kind).toBe("retry");
        if (plan.kind !== "retry") return;
        expect(plan.delayMs).toBeGreaterThanOrEqual(step / 2);
        expect(plan.delayMs).toBeLessThanOrEqual(step);
        expect(plan.dueAtMs).toBe(1_000 + plan.delayMs);
      }
    },
  );

  it("gives up after the eighth attempt: the delivery is failed", () => {
    expect(WEBHOOK_MAX_ATTEMPTS).toBe(8);
    expect(
      planWebhookRetry({ eventId: "evt_1", endpointId: "wh_a", attempt: 8, nowMs: 0, ...FAR }),
    ).toEqual({ kind: "failed", reason: "schedule_ended" });
  });

  it("spans about a day from the first attempt to the last", () => {
    for (let event = 0; event < 50; event++) {
      let total = 0;
      for (let attempt = 1; attempt < WEBHOOK_MAX_ATTEMPTS; attempt++) {
        const plan = planWebhookRetry({
          eventId: `evt_${event}`,
          endpointId: "wh_a",
          attempt,
          nowMs: total,
          firstAttemptAtMs: 0,
          notAfterMs: 7 * 24 * H,
        });
        expect(plan.kind).toBe("retry");
        if (plan.kind === "retry") total += plan.delayMs;
      }
      expect(total).toBeGreaterThanOrEqual(13 * H);
      expect(total).toBeLessThanOrEqual(28 * H);
    }
  });

  it("is deterministic per (event, endpoint, attempt) and differs between endpoints", () => {
    const at = (endpointId: string) =>
      planWebhookRetry({ eventId: "evt_x", endpointId, attempt: 5, nowMs: 0, ...FAR });
    expect(at("wh_a")).toEqual(at("wh_a"));
    const spread = new Set(Array.from({ length: 40 }, (_, i) => JSON.stringify(at(`wh_${i}`))));
    expect(spread.size).toBeGreaterThan(30);
  });
});

describe("the schedule ends", () => {
  it("whatever the attempt number: past the eighth (or below the first) the delivery is failed", () => {
    for (const attempt of [0, 8, 9, 100])
      expect(
        planWebhookRetry({ eventId: "evt_1", endpointId: "wh_a", attempt, nowMs: 0, ...FAR }),
      ).toEqual({ kind: "failed", reason: "schedule_ended" });
  });

  it("a retry due past the event's age limit (36 h after its first attempt) is not planned", () => {
    expect(WEBHOOK_MAX_AGE_MS).toBe(36 * H);
    // Attempt 7 made 30 h after the first (the queue held the retries back): its 10 h step would
    // land past the limit.
    expect(
      planWebhookRetry({
        eventId: "evt_1",
        endpointId: "wh_a",
        attempt: 7,
        nowMs: 30 * H,
        firstAttemptAtMs: 0,
        notAfterMs: 30 * 24 * H,
      }),
    ).toEqual({ kind: "failed", reason: "too_old" });
  });

  it("nor past the tenant's retention of the event (it could not be redelivered either)", () => {
    expect(
      planWebhookRetry({
        eventId: "evt_1",
        endpointId: "wh_a",
        attempt: 3,
        nowMs: 0,
        firstAttemptAtMs: 0,
        notAfterMs: 10 * M,
      }),
    ).toEqual({ kind: "failed", reason: "too_old" });
  });
});

describe("queueRetryDelaySeconds", () => {
  it.each([
    [1, 5],
    [2, 10],
    [3, 20],
    [6, 160],
    [7, 300],
    [10, 300],
    [1000, 300],
  ])("try %i of a message comes back after %i s", (attempts, seconds) => {
    expect(queueRetryDelaySeconds(attempts)).toBe(seconds);
  });

  it("spreads the queue's 10 tries over more than 20 minutes", () => {
    let total = 0;
    for (let attempts = 1; attempts <= 10; attempts++) total += queueRetryDelaySeconds(attempts);
    expect(total).toBeGreaterThan(20 * 60);
  });
});

describe("endpointState", () => {
  it.each([
    [0, "healthy"],
    [1, "healthy"],
    [FAILING_AFTER - 1, "healthy"],
    [FAILING_AFTER, "failing"],
    [FAILING_AFTER + 5, "failing"],
  ] as const)("%i consecutive failures → %s", (failures, state) => {
    expect(endpointState(failures)).toBe(state);
  });

  it("a delivery given up makes it failing whatever its count; a success (both cleared) heals it", () => {
    expect(endpointState(1, 1_000)).toBe("failing");
    expect(endpointState(0, null)).toBe("healthy");
  });
});
