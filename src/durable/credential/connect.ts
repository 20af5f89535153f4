// A connect link (issue 36): a fresh single-use state for (tenant, user, provider) — the object's
// coordinates and a nonce only that object holds (domain/credential.ts encodeState) — and the
// provider's authorization URL carrying it. Made by POST /v1/connections and by an operation that
// found no usable token (its model envelope's connect_url).
import { base64url } from "../../crypto.ts";
import { consoleOrigin } from "../../config.ts";
import { encodeState, type StateParts } from "../../domain/credential.ts";
import type { Env } from "../env.ts";
import { credentialStub } from "../stubs.ts";
import { newNonce } from "./protocol.ts";

/** Where links start when no request says: `wrangler dev`'s default origin. */
const DEFAULT_ORIGIN = "http://localhost:8787";

/** The one redirect URI: register `<TOOLGATE_CONSOLE_URL>/oauth/callback` with each provider. */
export const callbackUri = (env: Env, requestUrl: string = DEFAULT_ORIGIN) =>
  `${consoleOrigin(env, requestUrl)}/oauth/callback`;

export const encodeText = (text: string) => base64url(new TextEncoder().encode(text));
export const decodeText = (text: string) =>
  new TextDecoder().decode(
    Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0)),
  );

export async function connectLink(
  env: Env,
  owner: Omit<StateParts, "nonce">,
  redirectUri: string,
  scopes: string[],
) {
  const nonce = newNonce();
  const state = encodeState({ ...owner, nonce }, encodeText);
  const { tenantId, user, provider } = owner;
  return credentialStub(env, tenantId, user, provider).begin(
    { tenantId, user, provider },
    nonce,
    state,
    redirectUri,
    scopes,
  );
}
