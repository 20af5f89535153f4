// The manifest's `payment` (issue 37 item 2) → the compiled declaration: checked whole or refused.
// The signer is a webhook the tenant runs, so its URL passes the webhook rules (https, allow-listed
// host, never a private address); its secret is one of the tenant's, fetched with the tool's others.
import type { PaymentDeclaration } from "../../domain/payment.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { checkWebhookUrl } from "../../events/webhook-url.ts";
import type { HostPolicy, Manifest, ManifestError } from "./schema.ts";

export function compilePayment(
  m: Manifest,
  hosts: HostPolicy,
): Result<PaymentDeclaration | null, ManifestError> {
  const p = m.payment;
  if (!p) return ok(null);
  if (p.approval_over !== undefined && BigInt(p.approval_over) >= BigInt(p.max_amount))
    return err({
      code: "invalid_manifest",
      detail: "payment.approval_over: must be below max_amount, or no payment would ever ask",
    });
  const signer = checkWebhookUrl(p.signer.url, hosts);
  if (!signer.ok)
    return err({
      code: "upstream_not_allowed",
      detail: `payment.signer.url: ${signer.error.detail}`,
    });
  return ok({
    protocol: p.protocol,
    maxAmount: p.max_amount,
    asset: p.asset,
    network: p.network ?? null,
    payTo: p.pay_to ?? null,
    approvalOver: p.approval_over ?? null,
    signer: { url: signer.value, secret: p.signer.secret },
  });
}
