// Every OAuth protocol step toolgate takes (issue 36), through oauth4webapi and nothing hand-written:
// discovery (RFC 8414), the authorization URL with PKCE (RFC 7636), the code exchange and the
// refresh. Plain http is allowed only to a loopback host in development (the host policy tools
// obey). Nothing here throws: a failure is a value, and a refresh tells `invalid_grant` (the user
// must consent again) from anything else (transient: retried like a 503).
import * as oauth from "oauth4webapi";
import { err, ok, type Result } from "../../domain/result.ts";
import type { OAuthProviderBody, ProviderEndpoints } from "../../domain/credential.ts";
import { allows, isLoopback } from "../../tools/manifest/url.ts";
import type { HostPolicy } from "../../tools/manifest/schema.ts";

/** A provider as the protocol uses it: endpoints, the client and its opened secret. */
export type ProviderUse = ProviderEndpoints & {
  client_id: string;
  client_secret: string;
  scopes: string[];
  pkce: boolean;
  token_endpoint_auth: OAuthProviderBody["token_endpoint_auth"];
};

/** What a token endpoint gave: the values (sealed at once by the caller) and their facts. */
export type Tokens = {
  accessToken: string;
  refreshToken: string | null;
  expiresInS: number | null;
  scopes: string[] | null;
};

export type TokenFailure =
  { kind: "invalid_grant"; detail: string } | { kind: "transient"; detail: string };

/** The URL rule for a provider's endpoints: https on an allowed host (http to loopback in development). */
export function checkEndpoint(raw: string, hosts: HostPolicy): Result<URL, string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return err(`${raw} is not a URL`);
  }
  const loopback = hosts.allowLoopback && isLoopback(url.hostname);
  if (url.protocol !== "https:" && !(loopback && url.protocol === "http:"))
    return err(`${url.origin} is not https`);
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  if (!loopback && !hosts.allowlist.some((e) => allows(e, url.hostname, port, url.protocol)))
    return err(`${url.hostname}:${port} is not on TOOLGATE_UPSTREAM_ALLOWLIST`);
  return ok(url);
}

const insecureFor = (url: string) =>
  new URL(url).protocol === "http:" ? { [oauth.allowInsecureRequests]: true } : {};

/** The provider's endpoints: discovered from its issuer, or as given; each must pass the host rule. */
export async function resolveEndpoints(
  body: OAuthProviderBody,
  hosts: HostPolicy,
): Promise<Result<ProviderEndpoints, string>> {
  let endpoints: ProviderEndpoints;
  if (body.issuer !== undefined) {
    const issuer = checkEndpoint(body.issuer, hosts);
    if (!issuer.ok) return issuer;
    try {
      const response = await oauth.discoveryRequest(issuer.value, {
        algorithm: "oauth2",
        signal: AbortSignal.timeout(10_000),
        ...insecureFor(body.issuer),
      });
      const server = await oauth.processDiscoveryResponse(issuer.value, response);
      if (!server.authorization_endpoint || !server.token_endpoint)
        return err("the issuer's metadata names no authorization_endpoint or token_endpoint");
      endpoints = {
        issuer: server.issuer,
        authorization_endpoint: server.authorization_endpoint,
        token_endpoint: server.token_endpoint,
        revocation_endpoint: server.revocation_endpoint ?? null,
      };
    } catch (error) {
      return err(`discovery at ${body.issuer} failed: ${messageOf(error)}`);
    }
  } else {
    endpoints = {
      issuer: null,
      authorization_endpoint: body.authorization_endpoint!,
      token_endpoint: body.token_endpoint!,
      revocation_endpoint: null,
    };
  }
  for (const url of [endpoints.authorization_endpoint, endpoints.token_endpoint]) {
    const checked = checkEndpoint(url, hosts);
    if (!checked.ok) return checked;
  }
  return ok(endpoints);
}

const serverOf = (p: ProviderUse): oauth.AuthorizationServer => ({
  issuer: p.issuer ?? new URL(p.token_endpoint).origin,
  authorization_endpoint: p.authorization_endpoint,
  token_endpoint: p.token_endpoint,
});
const clientAuth = (p: ProviderUse) =>
  p.token_endpoint_auth === "client_secret_post"
    ? oauth.ClientSecretPost(p.client_secret)
    : oauth.ClientSecretBasic(p.client_secret);

/** A new PKCE verifier and nonce (oauth4webapi's random). */
export const newVerifier = () => oauth.generateRandomCodeVerifier();
export const newNonce = () => oauth.generateRandomState();

/** The URL the user opens to consent. */
export async function authorizationUrl(
  p: ProviderUse,
  redirectUri: string,
  state: string,
  verifier: string,
  scopes: string[],
): Promise<string> {
  const url = new URL(p.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", p.client_id);
  url.searchParams.set("redirect_uri", redirectUri);
  url.searchParams.set("state", state);
  if (scopes.length > 0) url.searchParams.set("scope", scopes.join(" "));
  if (p.pkce) {
    url.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set("code_challenge_method", "S256");
  }
  return url.toString();
}

/** The callback's parameters checked against `state`, then the code exchanged (PKCE verifier). */
export async function exchangeCode(
  p: ProviderUse,
  callback: URL,
  state: string,
  redirectUri: string,
  verifier: string,
): Promise<Result<Tokens, TokenFailure>> {
  return tokenStep(p, async (server, client) => {
    const params = oauth.validateAuthResponse(server, client, callback, state);
    const response = await oauth.authorizationCodeGrantRequest(
      server,
      client,
      clientAuth(p),
      params,
      redirectUri,
      p.pkce ? verifier : oauth.nopkce,
      { signal: AbortSignal.timeout(10_000), ...insecureFor(p.token_endpoint) },
    );
    return oauth.processAuthorizationCodeResponse(server, client, response);
  });
}

export async function refresh(
  p: ProviderUse,
  refreshToken: string,
): Promise<Result<Tokens, TokenFailure>> {
  return tokenStep(p, async (server, client) => {
    const response = await oauth.refreshTokenGrantRequest(
      server,
      client,
      clientAuth(p),
      refreshToken,
      { signal: AbortSignal.timeout(10_000), ...insecureFor(p.token_endpoint) },
    );
    return oauth.processRefreshTokenResponse(server, client, response);
  });
}

async function tokenStep(
  p: ProviderUse,
  step: (
    server: oauth.AuthorizationServer,
    client: oauth.Client,
  ) => Promise<oauth.TokenEndpointResponse>,
): Promise<Result<Tokens, TokenFailure>> {
  try {
    const answer = await step(serverOf(p), { client_id: p.client_id });
    return ok({
      accessToken: answer.access_token,
      refreshToken: answer.refresh_token ?? null,
      expiresInS: typeof answer.expires_in === "number" ? answer.expires_in : null,
      scopes: typeof answer.scope === "string" ? answer.scope.split(" ").filter(Boolean) : null,
    });
  } catch (error) {
    // invalid_grant: the grant is dead (revoked, expired, consent withdrawn). An authorization
    // response error (the user denied) is one too. Anything else may pass: a 5xx, the network.
    if (error instanceof oauth.ResponseBodyError && error.error === "invalid_grant")
      return err({ kind: "invalid_grant", detail: "the provider answered invalid_grant" });
    if (error instanceof oauth.AuthorizationResponseError)
      return err({ kind: "invalid_grant", detail: `the provider answered ${error.error}` });
    return err({ kind: "transient", detail: messageOf(error) });
  }
}

/** A message safe to show: oauth4webapi's own, never a response body (it could carry a token). */
const messageOf = (error: unknown) =>
  error instanceof Error ? error.message.slice(0, 200) : "unknown error";
