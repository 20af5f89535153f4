// Cloudflare Access at the edge (issue 35): the `Cf-Access-Jwt-Assertion` a person's request carries
// through Access, verified with jose against the team's JWKS — issuer the team domain, audience the
// application's AUD tag, RS256 only (so `alg: none` and HMAC tricks never verify), exp/nbf checked.
// A token that fails any check is a typed 401 (`access_denied` with its `reason`) and nothing is
// decided; no header leaves the API key or console session as the decider. Without Access
// configured the header is never read: a name nobody verified is never recorded.
import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from "jose";
import { accessConfig } from "../config.ts";
import type { Env } from "../durable/env.ts";
import { ApiProblem, type AccessRefusal } from "./problem.ts";

export const ACCESS_HEADER = "Cf-Access-Jwt-Assertion";
/** Access signs with RS256 (developers.cloudflare.com/cloudflare-one/identity/authorization-cookie/validating-json/). */
const ALGORITHMS = ["RS256"];

/**
 * Who a verified token names: the person's email (a service token has none: its `sub`), and its
 * claims for approver groups by attribute (issue 35): `claimsOf`.
 */
export type AccessIdentity = {
  id: string;
  email: string | null;
  sub: string;
  claims: Record<string, string[]>;
};

/** At most this many claims, each with at most this many values, are kept from a token. */
const MAX_CLAIMS = 64;
const MAX_VALUES = 100;

/**
 * A verified token's string and string-array claims (`groups`, `email`, …), and those under
 * Access's `custom` object (an IdP's OIDC claims) as `custom.<name>`: what a route's group may name.
 * Other shapes (numbers, nested objects) are left out; sizes are bounded. Pure.
 */
export function claimsOf(payload: Record<string, unknown>): Record<string, string[]> {
  const claims: Record<string, string[]> = {};
  const take = (name: string, value: unknown) => {
    if (Object.keys(claims).length >= MAX_CLAIMS) return;
    const values = typeof value === "string" ? [value] : Array.isArray(value) ? value : null;
    if (values && values.every((v) => typeof v === "string"))
      claims[name] = (values as string[]).slice(0, MAX_VALUES);
  };
  for (const [name, value] of Object.entries(payload)) take(name, value);
  const custom = payload.custom;
  if (custom && typeof custom === "object" && !Array.isArray(custom))
    for (const [name, value] of Object.entries(custom)) take(`custom.${name}`, value);
  return claims;
}

/**
 * One key set per JWKS URL per isolate: jose fetches it once, caches it, and refetches when a token
 * names a kid it does not hold (at most every 30 s), so Access's key rotation needs no restart.
 */
const keySets = new Map<string, JWTVerifyGetKey>();
const keySetOf = (url: string): JWTVerifyGetKey => {
  let keys = keySets.get(url);
  if (!keys) keySets.set(url, (keys = createRemoteJWKSet(new URL(url))));
  return keys;
};

/**
 * The person behind `token`, verified; null when the request carries no Access token or the
 * deployment has no Access configured. Throws the ApiProblem the edge answers with otherwise.
 */
export async function accessIdentity(
  env: Env,
  token: string | undefined,
): Promise<AccessIdentity | null> {
  const config = accessConfig(env);
  if (!config.ok) throw new ApiProblem(config.error);
  if (!config.value || token === undefined) return null;
  const { issuer, audience, jwksUrl } = config.value;
  try {
    const { payload } = await jwtVerify(token, keySetOf(jwksUrl), {
      issuer,
      audience,
      algorithms: ALGORITHMS,
      requiredClaims: ["exp", "sub"],
    });
    const email = typeof payload.email === "string" && payload.email ? payload.email : null;
    const sub = payload.sub!;
    return { id: email ?? sub, email, sub, claims: claimsOf(payload) };
  } catch (error) {
    const reason = refusalOf(error);
    if (reason === "keys_unavailable")
      throw new ApiProblem({
        code: "unavailable",
        detail: "the Access team's signing keys could not be fetched just now; nothing was decided",
      });
    throw new ApiProblem({
      code: "access_denied",
      reason,
      detail: `the ${ACCESS_HEADER} token was refused (${reason}); nothing was decided`,
    });
  }
}

/** jose's error classes, named as the check that failed. */
function refusalOf(error: unknown): AccessRefusal | "keys_unavailable" {
  if (error instanceof errors.JWTExpired) return "expired";
  if (error instanceof errors.JWTClaimValidationFailed)
    return error.claim === "aud"
      ? "audience"
      : error.claim === "iss"
        ? "issuer"
        : error.claim === "nbf"
          ? "not_yet_valid"
          : "malformed";
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported)
    return "algorithm";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "signature";
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return "unknown_key";
  if (error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid)
    return "keys_unavailable";
  // A plain JOSEError is jose's own "the JWKS answered other than 200": not the token's fault.
  if (error instanceof errors.JOSEError)
    return error.constructor === errors.JOSEError ? "keys_unavailable" : "malformed";
  // fetch itself failed (the team's certs did not answer): not the token's fault.
  return error instanceof TypeError ? "keys_unavailable" : "malformed";
}
