// Webhook retry timing: the Standard Webhooks schedule as a table, jitter within [half, all] of each
// step, deterministic per (event, endpoint, attempt), about a day in all, then `failed`; and when an
// endpoint shows as failing.
import { describe, expect, it } from "vitest";
import {
  endpointState,
  FAILING_AFTER,
  planWebhookRetry,
  WEBHOOK_MAX_ATTEMPTS,
} from "../../src/domain/webhook-retry.ts";

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

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
      planWebhookRetry({ eventId: "evt_1", endpointId: "wh_a", attempt: 8, nowMs: 0 }),
    ).toEqual({
      kind: "failed",
    });
  });

  it("spans about a day from the first attempt to the last", () => {
    for (let event = 0; event < 50; event++) {
      let total = 0;
      for (let attempt = 1; attempt < WEBHOOK_MAX_ATTEMPTS; attempt++) {
        const plan = planWebhookRetry({
          eventId: `evt_${event}`,
          endpointId: "wh_a",
          attempt,
          nowMs: 0,
        });
        if (plan.kind === "retry") total += plan.delayMs;
      }
      expect(total).toBeGreaterThanOrEqual(13 * H);
      expect(total).toBeLessThanOrEqual(28 * H);
    }
  });

  it("is deterministic per (event, endpoint, attempt) and differs between endpoints", () => {
    const at = (endpointId: string) =>
      planWebhookRetry({ eventId: "evt_x", endpointId, attempt: 5, nowMs: 0 });
    expect(at("wh_a")).toEqual(at("wh_a"));
    const spread = new Set(Array.from({ length: 40 }, (_, i) => JSON.stringify(at(`wh_${i}`))));
    expect(spread.size).toBeGreaterThan(30);
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
});
