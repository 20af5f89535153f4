// Console sessions and CSRF tokens: stateless, HMAC-signed under TOOLGATE_SIGNING_KEY with a
// purpose prefix (so a session can never verify as a run token or vice versa). A session carries
// who signed in (tenant, key id, key name, a snapshot of the key's scopes) and its expiry; the
// caller still re-checks the key on every request. The CSRF token is HMAC(session id): it is bound
// to one session and unknown to any other origin. The clock and the session id come from the caller.
import { z } from "zod";
import { base64url, constantTimeEqual, hmac } from "../crypto.ts";
import { ApiScope } from "../http/schemas.ts";
import { TENANT_ID } from "../domain/jurisdiction.ts";

export const SESSION_TTL_MS = 30 * 60_000;
/** The pre-sign-in nonce that protects the sign-in form itself (login CSRF). */
export const LOGIN_TTL_MS = 15 * 60_000;

const Claims = z.strictObject({
  sid: z.string().min(16),
  tenantId: z.string().regex(TENANT_ID),
  keyId: z.string().min(1),
  keyName: z.string(),
  scopes: z.array(ApiScope),
  expiresAtMs: z.number().int(),
});
export type SessionClaims = z.infer<typeof Claims>;

const SESSION = "toolgate/console-session/v1:";
const CSRF = "toolgate/console-csrf/v1:";
const LOGIN = "toolgate/console-login/v1:";
const PASSKEY = "toolgate/console-passkey-registration/v1:";

export async function sealSession(signingKey: string, claims: SessionClaims): Promise<string> {
  const payload = base64url(new TextEncoder().encode(JSON.stringify(claims)));
  return `${payload}.${await hmac(signingKey, SESSION + payload)}`;
}

/** The claims of a genuine, unexpired session token; null for anything else (never throws). */
export async function openSession(
  signingKey: string,
  token: string | undefined,
  nowMs: number,
): Promise<SessionClaims | null> {
  if (!token) return null;
  const [payload, signature, ...rest] = token.split(".");
  if (!payload || !signature || rest.length > 0) return null;
  if (!(await constantTimeEqual(signature, await hmac(signingKey, SESSION + payload)))) return null;
  let decoded: unknown;
  try {
    decoded = JSON.parse(new TextDecoder().decode(fromBase64url(payload)));
  } catch {
    return null;
  }
  const claims = Claims.safeParse(decoded);
  return claims.success && claims.data.expiresAtMs > nowMs ? claims.data : null;
}

export const csrfToken = (signingKey: string, sid: string) => hmac(signingKey, CSRF + sid);

export async function csrfValid(signingKey: string, sid: string, given: unknown): Promise<boolean> {
  return (
    typeof given === "string" &&
    given.length > 0 &&
    constantTimeEqual(given, await csrfToken(signingKey, sid))
  );
}

/** The challenge a passkey registration signs (issue 35): bound to this session, stored nowhere. */
export const passkeyRegistrationChallenge = (signingKey: string, sid: string) =>
  hmac(signingKey, PASSKEY + sid);

/** The sign-in form's token: bound to a nonce cookie set when the form was served. */
export const loginToken = (signingKey: string, nonce: string) => hmac(signingKey, LOGIN + nonce);

export async function loginTokenValid(
  signingKey: string,
  nonce: string | undefined,
  given: unknown,
): Promise<boolean> {
  return (
    typeof given === "string" &&
    !!nonce &&
    nonce.length >= 16 &&
    constantTimeEqual(given, await loginToken(signingKey, nonce))
  );
}

export function fromBase64url(text: string): Uint8Array {
  return Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (ch) =>
    ch.charCodeAt(0),
  );
}
