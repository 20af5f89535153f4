// The tenant index's feed rules (issue 20): what an event tells the index, and which wins when the
// queue delivers events out of order or twice.
import { describe, expect, it } from "vitest";
import {
  decodeCursor,
  encodeCursor,
  indexPatch,
  quantile,
  replaces,
  subjectsOf,
} from "../../src/domain/index-feed.ts";
import type { ToolgateEvent } from "../../src/domain/journal/events.ts";

const event = (
  type: ToolgateEvent["type"],
  at: number,
  data: Record<string, unknown>,
): ToolgateEvent =>
  ({
    id: `evt_${"0".repeat(32)}`,
    type,
    at_ms: at,
    tenant_id: "ten_1",
    run_id: "run_1",
    operation_id: "op_1",
    tool: "refund",
    // Only the fields each case reads (the reader trusts the event's schema, checked by the consumer).
    data: { created_at_ms: 100, ...data },
  }) as ToolgateEvent;

describe("index feed", () => {
  it("a recorded outcome is never replaced by a late approval or unknown event", () => {
    const recorded = indexPatch(
      event("operation.recorded", 300, {
        status: "succeeded",
        code: null,
        attempts: 2,
        latency_ms: 40,
      }),
    ).op!;
    const late = indexPatch(event("approval.requested", 200, { requested_by: "u1" })).op!;
    const unknown = indexPatch(
      event("operation.outcome_unknown", 400, { code: "timeout_unknown" }),
    ).op!;
    expect(recorded).toMatchObject({
      status: "succeeded",
      attempts: 2,
      latency_ms: 40,
      settled_at_ms: 300,
      created_at_ms: 100,
    });
    expect(replaces(recorded, late)).toBe(false);
    expect(replaces(recorded, unknown)).toBe(false);
    expect(replaces(late, recorded)).toBe(true);
    expect(replaces(unknown, late)).toBe(false);
  });

  it("an approval request names the run's user; a rejection carries its code", () => {
    expect(indexPatch(event("approval.requested", 1, { requested_by: "u7" })).run).toMatchObject({
      user_id: "u7",
      usage: null,
    });
    expect(indexPatch(event("approval.decided", 2, { state: "rejected" })).op).toMatchObject({
      status: "rejected",
      code: "approval_rejected",
    });
  });

  it("subjects are top-level *_id scalars only", () => {
    expect(
      subjectsOf({
        customer_id: "cus_42",
        order_id: 7,
        amount: 5,
        nested: { user_id: "x" },
        id: "z",
        paid: "yes",
        customerId: "c",
      }),
    ).toEqual([
      ["customer_id", "cus_42"],
      ["order_id", "7"],
      ["customerId", "c"],
    ]);
    expect(subjectsOf(["cus_1"])).toEqual([]);
  });

  it("cursors round-trip and refuse what they did not make; quantiles are nearest-rank", () => {
    expect(decodeCursor(encodeCursor(1796370922514, "op_abc"))).toEqual({
      atMs: 1796370922514,
      id: "op_abc",
    });
    expect(decodeCursor("bm90LW91cnM")).toBeNull();
    expect(quantile([10, 20, 30, 40], 0.5)).toBe(20);
    expect(quantile([10, 20, 30, 40], 0.95)).toBe(40);
    expect(quantile([], 0.5)).toBeNull();
  });
});
