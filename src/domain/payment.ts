// x402 pay-once (issue 37 item 2): the pure decisions about a paid tool. A tool declares what it may
// pay (manifest `payment`); a 402's requirement is checked against that declaration before anything
// is signed — amounts in the asset's atomic units, compared as integers, never as floats — and above
// `approval_over` a person decides first. The wire shapes are @x402/core's (v2); this file only
// reads them. One signed payload per operation: the shell stores it and resends it, never re-signs.
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import type { PaidCall } from "./public-shapes.ts";

/** The manifest's `payment`, compiled. `signer`: the tenant's signer webhook and the secret it is signed with. */
export type PaymentDeclaration = {
  protocol: "x402";
  maxAmount: string;
  asset: string;
  network: string | null;
  payTo: string | null;
  approvalOver: string | null;
  signer: { url: string; secret: string };
};

/**
 * What the operation keeps of its payment (in its plan): the requirement chosen, then the one
 * payload, then the merchant's settlement as the paid answer carried it (absent: none yet).
 */
export type StoredPayment = {
  required: PaymentRequired;
  accepted: PaymentRequirements;
  payload: PaymentPayload | null;
  paymentId: string | null;
  settlement?: Settlement;
};
/** The merchant's PAYMENT-RESPONSE as the model reads it: no payer, no extensions. */
export type Settlement = NonNullable<PaidCall["settlement"]>;

/** A paid call's envelope carries what it paid (public-shapes.ts PaidCall); never the payload. */
export function paidCallOf(stored: StoredPayment | undefined): PaidCall | null {
  if (!stored?.payload) return null;
  const { amount, asset, network, payTo } = stored.accepted;
  return {
    amount,
    asset,
    network,
    pay_to: payTo,
    payment_id: stored.paymentId,
    settlement: stored.settlement ?? null,
  };
}

/** Why a requirement is refused (the trace names it; the model reads `payment_refused`). */
export type PaymentRefusal =
  | "payment_malformed"
  | "payment_scheme"
  | "payment_network"
  | "payment_asset"
  | "payment_pay_to"
  | "payment_over_max";

export type PaymentChoice =
  | { kind: "pay"; accepted: PaymentRequirements; approval: boolean }
  | { kind: "refuse"; reason: PaymentRefusal; detail: string };

/** The schemes toolgate knows the amount of: `exact` pays exactly `amount` (an `upto` could settle more). */
export const KNOWN_SCHEMES: readonly string[] = ["exact"];
/** CAIP-2 networks toolgate knows: EVM chains and Solana. */
const KNOWN_NETWORK = /^(eip155:[0-9]{1,20}|solana:[1-9A-HJ-NP-Za-km-z]{32,44})$/;
export const ATOMIC_AMOUNT = /^(0|[1-9][0-9]{0,77})$/;

/** Addresses compare as the chain reads them: EVM hex case-insensitively, anything else exactly. */
const sameAddress = (a: string, b: string): boolean =>
  /^0x[0-9a-fA-F]+$/.test(a) && /^0x[0-9a-fA-F]+$/.test(b)
    ? a.toLowerCase() === b.toLowerCase()
    : a === b;

/** The first reason `offer` may not be paid under `declared`, or null: it may. */
export function mismatch(
  declared: PaymentDeclaration,
  offer: PaymentRequirements,
): { reason: PaymentRefusal; detail: string } | null {
  if (!KNOWN_SCHEMES.includes(offer.scheme))
    return {
      reason: "payment_scheme",
      detail: `scheme ${JSON.stringify(offer.scheme)} is not one toolgate pays`,
    };
  if (
    !KNOWN_NETWORK.test(offer.network) ||
    (declared.network !== null && offer.network !== declared.network)
  )
    return {
      reason: "payment_network",
      detail: `network ${offer.network} is not the declared one`,
    };
  if (!sameAddress(offer.asset, declared.asset))
    return {
      reason: "payment_asset",
      detail: `asset ${offer.asset} is not the declared ${declared.asset}`,
    };
  if (declared.payTo !== null && !sameAddress(offer.payTo, declared.payTo))
    return {
      reason: "payment_pay_to",
      detail: `pay-to ${offer.payTo} is not the declared ${declared.payTo}`,
    };
  if (!ATOMIC_AMOUNT.test(offer.amount))
    return {
      reason: "payment_malformed",
      detail: `amount ${JSON.stringify(offer.amount)} is not an integer`,
    };
  if (BigInt(offer.amount) > BigInt(declared.maxAmount))
    return {
      reason: "payment_over_max",
      detail: `amount ${offer.amount} is over max_amount ${declared.maxAmount}`,
    };
  return null;
}

/**
 * Which of a 402's offers toolgate pays: the first the declaration allows (a person decides first
 * when it is over `approval_over`), or a refusal naming why the first offer may not be paid. A
 * 402 without a readable x402 requirement is refused too: nothing is signed on a guess.
 */
export function choosePayment(
  declared: PaymentDeclaration,
  required: PaymentRequired | null,
): PaymentChoice {
  if (!required || required.x402Version !== 2 || required.accepts.length === 0)
    return {
      kind: "refuse",
      reason: "payment_malformed",
      detail: "the 402 carried no x402 v2 payment requirement",
    };
  for (const offer of required.accepts)
    if (mismatch(declared, offer) === null)
      return {
        kind: "pay",
        accepted: offer,
        approval:
          declared.approvalOver !== null && BigInt(offer.amount) > BigInt(declared.approvalOver),
      };
  return { kind: "refuse", ...mismatch(declared, required.accepts[0]!)! };
}

/**
 * The payment's own identifier, by which the merchant or facilitator knows it: the EIP-3009
 * authorization's nonce (EVM `exact`), else the payload's signature or transaction.
 */
export function paymentIdOf(payload: PaymentPayload): string | null {
  const inner = payload.payload as {
    authorization?: { nonce?: unknown };
    signature?: unknown;
    transaction?: unknown;
  };
  for (const candidate of [inner.authorization?.nonce, inner.signature, inner.transaction])
    if (typeof candidate === "string" && candidate.length > 0) return candidate.slice(0, 200);
  return null;
}

/**
 * What a signed payload must say besides naming the accepted requirement: an EIP-3009
 * authorization (EVM `exact`) pays exactly that amount to exactly that pay-to. Null: it does (or
 * carries no authorization toolgate can read, and the merchant's facilitator verifies the rest).
 */
export function payloadMismatch(
  accepted: PaymentRequirements,
  payload: PaymentPayload,
): string | null {
  const auth = (payload.payload as { authorization?: { to?: unknown; value?: unknown } })
    .authorization;
  if (!auth) return null;
  if (typeof auth.to !== "string" || !sameAddress(auth.to, accepted.payTo))
    return `its authorization pays ${String(auth.to)}, not ${accepted.payTo}`;
  if (String(auth.value) !== accepted.amount)
    return `its authorization is for ${String(auth.value)}, not ${accepted.amount}`;
  return null;
}

/** What the model reads when a requirement is refused: nothing was paid and nothing was performed. */
export const refusedMessage = (detail: string): string =>
  `The tool asked for a payment toolgate may not make (${detail}). Nothing was paid and the call was not performed. Do not retry; tell the user.`;

/** What the model reads when the merchant answered 402 to the signed payment. */
export const paymentFailedMessage = (detail: string): string =>
  `The tool refused the signed payment (${detail}); it answered that it did not perform the call. The payment is never signed again. Do not retry; tell the user.`;
