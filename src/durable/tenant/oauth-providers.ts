// A tenant's OAuth providers (issue 36): stored by id with the endpoints discovered at PUT, the
// client secret sealed like a tenant secret (secrets.ts's key, its own name `oauth-provider:<id>`)
// and write-only: readers get its fingerprint. `providerForUse` opens it for exactly one protocol
// step of this tenant's credential objects; a failure to open is typed, never a throw.
import { z } from "zod";
import { openSecret, sealSecret, secretFingerprint } from "../../crypto.ts";
import { secretsKey } from "../../config.ts";
import type {
  OAuthProviderBody,
  ProviderEndpoints,
  ProviderView,
} from "../../domain/credential.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { decodeWith, parseJson } from "../store/codec.ts";
import { tenantRecord } from "../store/tenant-rows.ts";
import type { ProviderUse } from "../credential/protocol.ts";
import type { Env } from "../env.ts";
import type { TenantError } from "./contracts.ts";

const Stored = z.object({
  issuer: z.string().nullable(),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  revocation_endpoint: z.string().nullable(),
  client_id: z.string(),
  client_secret_fingerprint: z.string(),
  scopes: z.array(z.string()),
  pkce: z.boolean(),
  token_endpoint_auth: z.enum(["client_secret_basic", "client_secret_post"]),
});
type Row = {
  id: string;
  data: string;
  iv: string;
  ciphertext: string;
  created_at: number;
  updated_at: number;
};

const sealedName = (id: string) => `oauth-provider:${id}`;

export async function putProvider(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  body: OAuthProviderBody,
  endpoints: ProviderEndpoints,
): Promise<Result<ProviderView & { created: boolean }, TenantError>> {
  if (tenantRecord(store)?.id !== tenantId)
    return err({ code: "not_found", detail: "no such tenant" });
  const master = secretsKey(env);
  if (!master.ok) return master;
  const [sealed, fingerprint] = await Promise.all([
    sealSecret(master.value, tenantId, sealedName(id), body.client_secret),
    secretFingerprint(master.value, tenantId, body.client_secret),
  ]);
  const data: z.infer<typeof Stored> = {
    ...endpoints,
    client_id: body.client_id,
    client_secret_fingerprint: fingerprint,
    scopes: body.scopes,
    pkce: body.pkce,
    token_endpoint_auth: body.token_endpoint_auth,
  };
  const previous = rowOf(store, id);
  const nowMs = Date.now();
  store.ensureTable("oauth_providers");
  store.run(
    "INSERT OR REPLACE INTO oauth_providers (id, data, iv, ciphertext, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
    id,
    JSON.stringify(data),
    sealed.iv,
    sealed.ciphertext,
    previous?.created_at ?? nowMs,
    nowMs,
  );
  return ok({ ...viewOf(rowOf(store, id)!), created: previous === null });
}

export function listProviders(store: SqlStore): ProviderView[] {
  return store.exists("oauth_providers")
    ? store.all<Row>("SELECT * FROM oauth_providers ORDER BY id").map(viewOf)
    : [];
}

export function getProvider(store: SqlStore, id: string): Result<ProviderView, TenantError> {
  const row = rowOf(store, id);
  return row ? ok(viewOf(row)) : err(unknownProvider(id));
}

/**
 * Refused while tools act as the user with it (their calls could never refresh again), unless
 * `force`: then those calls, once their access token is due, wait for a connection as if never
 * connected (needs consent, bounded like any credential wait), never retry as if transient.
 */
export function deleteProvider(
  store: SqlStore,
  id: string,
  force: boolean,
): Result<{ tools: string[] }, TenantError> {
  if (!rowOf(store, id)) return err(unknownProvider(id));
  const tools = toolsActingWith(store, id);
  if (tools.length > 0 && !force)
    return err({
      code: "oauth_provider_in_use",
      tools,
      detail: `tools act as the user with OAuth provider ${id}: ${tools.join(", ")}. Nothing was deleted. Change or delete those tools first, or send ?force=1 (their calls then wait for the user to connect a provider of that id).`,
    });
  store.run("DELETE FROM oauth_providers WHERE id = ?", id);
  return ok({ tools });
}

/** The tenant's tools whose manifest's `auth` names this provider. */
function toolsActingWith(store: SqlStore, id: string): string[] {
  if (!store.exists("tools")) return [];
  return store
    .all<{ name: string; manifest: string }>("SELECT name, manifest FROM tools ORDER BY name")
    .filter((row) => {
      const auth = (parseJson(row.manifest, "tool manifest") as { auth?: { oauth?: unknown } })
        .auth;
      return auth?.oauth === id;
    })
    .map((row) => row.name);
}

/** The provider with its client secret opened, for one protocol step of this tenant's credentials. */
export async function providerForUse(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
): Promise<Result<ProviderUse, TenantError>> {
  const row = tenantRecord(store)?.id === tenantId ? rowOf(store, id) : null;
  if (!row) return err(unknownProvider(id));
  const master = secretsKey(env);
  if (!master.ok) return master;
  const { client_secret_fingerprint: _, ...data } = decoded(row);
  try {
    const secret = await openSecret(master.value, tenantId, sealedName(id), row);
    return ok({ ...data, client_secret: secret });
  } catch {
    return err({
      code: "misconfigured",
      detail: `the client secret of OAuth provider ${id} could not be decrypted (TOOLGATE_SECRETS_KEY changed?); PUT it again`,
    });
  }
}

export const unknownProvider = (
  id: string,
): Extract<TenantError, { code: "unknown_oauth_provider" }> => ({
  code: "unknown_oauth_provider",
  detail: `no OAuth provider named ${id} (PUT /v1/oauth-providers/${id} first)`,
});

const rowOf = (store: SqlStore, id: string): Row | null =>
  store.exists("oauth_providers")
    ? store.one<Row>("SELECT * FROM oauth_providers WHERE id = ?", id)
    : null;

const decoded = (row: Row) =>
  decodeWith(Stored, parseJson(row.data, "oauth provider"), "oauth provider");

const viewOf = (row: Row): ProviderView => ({
  id: row.id,
  ...decoded(row),
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
});
