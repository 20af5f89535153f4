// Logical operation identity. The operation id is a hash of (tenant, scope, tool, operation key);
// the idempotency key sent upstream is derived from the operation id alone (keyed by deployment
// key material), so it is identical on every attempt, after every crash, and whichever call id the
// model used to propose it, yet the operation id the model reads in every envelope does not give
// it away.
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { idPrefix, jurisdictionOf } from "./jurisdiction.ts";

export type OperationId = `op_${string}`;
export type Risk = "read" | "write" | "irreversible_write";
export type OperationScope = "run" | "tenant";

export type IdentityInput = {
  tenantId: string;
  runId: string;
  tool: string;
  risk: Risk;
  scope: OperationScope;
  /** Business-key field names; empty means the whole input is the key. */
  operationKey: readonly string[];
  input: Record<string, unknown>;
  callId: string;
  /** A shadow run's call (issue 22): an identity of its own, never a live operation's. */
  shadow?: boolean;
};

/** A call's input as frozen at validation: the value, its RFC 8785 text and that text's SHA-256. */
export type FrozenInput = { value: Record<string, unknown>; canonical: string; hash: string };

export type FrozenCall = {
  operationId: OperationId;
  canonicalInput: string;
  inputHash: string;
};

export async function freezeCall(call: IdentityInput): Promise<FrozenCall> {
  const canonicalInput = canonicalJson(call.input);
  const inputHash = await sha256Hex(canonicalInput);
  // Reads are safe to repeat: only a replay of the same call is deduplicated (and only within the run).
  const key =
    call.risk === "read"
      ? { call: call.callId }
      : call.operationKey.length === 0
        ? { input: call.input }
        : {
            fields: Object.fromEntries(
              call.operationKey.map((field) => [field, call.input[field] ?? null]),
            ),
          };
  const scopeValue = call.risk === "read" || call.scope === "run" ? `run:${call.runId}` : "tenant";
  const named = [call.tenantId, scopeValue, call.tool, key, ...(call.shadow ? ["shadow"] : [])];
  const digest = await sha256Hex(canonicalJson(named));
  // The tenant's jurisdiction tag (domain/jurisdiction.ts): the operation is made where its tenant lives.
  const operationId =
    `${idPrefix("op", jurisdictionOf(call.tenantId))}${digest.slice(0, 32)}` as OperationId;
  return { operationId, canonicalInput, inputHash };
}

/**
 * The key sent upstream: `tg_` + HMAC-SHA256(keySecret, operation id), 32 hex characters. Without
 * the secret the operation id (which the model sees) says nothing about it, so a model cannot
 * pre-empt or poison a pending operation's key through another tool of the same upstream.
 * `keySecret`: deployment key material, passed in by the shell (src/crypto.ts). An operation
 * stores its key in its plan when it is created: a rotated secret never changes an existing key.
 */
/** The HMAC key per key material (the same bytes every turn: src/crypto.ts derives them once). */
const hmacKeys = new WeakMap<Uint8Array<ArrayBuffer>, Promise<CryptoKey>>();

export async function idempotencyKeyFor(
  operationId: OperationId,
  keySecret: Uint8Array<ArrayBuffer>,
): Promise<string> {
  let key = hmacKeys.get(keySecret);
  if (!key) {
    key = crypto.subtle.importKey("raw", keySecret, { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
    ]);
    hmacKeys.set(keySecret, key);
  }
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", await key, new TextEncoder().encode(operationId)),
  );
  let hex = "";
  for (const byte of mac.subarray(0, 16)) hex += byte.toString(16).padStart(2, "0");
  return `tg_${hex}`;
}
