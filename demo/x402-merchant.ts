// A fake x402 merchant, its facilitator and a tenant's payment signer, served by demo/upstream.ts
// (issue 37 item 2). The merchant answers an unpaid write 402 with a PAYMENT-REQUIRED requirement;
// a paid one is verified and settled once per payment id by the facilitator (it keeps every
// settlement), performed once, and answered with PAYMENT-RESPONSE; the same payment again replays
// that answer, and GET /x402/payments/{id} answers it too (settled by the payment's own identifier,
// never a second settlement). The signer
// (POST /webhooks/x402-signer) signs whatever requirement it is sent with a fresh nonce, so a second
// signature would be a second, different payment. Wire encodings are @x402/core's.
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import type { PaymentPayload, PaymentRequirements, SettleResponse } from "@x402/core/types";

export const TEST_SIGNATURE = "0xsigned-by-the-test-signer";
export const MERCHANT_PAY_TO = "0x00000000000000000000000000000000000000aa";
export const TEST_ASSET = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
export const TEST_NETWORK = "eip155:84532";

/** What the merchant asks for (POST /_control/x402 replaces parts of it per namespace). */
export type MerchantConfig = Pick<
  PaymentRequirements,
  "scheme" | "amount" | "asset" | "payTo" | "network"
>;

export type MerchantState = {
  config: MerchantConfig;
  /** The facilitator's settlements, by payment id (one per id, ever). */
  settlements: string[];
  /** Payment id → the answer given when it was settled (replayed for the same payment). */
  answers: Map<string, { body: unknown; settle: SettleResponse }>;
  /**
   * The signer's answers held back (POST /_control/x402-signer `{ "hold": true }`) until released
   * (`{ "hold": false }`): a signer that takes its time, for what happens meanwhile. Null: not held.
   */
  signerHeld: Array<() => void> | null;
};

export const newMerchant = (): MerchantState => ({
  config: {
    scheme: "exact",
    amount: "10000",
    asset: TEST_ASSET,
    payTo: MERCHANT_PAY_TO,
    network: TEST_NETWORK,
  },
  settlements: [],
  answers: new Map(),
  signerHeld: null,
});

/** Holds the signer's answers from now on, or releases every one held (POST /_control/x402-signer). */
export function holdSigner(merchant: MerchantState, hold: boolean): void {
  const held = merchant.signerHeld ?? [];
  merchant.signerHeld = hold ? held : null;
  if (!hold) for (const answer of held) answer();
}

const requirementOf = (config: MerchantConfig): PaymentRequirements => ({
  ...config,
  maxTimeoutSeconds: 60,
  extra: { name: "USDC", version: "2" },
});

type Send = (status: number, body: unknown, headers?: Record<string, string>) => void;

/**
 * One write to /x402/…: `fault` is the request's scripted fault (ok, commit_then_hang,
 * commit_then_reset; any other answers as scripted before payment is looked at).
 */
export function serveMerchant(
  merchant: MerchantState,
  req: IncomingMessage,
  res: ServerResponse,
  fault: { kind: string; status?: number },
  commit: () => { body: unknown },
  hang: () => void,
  send: Send,
): void {
  const requirement = requirementOf(merchant.config);
  const challenge = (error?: string) =>
    send(
      402,
      { error: error ?? "payment required" },
      {
        "PAYMENT-REQUIRED": encodePaymentRequiredHeader({
          x402Version: 2,
          ...(error ? { error } : {}),
          resource: { url: `http://merchant.test${req.url ?? "/"}` },
          accepts: [requirement],
        }),
      },
    );
  const header = req.headers["payment-signature"];
  if (typeof header !== "string") return challenge();
  let payload: PaymentPayload;
  try {
    payload = decodePaymentSignatureHeader(header);
  } catch {
    return challenge("invalid_payment_header");
  }
  const id = String(
    (payload.payload as { authorization?: { nonce?: unknown } }).authorization?.nonce ?? "",
  );
  const paid = merchant.answers.get(id);
  if (paid)
    return send(200, paid.body, {
      "PAYMENT-RESPONSE": encodePaymentResponseHeader(paid.settle),
      "Idempotent-Replayed": "true",
    });
  // The facilitator's verify: the test signer's signature over exactly this requirement.
  const signature = (payload.payload as { signature?: unknown }).signature;
  if (signature !== TEST_SIGNATURE || canonical(payload.accepted) !== canonical(requirement))
    return challenge("invalid_payment");
  if (fault.kind === "status") return send(fault.status ?? 500, { error: "scripted" });
  // Settled (once per payment id), then performed.
  merchant.settlements.push(id);
  const settle: SettleResponse = {
    success: true,
    transaction: `0xtx${merchant.settlements.length.toString(16).padStart(8, "0")}`,
    network: requirement.network,
    payer: "0x00000000000000000000000000000000000000bb",
  };
  const { body } = commit();
  merchant.answers.set(id, { body, settle });
  if (fault.kind === "commit_then_hang") return hang();
  if (fault.kind === "commit_then_reset") return void req.socket.destroy();
  send(200, body, { "PAYMENT-RESPONSE": encodePaymentResponseHeader(settle) });
}

/** GET /x402/payments/{id}: the answer given when that payment was settled (200), or 404. */
export function lookupPayment(merchant: MerchantState, id: string, send: Send): void {
  const paid = merchant.answers.get(id);
  if (!paid) return send(404, { error: "no such payment" });
  send(200, paid.body, { "PAYMENT-RESPONSE": encodePaymentResponseHeader(paid.settle) });
}

/** The tenant's signer: one fresh payment (a new nonce) for the requirement it was sent. */
export function serveSigner(merchant: MerchantState, body: unknown, send: Send): void {
  if (merchant.signerHeld)
    return void merchant.signerHeld.push(() => serveSigner(merchant, body, send));
  const accepted = (body as { accepted?: PaymentRequirements } | null)?.accepted;
  if (!accepted) return send(400, { error: "no accepted requirement" });
  const payload: PaymentPayload = {
    x402Version: 2,
    accepted,
    payload: {
      signature: TEST_SIGNATURE,
      authorization: {
        from: "0x00000000000000000000000000000000000000bb",
        to: accepted.payTo,
        value: accepted.amount,
        validAfter: "0",
        validBefore: "4102444800",
        nonce: `0x${randomBytes(32).toString("hex")}`,
      },
    },
  };
  send(200, { payment_payload: payload });
}

/** JSON with sorted keys: a requirement read back may list its fields in another order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
