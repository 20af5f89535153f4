// A tenant's receipt signing keys (issue 37): Ed25519 pairs made here, the private half sealed like a
// tenant secret (AES-GCM under the tenant's key from TOOLGATE_SECRETS_KEY) and handed, still sealed,
// only to this tenant's operations, which sign; the public half published as a JWKS with each key's
// window (`not_before`, `not_after`). Rotation ends the current key RECEIPT_KEY_CACHE_MS later (an
// operation may still hold it that long) and starts a new one; no key is ever deleted, so every
// receipt ever signed stays verifiable.
import { calculateJwkThumbprint, exportJWK, type JWK } from "jose";
import { base64url, sealSecret } from "../../crypto.ts";
import { secretsKey } from "../../config.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { RECEIPT_KEY_CACHE_MS, RECEIPT_KEY_LIFETIME_MS } from "../../domain/receipt.ts";
import type { SealedSecret } from "../../domain/tenant-facts.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantRecord } from "../store/tenant-rows.ts";
import type { TenantError } from "./contracts.ts";

/** What an operation signs with: the key's id, its sealed private half and its window. */
export type ReceiptSigner = {
  kid: string;
  sealed: SealedSecret;
  notBeforeMs: number;
  notAfterMs: number;
};
/** A published key: the public JWK with its id, algorithm and window (ISO 8601). */
export type ReceiptJwk = JWK & {
  kid: string;
  alg: "EdDSA";
  use: "sig";
  not_before: string;
  not_after: string;
};

type KeyRow = {
  kid: string;
  public_jwk: string;
  iv: string;
  ciphertext: string;
  not_before_ms: number;
  not_after_ms: number;
};

/** The sealed name of a key's private half: its own additional data, never a secret's. */
export const sealedKeyName = (kid: string) => `receipt-key/${kid}`;

/** The key signing now (made when there is none, or the newest ends within the cache bound). */
export async function receiptSigner(
  store: SqlStore,
  env: Env,
  tenantId: string,
): Promise<Result<ReceiptSigner, TenantError>> {
  if (tenantRecord(store)?.id !== tenantId)
    return err({ code: "not_found", detail: "no such tenant" });
  const current = usableKey(store, Date.now());
  if (current) return ok(signerOf(current));
  const made = await makeKey(env, tenantId);
  if (!made.ok) return made;
  // The awaits let another call in: it may have made one meanwhile (keep the first, one key signs).
  const nowMs = Date.now();
  const raced = usableKey(store, nowMs);
  if (raced) return ok(signerOf(raced));
  insertKey(store, made.value, nowMs);
  return ok(signerOf(usableKey(store, nowMs)!));
}

/**
 * POST /v1/receipts/keys/rotate: every key still open ends RECEIPT_KEY_CACHE_MS from now and a new
 * one starts now. Answers the JWKS as it now stands.
 */
export async function rotateReceiptKey(
  store: SqlStore,
  env: Env,
  tenantId: string,
): Promise<Result<ReceiptJwk[], TenantError>> {
  if (tenantRecord(store)?.id !== tenantId)
    return err({ code: "not_found", detail: "no such tenant" });
  const made = await makeKey(env, tenantId);
  if (!made.ok) return made;
  const nowMs = Date.now();
  store.transaction(() => {
    store.ensureSchema();
    store.run(
      "UPDATE receipt_keys SET not_after_ms = ? WHERE not_after_ms > ?",
      nowMs + RECEIPT_KEY_CACHE_MS,
      nowMs + RECEIPT_KEY_CACHE_MS,
    );
    insertKey(store, made.value, nowMs);
  });
  return ok(receiptJwks(store));
}

/** Every key the tenant ever signed with, oldest first: what a verifier needs, and nothing private. */
export function receiptJwks(store: SqlStore): ReceiptJwk[] {
  if (!store.exists("receipt_keys")) return [];
  return store.all<KeyRow>("SELECT * FROM receipt_keys ORDER BY not_before_ms, kid").map((row) => ({
    ...(JSON.parse(row.public_jwk) as JWK),
    kid: row.kid,
    alg: "EdDSA",
    use: "sig",
    not_before: new Date(row.not_before_ms).toISOString(),
    not_after: new Date(row.not_after_ms).toISOString(),
  }));
}

/** The newest key that still has more than the cache bound to run. */
function usableKey(store: SqlStore, nowMs: number): KeyRow | null {
  if (!store.exists("receipt_keys")) return null;
  return store.one<KeyRow>(
    "SELECT * FROM receipt_keys WHERE not_before_ms <= ? AND not_after_ms > ? ORDER BY not_before_ms DESC LIMIT 1",
    nowMs,
    nowMs + RECEIPT_KEY_CACHE_MS,
  );
}

const signerOf = (row: KeyRow): ReceiptSigner => ({
  kid: row.kid,
  sealed: { iv: row.iv, ciphertext: row.ciphertext },
  notBeforeMs: row.not_before_ms,
  notAfterMs: row.not_after_ms,
});

type Made = { kid: string; jwk: JWK; sealed: SealedSecret };

/** A new Ed25519 pair: its kid is the public key's RFC 7638 thumbprint; the private half sealed. */
async function makeKey(env: Env, tenantId: string): Promise<Result<Made, TenantError>> {
  const master = secretsKey(env);
  if (!master.ok) return master;
  const pair = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  const { kty, crv, x } = await exportJWK(pair.publicKey);
  const jwk: JWK = { kty, crv, x };
  const kid = await calculateJwkThumbprint(jwk);
  const pkcs8 = new Uint8Array(
    (await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer,
  );
  const sealed = await sealSecret(master.value, tenantId, sealedKeyName(kid), base64url(pkcs8));
  return ok({ kid, jwk, sealed });
}

function insertKey(store: SqlStore, made: Made, nowMs: number): void {
  store.ensureSchema();
  store.run(
    "INSERT INTO receipt_keys (kid, public_jwk, iv, ciphertext, not_before_ms, not_after_ms) VALUES (?, ?, ?, ?, ?, ?)",
    made.kid,
    JSON.stringify(made.jwk),
    made.sealed.iv,
    made.sealed.ciphertext,
    nowMs,
    nowMs + RECEIPT_KEY_LIFETIME_MS,
  );
}
