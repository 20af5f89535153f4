// A tenant's upstream secrets: write-only, sealed with AES-GCM under a per-tenant key derived from
// TOOLGATE_SECRETS_KEY. Only this tenant's operations get them opened, and only the names their
// tool references; a failure to open is a typed error, never a rejection across the RPC.
import { openSecret, sealSecret, secretFingerprint } from "../../crypto.ts";
import type { SealedSecret } from "../../domain/tenant-facts.ts";
import { secretsKey } from "../../config.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantRecord, type SecretRow } from "../store/tenant-rows.ts";
import type { Env } from "../env.ts";
import type { TenantError } from "./object.ts";

export type SecretRecord = {
  name: string;
  fingerprint: string;
  created_at: string;
  updated_at: string;
};
export type SecretsError =
  { code: "unknown_secret"; detail: string } | { code: "misconfigured"; detail: string };
export async function putSecret(
  store: SqlStore,
  env: Env,
  tenantId: string,
  name: string,
  value: string,
): Promise<Result<SecretRecord & { created: boolean }, TenantError>> {
  if (!tenantRecord(store)) return err({ code: "not_found", detail: "no such tenant" });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const [sealed, fingerprint] = await Promise.all([
    sealSecret(master.value, tenantId, name, value),
    secretFingerprint(master.value, tenantId, value),
  ]);
  const previous = secretRow(store, name);
  const now = Date.now();
  store.ensureSchema();
  store.run(
    "INSERT OR REPLACE INTO secrets (name, iv, ciphertext, fingerprint, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
    name,
    sealed.iv,
    sealed.ciphertext,
    fingerprint,
    previous?.created_at ?? now,
    now,
  );
  return ok({ ...toSecretRecord(secretRow(store, name)!), created: previous === null });
}

export async function listSecrets(store: SqlStore): Promise<SecretRecord[]> {
  return store.exists("secrets")
    ? store.all<SecretRow>("SELECT * FROM secrets ORDER BY name").map(toSecretRecord)
    : [];
}

export async function deleteSecret(
  store: SqlStore,
  name: string,
): Promise<Result<true, TenantError>> {
  if (!secretRow(store, name)) return err({ code: "not_found", detail: `no secret named ${name}` });
  store.run("DELETE FROM secrets WHERE name = ?", name);
  return ok(true);
}

/** The decrypted values of exactly `names`, for one attempt of one of this tenant's operations. */
export async function secretsFor(
  store: SqlStore,
  env: Env,
  tenantId: string,
  names: string[],
): Promise<Result<Record<string, string>, SecretsError>> {
  const own = tenantRecord(store)?.id === tenantId;
  return openAll(env, tenantId, names, (name) => (own ? secretRow(store, name) : null));
}

/**
 * Opens exactly `names` from a run's sealed snapshot (domain/tenant-facts.ts), in the operation
 * about to send: the same checks and typed failures as the tenant's own `secretsFor`.
 */
export async function openSecrets(
  env: Env,
  tenantId: string,
  names: string[],
  sealed: Record<string, SealedSecret | null>,
): Promise<Result<Record<string, string>, string>> {
  const opened = await openAll(env, tenantId, names, (name) => sealed[name] ?? null);
  return opened.ok ? opened : err(opened.error.detail);
}

async function openAll(
  env: Env,
  tenantId: string,
  names: string[],
  sealedOf: (name: string) => SealedSecret | null,
): Promise<Result<Record<string, string>, SecretsError>> {
  const master = secretsKey(env);
  if (!master.ok) return master;
  const values: Record<string, string> = {};
  for (const name of names) {
    const row = sealedOf(name);
    if (!row)
      return err({
        code: "unknown_secret",
        detail: `the tenant secret ${name} is not defined (it was deleted after the tool was registered)`,
      });
    try {
      values[name] = await openSecret(master.value, tenantId, name, row);
    } catch {
      // Typed, never a rejection: a caller that sees a thrown RPC cannot tell "nothing was sent".
      return err({
        code: "unknown_secret",
        detail: `the tenant secret ${name} could not be decrypted (TOOLGATE_SECRETS_KEY changed, or the stored value is damaged); register it again with PUT /v1/secrets/${name}`,
      });
    }
  }
  return ok(values);
}

export function secretRow(store: SqlStore, name: string): SecretRow | null {
  return store.exists("secrets")
    ? store.one<SecretRow>("SELECT * FROM secrets WHERE name = ?", name)
    : null;
}

const toSecretRecord = (row: SecretRow): SecretRecord => ({
  name: row.name,
  fingerprint: row.fingerprint,
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
});
