// Reading a state without moving it: settled or not, the next due time, and the envelope the
// model reads for each phase.
import { describe, expect, it } from "vitest";
import { envelopeFor } from "../../../src/domain/envelope.ts";
import {
  isSettled,
  nextDueAtMs,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import { executing, reconciling } from "./fixtures.ts";

describe("settled, due time and envelopes", () => {
  it("isSettled and nextDueAtMs", () => {
    expect(isSettled(executing())).toBe(false);
    expect(
      nextDueAtMs({
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: 42,
        firstAttemptAtMs: 0,
        reason: "",
        mayHaveApplied: null,
      }),
    ).toBe(42);
    expect(
      isSettled({
        phase: "outcome_unknown",
        attempt: 1,
        firstAttemptAtMs: 0,
        code: "timeout_unknown",
        ambiguousAtMs: 0,
        reconcile: "human",
        dueAtMs: null,
        lookups: 0,
        reason: "",
        ifNotApplied: null,
      }),
    ).toBe(true);
  });

  it.each([
    [executing(), "pending", "executing", ["wait"]],
    [
      {
        phase: "retry_scheduled",
        attempt: 1,
        dueAtMs: 1,
        firstAttemptAtMs: 0,
        reason: "HTTP 503",
        mayHaveApplied: null,
      },
      "pending",
      "retry_scheduled",
      ["wait"],
    ],
    [reconciling, "outcome_unknown", "timeout_unknown", ["wait", "check_status", "tell_user"]],
    [
      {
        phase: "recorded",
        attempts: 1,
        recordedAtMs: 0,
        via: "attempt",
        late: false,
        outcome: { status: "failed", code: "permanent_failure", message: "m" },
      },
      "failed",
      "permanent_failure",
      ["tell_user"],
    ],
  ] as Array<[OperationState, string, string, string[]]>)(
    "envelope for %o",
    (state, status, code, actions) => {
      expect(envelopeFor("op_1", state, "keyed")).toMatchObject({
        status,
        code,
        operation_id: "op_1",
        allowed_next_actions: actions,
      });
    },
  );

  it("a success carries the result and no code", () => {
    const envelope = envelopeFor(
      "op_1",
      {
        phase: "recorded",
        attempts: 1,
        recordedAtMs: 0,
        via: "attempt",
        late: false,
        outcome: { status: "succeeded", result: { id: 1 } },
      },
      "keyed",
    );
    expect(envelope).toEqual({ status: "succeeded", operation_id: "op_1", result: { id: 1 } });
  });
});
