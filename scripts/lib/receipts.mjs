// Offline verification of toolgate receipts (issue 37) with public data only: a bundle (GET
// /v1/receipts, or an operation's GET …/receipt answer) and the tenant's JWKS. Each receipt: its
// Ed25519 signature over the RFC 8785 canonical JSON of its payload, by a key of the JWKS whose
// window (not_before … not_after) holds the time it was signed; its hash; its chain (per operation:
// seq 1, 2, … each naming the hash of the one before). Written apart from toolgate's own code on
// purpose (test/unit/verify-receipts.test.ts checks both canonical forms agree), so a bug there is
// not repeated here. WebCrypto only: runs in Node and in workerd.
import { importJWK } from "jose";

export const RECEIPT_TYPE = "toolgate.receipt/v1";

/** RFC 8785: ECMAScript number and string forms, object keys sorted by UTF-16 code units. */
export function canonicalize(value) {
  if (value === null || typeof value === "boolean" || typeof value === "string")
    return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("a non-finite number has no canonical form");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalize).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(value[k])}`).join(",")}}`;
  }
  throw new TypeError(`a ${typeof value} has no canonical form`);
}

const bytes = (text) => new TextEncoder().encode(text);

export async function sha256Hex(text) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes(text)));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function fromBase64url(text) {
  if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text)) return null;
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
}

/** The JWKS's keys by kid with their windows; a JWKS that does not read is an Error (could not run). */
export async function readJwks(jwks) {
  if (!jwks || !Array.isArray(jwks.keys)) throw new Error("the JWKS has no keys array");
  const keys = new Map();
  for (const jwk of jwks.keys) {
    if (jwk?.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.kid !== "string")
      throw new Error(`the JWKS holds a key that is not an Ed25519 key with a kid`);
    const notBeforeMs = Date.parse(jwk.not_before);
    const notAfterMs = Date.parse(jwk.not_after);
    if (!Number.isFinite(notBeforeMs) || !Number.isFinite(notAfterMs))
      throw new Error(`key ${jwk.kid} has no not_before/not_after window`);
    const { kty, crv, x } = jwk;
    const key = await importJWK({ kty, crv, x }, "EdDSA");
    keys.set(jwk.kid, { key, notBeforeMs, notAfterMs });
  }
  return keys;
}

/** The receipts of a bundle, an operation's answer ({ chain }) or a bare list; an Error if none of these. */
export function receiptsOf(document) {
  if (Array.isArray(document)) return { tenant: null, receipts: document };
  if (document && Array.isArray(document.receipts))
    return {
      tenant: typeof document.tenant === "string" ? document.tenant : null,
      receipts: document.receipts,
    };
  if (document && Array.isArray(document.chain)) return { tenant: null, receipts: document.chain };
  throw new Error("not a receipt bundle: no receipts (or chain) array");
}

/**
 * Every problem of the bundle, one per broken receipt or link: `{ index, operation_id, reason }`.
 * Empty: every receipt verifies and every chain is whole.
 */
export async function verifyReceipts(document, jwks) {
  const { tenant, receipts } = receiptsOf(document);
  const keys = await readJwks(jwks);
  const problems = [];
  const hashes = new Map();
  for (const [index, receipt] of receipts.entries()) {
    const reason = await checkOne(receipt, keys, tenant);
    const operationId = receipt?.payload?.operation_id ?? null;
    if (reason) problems.push({ index, operation_id: operationId, reason });
    else hashes.set(index, await sha256Hex(canonicalize(receipt.payload)));
  }
  // Chains, per operation: 1, 2, … with no gap, each naming the hash of the one before.
  const byOperation = new Map();
  for (const [index, receipt] of receipts.entries()) {
    if (!hashes.has(index)) continue;
    const list = byOperation.get(receipt.payload.operation_id) ?? [];
    list.push({ index, payload: receipt.payload, hash: hashes.get(index) });
    byOperation.set(receipt.payload.operation_id, list);
  }
  for (const [operationId, list] of byOperation) {
    list.sort((a, b) => a.payload.seq - b.payload.seq);
    let previous = null;
    for (const [at, link] of list.entries()) {
      const expected = at + 1;
      const say = (reason) =>
        problems.push({ index: link.index, operation_id: operationId, reason });
      if (link.payload.seq !== expected) {
        say(`the chain skips a link: receipt ${link.payload.seq} where ${expected} was due`);
        break;
      }
      if (link.payload.previous_receipt_hash !== (previous?.hash ?? null)) {
        say(`receipt ${expected} does not name the hash of the receipt before it`);
        break;
      }
      previous = link;
    }
  }
  return problems;
}

async function checkOne(receipt, keys, tenant) {
  const payload = receipt?.payload;
  if (!payload || typeof payload !== "object" || Array.isArray(payload)) return "no payload";
  if (payload.type !== RECEIPT_TYPE) return `payload type is not ${RECEIPT_TYPE}`;
  if (receipt.alg !== "EdDSA") return "alg is not EdDSA";
  if (tenant !== null && payload.tenant !== tenant) return "a receipt of another tenant";
  if (!Number.isInteger(payload.seq) || payload.seq < 1) return "no seq";
  const key = keys.get(payload.kid);
  if (!key) return `signed by a key the JWKS does not hold (${String(payload.kid)})`;
  const signature = fromBase64url(receipt.signature);
  if (!signature || signature.length !== 64) return "the signature is not 64 base64url bytes";
  let canonical;
  try {
    canonical = canonicalize(payload);
  } catch (error) {
    return `the payload has no canonical form (${error.message})`;
  }
  const valid = await crypto.subtle.verify(
    { name: "Ed25519" },
    key.key,
    signature,
    bytes(canonical),
  );
  if (!valid)
    return "the signature does not verify: the payload was changed, or another key signed it";
  const at = payload.issued_at_ms;
  if (!Number.isFinite(at) || at < key.notBeforeMs || at > key.notAfterMs)
    return `signed at ${Number.isFinite(at) ? new Date(at).toISOString() : String(at)}, outside key ${payload.kid}'s window`;
  if (receipt.hash !== undefined && receipt.hash !== (await sha256Hex(canonical)))
    return "its hash is not the hash of its payload";
  return null;
}
