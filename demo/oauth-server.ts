// A local OAuth 2.0 authorization server for tests and the demo (issue 36), served by the upstream
// (demo/upstream.ts) on loopback, one server per namespace: issuer `<base>/as/<ns>`, metadata at
// `<base>/.well-known/oauth-authorization-server/as/<ns>` (RFC 8414 §3.1). It consents at once
// (the authorize endpoint redirects with a code; `sub` in its query says who consented), enforces
// PKCE S256, rotates refresh tokens (the previous one stays valid until the new one is first used,
// a reuse interval like Okta's and Auth0's, so a client that died before storing the new one can
// refresh again), counts refreshes, and can revoke a subject's grant (`invalid_grant`) or answer
// its next token requests with a scripted status (a transient failure).
import { createHash, randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";

/** The one client every namespace knows (PUT /v1/oauth-providers registers it). */
export const DEMO_CLIENT = { id: "demo-client", secret: "demo-client-secret" } as const;

type Grant = { sub: string; scope: string; revoked: boolean };
type Refresh = { grant: Grant; replacedBy: string | null; usedSuccessor: boolean };
type Space = {
  codes: Map<
    string,
    { grant: Grant; redirectUri: string; challenge: string; clientId: string; used: boolean }
  >;
  refreshes: Map<string, Refresh>;
  access: Map<string, { sub: string; scope: string }>;
  /** Refresh grants answered (any outcome), and code exchanges. */
  refreshCalls: number;
  exchanges: number;
  /** Seconds an access token lives: for a code exchange, and for a refresh. */
  exchangeTtlS: number;
  refreshTtlS: number;
  /** The next token requests answer these statuses (a scripted outage). */
  tokenFaults: number[];
};

export type OAuthControl =
  | { revoke: string }
  | { ttl: { exchange?: number; refresh?: number } }
  | { token_faults: number[] };

export function oauthServer() {
  const spaces = new Map<string, Space>();
  const space = (name: string): Space => {
    let found = spaces.get(name);
    if (!found) {
      found = {
        codes: new Map(),
        refreshes: new Map(),
        access: new Map(),
        refreshCalls: 0,
        exchanges: 0,
        exchangeTtlS: 3600,
        refreshTtlS: 3600,
        tokenFaults: [],
      };
      spaces.set(name, found);
    }
    return found;
  };

  /** Serves `url` when it is the authorization server's; false: not ours. */
  function serve(
    url: URL,
    method: string,
    raw: string,
    authorization: string | null,
    res: ServerResponse,
  ): boolean {
    const origin = url.origin;
    const meta = /^\/\.well-known\/oauth-authorization-server\/as\/([^/]+)$/.exec(url.pathname);
    if (meta) {
      const issuer = `${origin}/as/${meta[1]}`;
      json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        revocation_endpoint: `${issuer}/revoke`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
      });
      return true;
    }
    const route = /^\/as\/([^/]+)\/(authorize|token|revoke)$/.exec(url.pathname);
    if (!route) return false;
    const ns = space(route[1]!);
    if (route[2] === "authorize") authorize(ns, url, res);
    else if (method !== "POST") json(res, 405, { error: "invalid_request" });
    else if (route[2] === "token") token(ns, new URLSearchParams(raw), authorization, res);
    else {
      const body = new URLSearchParams(raw);
      const refresh = ns.refreshes.get(body.get("token") ?? "");
      if (refresh) refresh.grant.revoked = true;
      res.writeHead(200).end();
    }
    return true;
  }

  function authorize(ns: Space, url: URL, res: ServerResponse): void {
    const q = url.searchParams;
    const redirect = q.get("redirect_uri");
    if (q.get("client_id") !== DEMO_CLIENT.id || !redirect)
      return json(res, 400, { error: "invalid_request", error_description: "unknown client" });
    if (q.get("code_challenge_method") !== "S256" || !q.get("code_challenge"))
      return json(res, 400, { error: "invalid_request", error_description: "PKCE S256 required" });
    const code = `code_${randomBytes(12).toString("hex")}`;
    ns.codes.set(code, {
      grant: { sub: q.get("sub") ?? "user", scope: q.get("scope") ?? "", revoked: false },
      redirectUri: redirect,
      challenge: q.get("code_challenge")!,
      clientId: DEMO_CLIENT.id,
      used: false,
    });
    const back = new URL(redirect);
    back.searchParams.set("code", code);
    if (q.get("state") !== null) back.searchParams.set("state", q.get("state")!);
    res.writeHead(302, { Location: back.toString() }).end();
  }

  function token(
    ns: Space,
    body: URLSearchParams,
    authorization: string | null,
    res: ServerResponse,
  ): void {
    if (!clientAuthenticated(body, authorization))
      return json(res, 401, { error: "invalid_client" });
    const grantType = body.get("grant_type");
    if (grantType === "refresh_token") ns.refreshCalls += 1;
    else ns.exchanges += 1;
    const fault = ns.tokenFaults.shift();
    if (fault !== undefined) return json(res, fault, { error: "temporarily_unavailable" });
    if (grantType === "authorization_code") {
      const code = ns.codes.get(body.get("code") ?? "");
      const verifier = body.get("code_verifier") ?? "";
      const challenge = createHash("sha256").update(verifier).digest("base64url");
      if (
        !code ||
        code.used ||
        code.redirectUri !== body.get("redirect_uri") ||
        code.challenge !== challenge
      )
        return json(res, 400, { error: "invalid_grant" });
      code.used = true;
      issue(ns, code.grant, ns.exchangeTtlS, res);
      return;
    }
    if (grantType === "refresh_token") {
      const presented = body.get("refresh_token") ?? "";
      const refresh = ns.refreshes.get(presented);
      // Dead: unknown, revoked, or replaced by a successor that has been used since.
      if (!refresh || refresh.grant.revoked || refresh.usedSuccessor)
        return json(res, 400, { error: "invalid_grant" });
      // Using a successor ends its predecessor's reuse interval.
      for (const other of ns.refreshes.values())
        if (other.replacedBy === presented) other.usedSuccessor = true;
      const issued = issue(ns, refresh.grant, ns.refreshTtlS, res);
      refresh.replacedBy = issued;
      return;
    }
    json(res, 400, { error: "unsupported_grant_type" });
  }

  /** Issues an access and a refresh token for `grant`; returns the refresh token. */
  function issue(ns: Space, grant: Grant, ttlS: number, res: ServerResponse): string {
    const access = `at_${grant.sub}_${randomBytes(12).toString("hex")}`;
    const refresh = `rt_${grant.sub}_${randomBytes(12).toString("hex")}`;
    ns.access.set(access, { sub: grant.sub, scope: grant.scope });
    ns.refreshes.set(refresh, { grant, replacedBy: null, usedSuccessor: false });
    json(res, 200, {
      access_token: access,
      token_type: "Bearer",
      expires_in: ttlS,
      refresh_token: refresh,
      scope: grant.scope,
    });
    return refresh;
  }

  /** POST /_control/oauth?ns=: revoke a subject's grants, set token lifetimes, script token faults. */
  function control(name: string, raw: string, res: ServerResponse): void {
    const ns = space(name);
    const body = JSON.parse(raw || "{}") as OAuthControl;
    if ("revoke" in body)
      for (const refresh of ns.refreshes.values())
        if (refresh.grant.sub === body.revoke) refresh.grant.revoked = true;
    if ("ttl" in body) {
      ns.exchangeTtlS = body.ttl.exchange ?? ns.exchangeTtlS;
      ns.refreshTtlS = body.ttl.refresh ?? ns.refreshTtlS;
    }
    if ("token_faults" in body) ns.tokenFaults.push(...body.token_faults);
    state(name, res);
  }

  /** GET /_control/oauth?ns=: the counts and every access token issued, by subject. */
  function state(name: string, res: ServerResponse): void {
    const ns = space(name);
    json(res, 200, {
      refreshes: ns.refreshCalls,
      exchanges: ns.exchanges,
      access_tokens: [...ns.access].map(([token, { sub }]) => ({ token, sub })),
      refresh_tokens: [...ns.refreshes.keys()],
    });
  }

  return { serve, control, state };
}

function clientAuthenticated(body: URLSearchParams, authorization: string | null): boolean {
  let id = body.get("client_id");
  let secret = body.get("client_secret");
  const basic = /^Basic (.+)$/i.exec(authorization ?? "");
  if (basic) {
    const [user, pass] = Buffer.from(basic[1]!, "base64").toString("utf8").split(":");
    id = decodeURIComponent(user ?? "");
    secret = decodeURIComponent(pass ?? "");
  }
  return id === DEMO_CLIENT.id && secret === DEMO_CLIENT.secret;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json", "Cache-Control": "no-store" });
  res.end(JSON.stringify(body));
}
