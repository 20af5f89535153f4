// A tenant's API keys: only SHA-256 hashes of the secrets are stored, compared in constant time
// (unknown key ids too, so timing does not reveal which exist); a key is revocable, and a revoked
// key never verifies again.
import { ulid } from "ulid";
import { constantTimeEqual, randomSecret } from "../../crypto.ts";
import { sha256Hex } from "../../domain/canonical-json.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ApiScope } from "../../http/schemas.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { decodeScopes, tenantRecord } from "../store/tenant-rows.ts";
import type { TenantError } from "./object.ts";

/** A key as issued: `key` (the secret) is shown this once. */
export type IssuedKey = { key_id: string; key: string; name: string; scopes: ApiScope[] };
/** A valid key's name and scopes. */
export type KeyInfo = { name: string; scopes: ApiScope[] };

export async function issueKey(
  store: SqlStore,
  tenantId: string,
  name: string,
  scopes: ApiScope[],
): Promise<Result<IssuedKey, TenantError>> {
  if (!tenantRecord(store)) return err({ code: "not_found", detail: "no such tenant" });
  const keyId = `key_${ulid()}`;
  const secret = randomSecret();
  store.run(
    "INSERT INTO api_keys (id, name, scopes, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)",
    keyId,
    name,
    JSON.stringify(scopes),
    await sha256Hex(secret),
    Date.now(),
  );
  return ok({ key_id: keyId, key: `tgk.${tenantId}.${keyId}.${secret}`, name, scopes });
}

export async function revokeKey(
  store: SqlStore,
  keyId: string,
): Promise<Result<true, TenantError>> {
  const row = liveKey(store, keyId);
  if (!row) return err({ code: "not_found", detail: "no such key" });
  store.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", Date.now(), keyId);
  return ok(true);
}

export async function verifyKey(
  store: SqlStore,
  keyId: string,
  secret: string,
): Promise<Result<KeyInfo, TenantError>> {
  const row = liveKey(store, keyId);
  // Hash and compare even for unknown keys, so timing does not reveal which key ids exist.
  const matches = await constantTimeEqual(
    await sha256Hex(secret),
    row?.secret_hash ?? "0".repeat(64),
  );
  const scopes = row && decodeScopes(row.scopes);
  return row && matches && scopes
    ? ok({ scopes, name: row.name })
    : err({ code: "not_found", detail: "no such key" });
}

/** A key that is still valid (not revoked): its name and scopes. The console re-checks it on every request. */
export async function keyInfo(
  store: SqlStore,
  keyId: string,
): Promise<Result<KeyInfo, TenantError>> {
  const row = liveKey(store, keyId);
  const scopes = row && decodeScopes(row.scopes);
  return row && scopes
    ? ok({ name: row.name, scopes })
    : err({ code: "not_found", detail: "no such key" });
}

/** A key of this tenant that is not revoked (null without a tenant record). */
function liveKey(
  store: SqlStore,
  keyId: string,
): { name: string; scopes: string; secret_hash: string } | null {
  return tenantRecord(store)
    ? store.one<{ name: string; scopes: string; secret_hash: string }>(
        "SELECT name, scopes, secret_hash FROM api_keys WHERE id = ? AND revoked_at IS NULL",
        keyId,
      )
    : null;
}
