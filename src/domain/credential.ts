// Acting as the user (issue 36), the pure part: an OAuth provider's body and stored shape, the
// connect `state` (which credential object it belongs to, plus a single-use nonce only that object
// knows), and what a stored token set is worth now (`health`, `usable`). No I/O, clock or random:
// the object and the routes pass them in. Token values never appear in anything this file returns
// to a reader (ConnectionView has none).
import { z } from "zod";
import { err, ok, type Result } from "./result.ts";

export const PROVIDER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** PUT /v1/oauth-providers/{id}: an issuer (RFC 8414 discovery) or both endpoints, never both kinds. */
export const OAuthProviderBody = z
  .strictObject({
    issuer: z.url().optional(),
    authorization_endpoint: z.url().optional(),
    token_endpoint: z.url().optional(),
    client_id: z.string().min(1).max(512),
    client_secret: z.string().min(1).max(4096),
    scopes: z.array(z.string().min(1).max(256)).max(64).default([]),
    pkce: z.boolean().default(true),
    token_endpoint_auth: z
      .enum(["client_secret_basic", "client_secret_post"])
      .default("client_secret_basic"),
  })
  .refine(
    (b) =>
      b.issuer !== undefined
        ? b.authorization_endpoint === undefined && b.token_endpoint === undefined
        : b.authorization_endpoint !== undefined && b.token_endpoint !== undefined,
    {
      message: "give either issuer (discovered) or both authorization_endpoint and token_endpoint",
    },
  );
export type OAuthProviderBody = z.infer<typeof OAuthProviderBody>;

/** The endpoints a provider is used through (discovered once, at PUT). */
export type ProviderEndpoints = {
  issuer: string | null;
  authorization_endpoint: string;
  token_endpoint: string;
  revocation_endpoint: string | null;
};

/** A provider as every reader sees it: the client secret only by fingerprint. */
export type ProviderView = ProviderEndpoints & {
  id: string;
  client_id: string;
  client_secret_fingerprint: string;
  scopes: string[];
  pkce: boolean;
  token_endpoint_auth: OAuthProviderBody["token_endpoint_auth"];
  created_at: string;
  updated_at: string;
};

/** The connect `state`: the credential object's coordinates, then a nonce only that object holds. */
export type StateParts = { tenantId: string; user: string; provider: string; nonce: string };

export function encodeState(parts: StateParts, encode: (text: string) => string): string {
  return `${encode(JSON.stringify([parts.tenantId, parts.user, parts.provider]))}.${parts.nonce}`;
}

/** Any malformed state is refused here; a well-formed one is checked by its object (the nonce). */
export function decodeState(
  state: string,
  decode: (text: string) => string,
): Result<StateParts, string> {
  const [head, nonce, ...rest] = state.split(".");
  if (!head || !nonce || rest.length > 0 || !/^[A-Za-z0-9_-]{16,128}$/.test(nonce))
    return err("the state is not one toolgate issued");
  try {
    const parsed = z
      .tuple([z.string().min(1), z.string().min(1), z.string().regex(PROVIDER_ID)])
      .safeParse(JSON.parse(decode(head)));
    if (!parsed.success) return err("the state is not one toolgate issued");
    const [tenantId, user, provider] = parsed.data;
    return ok({ tenantId, user, provider, nonce });
  } catch {
    return err("the state is not one toolgate issued");
  }
}

/** A stored token set's times and scopes (the values themselves are sealed elsewhere). */
export type TokenFacts = {
  expiresAtMs: number | null;
  scopes: string[];
  hasRefresh: boolean;
  /** The provider answered `invalid_grant` (or it was never connected): the user must consent. */
  dead: boolean;
};

/** An access token this close to its expiry is refreshed before a send (it could expire in flight). */
export const EXPIRY_SKEW_MS = 60_000;
/** GET /v1/connections says "expiring" this long before the access token's expiry with no refresh token. */
export const EXPIRING_WITHIN_MS = 10 * 60_000;

export type Health = "connected" | "expiring" | "needs_consent";

/** What a reader is told about a connection. */
export function health(facts: TokenFacts | null, wanted: string[], nowMs: number): Health {
  if (!facts || facts.dead || !coversScopes(facts.scopes, wanted)) return "needs_consent";
  const expired = facts.expiresAtMs !== null && facts.expiresAtMs <= nowMs + EXPIRY_SKEW_MS;
  if (expired && !facts.hasRefresh) return "needs_consent";
  const soon = facts.expiresAtMs !== null && facts.expiresAtMs <= nowMs + EXPIRING_WITHIN_MS;
  return soon && !facts.hasRefresh ? "expiring" : "connected";
}

/** Before a send: use the stored access token, refresh first, or ask the user to connect. */
export function beforeSend(
  facts: TokenFacts | null,
  wanted: string[],
  nowMs: number,
): "use" | "refresh" | "needs_consent" {
  if (!facts || facts.dead || !coversScopes(facts.scopes, wanted)) return "needs_consent";
  const expired = facts.expiresAtMs !== null && facts.expiresAtMs <= nowMs + EXPIRY_SKEW_MS;
  if (!expired) return "use";
  return facts.hasRefresh ? "refresh" : "needs_consent";
}

export const coversScopes = (granted: string[], wanted: string[]) =>
  wanted.every((scope) => granted.includes(scope));

/** The scopes a connect asks for: the provider's, then each tool's, once each. */
export const scopesToAsk = (provider: string[], more: string[]) => [
  ...new Set([...provider, ...more]),
];
