// Small Web Crypto helpers shared by the edge (tokens) and the tenant object (API keys).
import { signingKeyRequired, type DeploymentVars } from "./config.ts";
import { ok, type Result } from "./domain/result.ts";
export const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");

const importedKeys = new Map<string, Promise<CryptoKey>>();

export async function hmac(key: string, payload: string): Promise<string> {
  let cryptoKey = importedKeys.get(key);
  if (!cryptoKey) {
    cryptoKey = crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(key),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    importedKeys.set(key, cryptoKey);
  }
  return base64url(
    new Uint8Array(
      await crypto.subtle.sign("HMAC", await cryptoKey, new TextEncoder().encode(payload)),
    ),
  );
}

/** Compares digests, so timing reveals nothing about either value (timingSafeEqual needs equal lengths). */
export async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const [da, db] = await Promise.all(
    [a, b].map((s) => crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))),
  );
  return crypto.subtle.timingSafeEqual(da!, db!);
}

export function randomSecret(bytes = 24): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

// Tenant secrets: AES-256-GCM under a per-tenant key derived by HKDF-SHA-256 from the deployment's
// TOOLGATE_SECRETS_KEY (info = tenant id), so one tenant's ciphertext is useless under another's key.
// The additional data binds each ciphertext to its tenant and name (no swapping rows). Fingerprints
// are a keyed HMAC, so a listing never lets anyone test guesses of a value offline.
const enc = (text: string) => new TextEncoder().encode(text);
export const fromBase64url = (text: string) =>
  Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0));
type TenantKeys = { master: string; aes: Promise<CryptoKey>; mac: Promise<CryptoKey> };
const tenantKeys = new Map<string, TenantKeys>();

function keysFor(master: string, tenantId: string): TenantKeys {
  const cached = tenantKeys.get(tenantId);
  if (cached && cached.master === master) return cached;
  const base = crypto.subtle.importKey("raw", enc(master), "HKDF", false, ["deriveKey"]);
  const derive = (
    purpose: string,
    algorithm: { name: string; length: number; hash?: string },
    usages: string[],
  ) =>
    base.then((key) =>
      crypto.subtle.deriveKey(
        { name: "HKDF", hash: "SHA-256", salt: enc(`toolgate/${purpose}/v1`), info: enc(tenantId) },
        key,
        algorithm,
        false,
        usages,
      ),
    );
  const keys: TenantKeys = {
    master,
    aes: derive("tenant-secrets", { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]),
    mac: derive("secret-fingerprints", { name: "HMAC", hash: "SHA-256", length: 256 }, ["sign"]),
  };
  if (tenantKeys.size > 1024) tenantKeys.clear();
  tenantKeys.set(tenantId, keys);
  return keys;
}

export type SealedSecret = { iv: string; ciphertext: string };

export async function sealSecret(
  master: string,
  tenantId: string,
  name: string,
  value: string,
): Promise<SealedSecret> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: enc(`${tenantId}/${name}`) },
    await keysFor(master, tenantId).aes,
    enc(value),
  );
  return { iv: base64url(iv), ciphertext: base64url(new Uint8Array(sealed)) };
}

export async function openSecret(
  master: string,
  tenantId: string,
  name: string,
  sealed: SealedSecret,
): Promise<string> {
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: fromBase64url(sealed.iv), additionalData: enc(`${tenantId}/${name}`) },
    await keysFor(master, tenantId).aes,
    fromBase64url(sealed.ciphertext),
  );
  return new TextDecoder().decode(plain);
}

export async function secretFingerprint(
  master: string,
  tenantId: string,
  value: string,
): Promise<string> {
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", await keysFor(master, tenantId).mac, enc(value)),
  );
  return `hmac:${base64url(mac).slice(0, 12)}`;
}

// Upstream idempotency keys are an HMAC of the operation id (domain/identity.ts): the key material
// is HKDF-SHA-256 of TOOLGATE_SIGNING_KEY under its own purpose label, so it serves nothing else
// and the signing key itself never reaches the core. One deployment has one signing key.
let keyMaterial: { signingKey: string; bits: Promise<Uint8Array<ArrayBuffer>> } | null = null;

/** The deployment's idempotency key secret, or `misconfigured` without a signing key. */
export async function keySecretOf(
  env: DeploymentVars,
): Promise<Result<Uint8Array<ArrayBuffer>, { code: "misconfigured"; detail: string }>> {
  const key = signingKeyRequired(env);
  return key.ok ? ok(await idempotencyKeySecret(key.value)) : key;
}

export function idempotencyKeySecret(signingKey: string): Promise<Uint8Array<ArrayBuffer>> {
  if (keyMaterial?.signingKey !== signingKey) {
    const bits = crypto.subtle
      .importKey("raw", enc(signingKey), "HKDF", false, ["deriveBits"])
      .then((base) =>
        crypto.subtle.deriveBits(
          {
            name: "HKDF",
            hash: "SHA-256",
            salt: enc("toolgate/idempotency-keys/v1"),
            info: enc("upstream idempotency key"),
          },
          base,
          256,
        ),
      )
      .then((derived) => new Uint8Array(derived));
    keyMaterial = { signingKey, bits };
  }
  return keyMaterial.bits;
}
