// When a caller waiting for an operation may stop (domain/wait.ts): a default wait lets the answer
// go once only a person's decision is left; an explicit wait holds out for it; an approval that
// expires within the wait settles by itself, so it is still waited for.
import { describe, expect, it } from "vitest";
import type { OperationPlan, OperationState } from "../../src/domain/operation/index.ts";
import { waitIsOver } from "../../src/domain/wait.ts";
import { executing, plan } from "./operation/fixtures.ts";

const NOW = 1_000_000;
const DEADLINE = NOW + 10_000;
const awaiting: OperationState = { phase: "awaiting_approval", requestedAtMs: NOW - 5 };
const withApproval = (expiresAtMs: number): OperationPlan => ({
  ...plan("keyed"),
  approval: {
    inputHash: "h",
    toolVersion: "v1",
    requestedBy: "u1",
    fourEyes: false,
    expiresAtMs,
    preview: false,
  },
});
const locked: OperationState = {
  phase: "awaiting_lock",
  requestedAtMs: NOW,
  blockedBy: null,
};
const retry = (dueAtMs: number): OperationState => ({
  phase: "retry_scheduled",
  attempt: 1,
  dueAtMs,
  firstAttemptAtMs: NOW,
  reason: "",
  mayHaveApplied: null,
});

describe("waitIsOver", () => {
  it("a default wait stops at once when the operation awaits a person; an explicit wait holds", () => {
    const p = withApproval(NOW + 15 * 60_000);
    expect(waitIsOver(awaiting, p, NOW, DEADLINE, false)).toBe(true);
    expect(waitIsOver(awaiting, p, NOW, DEADLINE, true)).toBe(false);
    expect(waitIsOver(awaiting, p, DEADLINE, DEADLINE, true)).toBe(true);
  });

  it("an approval expiring within the wait settles by itself: a default wait still waits for it", () => {
    expect(waitIsOver(awaiting, withApproval(NOW + 2_000), NOW, DEADLINE, false)).toBe(false);
    expect(waitIsOver(awaiting, withApproval(DEADLINE + 1), NOW, DEADLINE, false)).toBe(true);
  });

  it("what can settle by itself is waited for either way: executing, a lock queue, a retry due within the wait", () => {
    for (const holdForPeople of [false, true]) {
      expect(waitIsOver(executing(), plan("keyed"), NOW, DEADLINE, holdForPeople)).toBe(false);
      expect(waitIsOver(locked, plan("keyed"), NOW, DEADLINE, holdForPeople)).toBe(false);
      expect(waitIsOver(retry(NOW + 1_000), plan("keyed"), NOW, DEADLINE, holdForPeople)).toBe(
        false,
      );
      expect(waitIsOver(retry(DEADLINE + 1), plan("keyed"), NOW, DEADLINE, holdForPeople)).toBe(
        true,
      );
    }
  });

  it("a zero wait (wait=0) is over at once, a person or not", () => {
    const p = withApproval(NOW + 1_000);
    expect(waitIsOver(awaiting, p, NOW, NOW, true)).toBe(true);
    expect(waitIsOver(executing(), plan("keyed"), NOW, NOW, false)).toBe(true);
  });
});
