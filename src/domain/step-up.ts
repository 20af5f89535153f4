// The passkey step-up's challenge (issue 35): derived from the operation id and what its approval
// binds to (operation/approval.ts `approvalHashOf`: the frozen input's hash, or with a payment's
// requirement), so an assertion made for one operation — or for other arguments of it, or for its
// earlier approval — can never approve another. Deterministic on purpose: the approver's client reads it from the operation
// (`approval.step_up.challenge`) and toolgate recomputes it to verify; no challenge is stored. Pure.
import { sha256HexSync } from "./trace-chain.ts";

const PURPOSE = "toolgate/passkey-approval/v1:";

/** The base64url challenge (of the 64 ASCII bytes of a SHA-256 hex digest) WebAuthn signs over. */
export function stepUpChallenge(operationId: string, approvalHash: string): string {
  const digest = sha256HexSync(`${PURPOSE}${operationId}:${approvalHash}`);
  return btoa(digest).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}
