// x402 decisions (domain/payment.ts) as a table: which 402 offer is paid under a declaration, why
// one is refused, when a person is asked; amounts are integers in atomic units, never floats.
import { describe, expect, it } from "vitest";
import type { PaymentRequired, PaymentRequirements } from "@x402/core/types";
import {
  choosePayment,
  payloadMismatch,
  paymentIdOf,
  type PaymentDeclaration,
} from "../../src/domain/payment.ts";

const declared: PaymentDeclaration = {
  protocol: "x402",
  maxAmount: "50000",
  asset: "0xAbC0000000000000000000000000000000000001",
  network: null,
  payTo: "0x00000000000000000000000000000000000000aa",
  approvalOver: "10000",
  signer: { url: "https://signer.example/sign", secret: "S" },
};
const offer = (over: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
  scheme: "exact",
  network: "eip155:8453",
  asset: "0xabc0000000000000000000000000000000000001",
  amount: "10000",
  payTo: "0x00000000000000000000000000000000000000AA",
  maxTimeoutSeconds: 60,
  extra: {},
  ...over,
});
const required = (...accepts: PaymentRequirements[]): PaymentRequired => ({
  x402Version: 2,
  resource: { url: "https://merchant.example/r" },
  accepts,
});

describe("choosePayment", () => {
  it.each([
    ["at approval_over: paid without asking", [offer()], { kind: "pay", approval: false }],
    [
      "one over approval_over: a person first",
      [offer({ amount: "10001" })],
      { kind: "pay", approval: true },
    ],
    ["at max_amount", [offer({ amount: "50000" })], { kind: "pay", approval: true }],
    [
      "one over max_amount",
      [offer({ amount: "50001" })],
      { kind: "refuse", reason: "payment_over_max" },
    ],
    // Far beyond 2^53: compared as integers, not floats.
    [
      "a huge amount",
      [offer({ amount: "90071992547409930000000" })],
      { kind: "refuse", reason: "payment_over_max" },
    ],
    [
      "a fractional amount",
      [offer({ amount: "1.5" })],
      { kind: "refuse", reason: "payment_malformed" },
    ],
    [
      "another pay-to",
      [offer({ payTo: "0x00000000000000000000000000000000000000bb" })],
      { kind: "refuse", reason: "payment_pay_to" },
    ],
    [
      "another asset",
      [offer({ asset: "0xdef0000000000000000000000000000000000001" })],
      { kind: "refuse", reason: "payment_asset" },
    ],
    [
      "an unknown scheme",
      [offer({ scheme: "upto" })],
      { kind: "refuse", reason: "payment_scheme" },
    ],
    [
      "an unknown network",
      [offer({ network: "cosmos:hub" as `${string}:${string}` })],
      { kind: "refuse", reason: "payment_network" },
    ],
    [
      "the first offer refused, the second fits",
      [offer({ amount: "99999" }), offer({ amount: "20" })],
      { kind: "pay", approval: false },
    ],
    ["no offer", [], { kind: "refuse", reason: "payment_malformed" }],
  ] as const)("%s", (_, accepts, expected) => {
    expect(choosePayment(declared, required(...accepts))).toMatchObject(expected);
  });

  it("a declared network pins it; no requirement, or a v1 one, is refused", () => {
    const pinned = { ...declared, network: "eip155:1" };
    expect(choosePayment(pinned, required(offer()))).toMatchObject({ reason: "payment_network" });
    expect(choosePayment(declared, null)).toMatchObject({ reason: "payment_malformed" });
    expect(choosePayment(declared, { ...required(offer()), x402Version: 1 })).toMatchObject({
      reason: "payment_malformed",
    });
  });

  it("the payment's id is its authorization nonce", () => {
    const payload = {
      x402Version: 2,
      accepted: offer(),
      payload: { authorization: { nonce: "0x01" } },
    };
    expect(paymentIdOf(payload)).toBe("0x01");
    expect(paymentIdOf({ ...payload, payload: {} })).toBeNull();
  });

  it("a signed authorization pays exactly the accepted amount to the accepted pay-to", () => {
    const signed = (to: string, value: string) => ({
      x402Version: 2,
      accepted: offer(),
      payload: { authorization: { to, value, nonce: "0x01" } },
    });
    expect(
      payloadMismatch(offer(), signed("0x00000000000000000000000000000000000000aa", "10000")),
    ).toBeNull();
    expect(
      payloadMismatch(offer(), signed("0x00000000000000000000000000000000000000bb", "10000")),
    ).toMatch(/pays/);
    expect(
      payloadMismatch(offer(), signed("0x00000000000000000000000000000000000000aa", "10001")),
    ).toMatch(/is for/);
  });
});
