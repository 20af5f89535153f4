// Tenant API keys at the edge: `tgk.<tenant>.<key_id>.<secret>.<tag>`. The tag is an HMAC over the
// tenant and the key id under a key derived from TOOLGATE_SIGNING_KEY for this purpose only, checked
// in constant time in the Worker: a made-up key (anyone can learn a tenant id) is refused without
// waking the tenant's object. A key with a genuine tag still goes to the object, which checks the
// secret's hash and revocation. Keys issued before tags existed (`tgk.<tenant>.<key_id>.<secret>`)
// still work, but only through a per-isolate failure limiter (see checkLegacy); reissue them.
import type { Env } from "../durable/env.ts";
import { tenantStub } from "../durable/stubs.ts";
import { constantTimeEqual, hmac } from "../crypto.ts";
import { sha256Hex } from "../domain/canonical-json.ts";
import { LruCache } from "../lru.ts";
import type { ApiScope } from "./schemas.ts";
import { TENANT_ID } from "../domain/jurisdiction.ts";

const KEY_ID = /^key_[0-9A-Z]{26}$/;
const TAG_PURPOSE = "toolgate/api-key-tag/v1";

export type VerifiedKey = { tenantId: string; keyId: string; name: string; scopes: ApiScope[] };
/** `outdated`: a key without a tag, refused without asking the tenant (the limiter is spent). */
export type KeyCheck =
  | { ok: true; key: VerifiedKey }
  | { ok: false; code: "unauthorized" | "api_key_outdated"; detail: string };

type ParsedKey = { tenantId: string; keyId: string; secret: string; tag: string | null };

/** The key's parts, or null when it is not shaped like a key at all. `tag` null: issued before tags. */
export function parseApiKey(token: string): ParsedKey | null {
  const [prefix, tenantId, keyId, secret, tag, ...rest] = token.split(".");
  if (prefix !== "tgk" || !tenantId || !keyId || !secret || rest.length > 0) return null;
  if (!TENANT_ID.test(tenantId) || !KEY_ID.test(keyId) || tag === "") return null;
  return { tenantId, keyId, secret, tag: tag ?? null };
}

/** A separate key per purpose: a tag can never be replayed as a run token or a session, nor the reverse. */
const derivedKeys = new Map<string, Promise<string>>();
function tagKey(signingKey: string): Promise<string> {
  let derived = derivedKeys.get(signingKey);
  if (!derived) {
    if (derivedKeys.size > 8) derivedKeys.clear();
    derived = hmac(signingKey, TAG_PURPOSE);
    derivedKeys.set(signingKey, derived);
  }
  return derived;
}

export async function apiKeyTag(signingKey: string, tenantId: string, keyId: string) {
  return hmac(await tagKey(signingKey), `${tenantId}.${keyId}`);
}

/** The full key handed to the admin once: the tenant object's secret plus the edge's tag. */
export async function sealApiKey(
  signingKey: string,
  tenantId: string,
  keyId: string,
  key: string,
): Promise<string> {
  return `${key}.${await apiKeyTag(signingKey, tenantId, keyId)}`;
}

const INVALID = { ok: false, code: "unauthorized", detail: "the token is not valid" } as const;

/** The one key check, for the API and the console's sign-in alike. `signingKey`: TOOLGATE_SIGNING_KEY. */
export async function checkApiKey(
  env: Env,
  signingKey: string,
  token: string,
  nowMs: number,
): Promise<KeyCheck> {
  const parsed = parseApiKey(token);
  if (!parsed) return INVALID;
  if (parsed.tag === null) return checkLegacy(env, parsed, token, nowMs);
  const expected = await apiKeyTag(signingKey, parsed.tenantId, parsed.keyId);
  if (!(await constantTimeEqual(parsed.tag, expected))) return INVALID;
  return askTenant(env, parsed);
}

async function askTenant(env: Env, parsed: ParsedKey): Promise<KeyCheck> {
  const verified = await tenantStub(env, parsed.tenantId).verifyKey(parsed.keyId, parsed.secret);
  return verified.ok
    ? {
        ok: true,
        key: {
          tenantId: parsed.tenantId,
          keyId: parsed.keyId,
          name: verified.value.name,
          scopes: verified.value.scopes,
        },
      }
    : INVALID;
}

/**
 * Keys issued before tags cannot be told from forgeries without asking the tenant's object, so
 * that question is rationed per isolate: after LEGACY_FAILURES failed checks for one tenant within
 * a minute, untagged keys for that tenant are refused here (`api_key_outdated`) until the minute
 * ends — except one this isolate has already seen verify, so a flood of made-up keys does not lock
 * out the tenant's real ones. Per isolate, so it bounds the load an attacker can put on the object
 * (about LEGACY_FAILURES per minute per isolate), it does not make it zero: reissue old keys.
 */
const LEGACY_FAILURES = 10;
const LEGACY_WINDOW_MS = 60_000;
const legacyFailures = new LruCache<string, { windowStartMs: number; count: number }>(
  { maxEntries: 4096, maxBytes: 1024 * 1024 },
  () => 100,
);
/** Digests of untagged keys that verified here, with when; a revoked one still fails at the object. */
const legacyVerified = new LruCache<string, number>(
  { maxEntries: 4096, maxBytes: 1024 * 1024 },
  () => 100,
);
const LEGACY_VERIFIED_TTL_MS = 60 * 60_000;

async function checkLegacy(
  env: Env,
  parsed: ParsedKey,
  token: string,
  nowMs: number,
): Promise<KeyCheck> {
  const digest = await sha256Hex(token);
  const seenAtMs = legacyVerified.get(digest);
  const known = seenAtMs !== undefined && nowMs - seenAtMs < LEGACY_VERIFIED_TTL_MS;
  const failures = legacyFailures.get(parsed.tenantId);
  const current = failures && nowMs - failures.windowStartMs < LEGACY_WINDOW_MS ? failures : null;
  if (!known && current && current.count >= LEGACY_FAILURES)
    return {
      ok: false,
      code: "api_key_outdated",
      detail:
        "this API key has the old format (four parts, no tag), which toolgate checks only a few times a minute while keys of this tenant keep failing; ask the deployment's admin to issue a new key (POST /v1/admin/tenants/{tenant}/keys) and revoke this one",
    };
  const checked = await askTenant(env, parsed);
  if (checked.ok) legacyVerified.set(digest, nowMs);
  else {
    legacyVerified.delete(digest);
    legacyFailures.set(parsed.tenantId, {
      windowStartMs: current?.windowStartMs ?? nowMs,
      count: (current?.count ?? 0) + 1,
    });
  }
  return checked;
}
