// The x402 arm (domain/operation/payment.ts): a 402 ends the attempt as the shell decided; refused
// records "not paid, not performed" (unknown when an earlier attempt may have applied), accepted
// sends the next attempt or asks a person; a paid attempt that may have applied is outcome_unknown.
import { describe, expect, it } from "vitest";
import type { OperationPlan, OperationState } from "../../../src/domain/operation/index.ts";
import type { PaymentVerdict } from "../../../src/domain/operation/state.ts";
import { UNSENT_PAYMENT } from "../../../src/domain/operation/payment.ts";
import { executing, plan, status, step } from "./fixtures.ts";

const observation = { kind: "http_error", status: 402, retryAfterMs: null, detail: "" } as const;
const refuse: PaymentVerdict = {
  kind: "refuse",
  status: "rejected",
  code: "payment_refused",
  reason: "payment_over_max",
  message: "Nothing was paid and the call was not performed.",
};
const pay = (approval: boolean): PaymentVerdict => ({
  kind: "pay",
  amount: "10",
  asset: "0xa",
  payTo: "0xb",
  network: "eip155:1",
  approval: approval
    ? {
        inputHash: "h",
        toolVersion: "v",
        requestedBy: "u1",
        fourEyes: true,
        expiresAtMs: 99_999,
        preview: false,
      }
    : null,
});
const required = (verdict: PaymentVerdict, attempt = 1) =>
  ({ type: "payment_required", attempt, observation, verdict }) as const;
const paidPlan: OperationPlan = {
  ...plan("keyed"),
  payment: {
    required: { x402Version: 2, resource: { url: "u" }, accepts: [] },
    accepted: {
      scheme: "exact",
      network: "eip155:1",
      asset: "0xa",
      amount: "10",
      payTo: "0xb",
      maxTimeoutSeconds: 1,
      extra: {},
    },
    payload: { x402Version: 2, accepted: {} as never, payload: {} },
    paymentId: "0x01",
  },
};

describe("payment_required", () => {
  it("refused: recorded rejected payment_refused, nothing sent after it", () => {
    const s = step(executing(1), required(refuse));
    expect(s.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "rejected", code: "payment_refused" },
    });
    expect(s.effects.some((e) => e.kind === "send_attempt")).toBe(false);
  });
  it("refused after an earlier attempt may have applied: still unknown, never 'not performed'", () => {
    const doubt = {
      ...executing(2),
      mayHaveApplied: { atMs: 0, code: "timeout_unknown" },
    } as OperationState;
    expect(step(doubt, required(refuse, 2)).state.phase).toBe("outcome_unknown");
  });
  it("accepted: the next attempt at once; over approval_over: a person, nothing sent", () => {
    const now = step(executing(1), required(pay(false)));
    expect(now.state).toMatchObject({ phase: "executing", attempt: 2 });
    expect(now.effects).toContainEqual({ kind: "send_attempt", attempt: 2 });
    const ask = step(executing(1), required(pay(true)));
    expect(ask.state.phase).toBe("awaiting_approval");
    expect(ask.effects.some((e) => e.kind === "send_attempt")).toBe(false);
  });
  it("a stale attempt's 402 changes nothing; a cancel meanwhile records cancelled, nothing paid", () => {
    expect(step(executing(2), required(pay(false), 1)).changed).toBe(false);
    expect(step(executing(1, true), required(pay(false))).state).toMatchObject({
      phase: "recorded",
      outcome: { status: "cancelled" },
    });
  });
  it("signed: stored with the attempt in flight only", () => {
    const signed = { type: "payment_signed", attempt: 1, paymentId: "0x01" } as const;
    expect(step(executing(1), signed).changed).toBe(true);
    expect(step(executing(1, true), signed).changed).toBe(false);
    expect(step(executing(2), signed).changed).toBe(false);
  });
  it("stopped after signing: a denial records it (nothing paid, said so), unknown after doubt; a hold holds a retry due now; stale: nothing", () => {
    const denied = {
      type: "payment_stopped",
      attempt: 2,
      stop: { kind: "denied", status: "rejected", code: "frozen", message: "Frozen." },
    } as const;
    const ended = step(executing(2), denied, paidPlan);
    expect(ended.state).toMatchObject({
      phase: "recorded",
      outcome: { status: "rejected", code: "frozen", message: `Frozen. ${UNSENT_PAYMENT}` },
    });
    expect(ended.effects.some((e) => e.kind === "send_attempt")).toBe(false);
    const doubt = {
      ...executing(2),
      mayHaveApplied: { atMs: 0, code: "timeout_unknown" },
    } as OperationState;
    expect(step(doubt, denied, paidPlan).state.phase).not.toBe("recorded");
    const hold = { kind: "freeze", freezeId: "fz", reason: "r" } as const;
    const held = step(executing(2), { ...denied, stop: { kind: "hold", hold } }, paidPlan);
    expect(held.state).toMatchObject({
      phase: "held",
      resume: { phase: "retry_scheduled", attempt: 2 },
    });
    expect(step(executing(3), denied, paidPlan).changed).toBe(false);
  });
  it("a paid keyed attempt answered 503 is outcome_unknown (resend the same payment), an unpaid one a retry", () => {
    const event = { type: "attempt_finished", attempt: 1, observation: status(503) } as const;
    expect(step(executing(1), event, paidPlan).state).toMatchObject({
      phase: "outcome_unknown",
      reconcile: "resend",
    });
    expect(step(executing(1), event).state.phase).toBe("retry_scheduled");
  });
});
