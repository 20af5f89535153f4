// Authentication and authorization at the edge. Three kinds of bearer token:
// - the deployment admin token (TOOLGATE_ADMIN_TOKEN): /v1/admin/* only;
// - tenant API keys `tgk.<tenant>.<key_id>.<secret>.<tag>`: the tag (HMAC over tenant and key id)
//   is checked here, then the secret (hashed, constant time) by the tenant's own object (api-keys.ts);
// - run tokens `rt.<tenant>.<run>.<expiry>.<hmac>`: let an agent drive exactly one run.
// Production has no default credentials: an unset secret is a 500, never an open door.
import type { Context, MiddlewareHandler } from "hono";
import type { ApiScope } from "./schemas.ts";
import type { Env } from "../durable/env.ts";
import { checkApiKey } from "./api-keys.ts";
import { ApiProblem } from "./problem.ts";
import { constantTimeEqual, hmac } from "../crypto.ts";
import { LruCache } from "../lru.ts";
import { adminTokenOf, signingKeyRequired } from "../config.ts";
import type { Decider } from "../domain/operation/state.ts";
import { ACCESS_HEADER, accessIdentity } from "./access.ts";

export { ApiScope } from "./schemas.ts";

export type Principal =
  | { kind: "admin" }
  | { kind: "key"; tenantId: string; keyId: string; keyName: string; scopes: ApiScope[] }
  | { kind: "run"; tenantId: string; runId: string };
export type AppEnv = { Bindings: Env; Variables: { principal: Principal } };

export const authenticate: MiddlewareHandler<AppEnv> = async (c, next) => {
  const token = /^Bearer (\S+)$/.exec(c.req.header("Authorization") ?? "")?.[1];
  if (!token)
    throw new ApiProblem({ code: "unauthorized", detail: "send Authorization: Bearer <token>" });
  const principal = await identify(c.env, token);
  if (!principal) throw new ApiProblem({ code: "unauthorized", detail: "the token is not valid" });
  c.set("principal", principal);
  return next();
};

/** /mcp: only a run token names the run an MCP client drives (the token is the whole session). */
export async function authenticateRun(
  c: Context<AppEnv>,
): Promise<{ tenantId: string; runId: string }> {
  const token = /^Bearer (\S+)$/.exec(c.req.header("Authorization") ?? "")?.[1];
  if (!token)
    throw new ApiProblem({
      code: "unauthorized",
      detail: "send Authorization: Bearer <run token> (the run_token from POST /v1/runs)",
    });
  const principal = await identify(c.env, token);
  if (!principal) throw new ApiProblem({ code: "unauthorized", detail: "the token is not valid" });
  if (principal.kind !== "run")
    throw new ApiProblem({
      code: "forbidden",
      detail: "/mcp takes a run token (the run_token from POST /v1/runs), not an API key",
    });
  c.set("principal", principal);
  return principal;
}

async function identify(env: Env, token: string): Promise<Principal | null> {
  if (token.startsWith("tgk.")) {
    // The key's tag is checked here first: a made-up key never reaches the tenant's object.
    const checked = await checkApiKey(env, signingKey(env), token, Date.now());
    if (!checked.ok) throw new ApiProblem({ code: checked.code, detail: checked.detail });
    const { tenantId, keyId, name, scopes } = checked.key;
    return { kind: "key", tenantId, keyId, keyName: name, scopes };
  }
  if (token.startsWith("rt.")) return verifyRunToken(env, token);
  const adminToken = adminTokenOf(env);
  if (!adminToken)
    throw new ApiProblem({
      code: "misconfigured",
      detail: "TOOLGATE_ADMIN_TOKEN is not set for this deployment",
    });
  return (await constantTimeEqual(token, adminToken)) ? { kind: "admin" } : null;
}

export function requireAdminToken(c: Context<AppEnv>): void {
  if (c.get("principal").kind !== "admin")
    throw new ApiProblem({ code: "forbidden", detail: "this needs the deployment admin token" });
}

/** Tenant-wide routes: an API key holding `scope`. Returns the tenant every read and write is scoped by. */
export function requireScope(c: Context<AppEnv>, scope: ApiScope): string {
  const principal = c.get("principal");
  if (principal.kind !== "key")
    throw new ApiProblem({
      code: "forbidden",
      detail: `this needs a tenant API key with scope ${scope}`,
    });
  if (!principal.scopes.includes(scope))
    throw new ApiProblem({ code: "forbidden", detail: `this API key lacks the scope ${scope}` });
  return principal.tenantId;
}

/** Run routes: the run's own run token, or an API key holding `scope`. Another run's token sees a 404. */
export function requireRunAccess(c: Context<AppEnv>, runId: string, scope: ApiScope): string {
  const principal = c.get("principal");
  if (principal.kind === "run") {
    if (principal.runId !== runId)
      throw new ApiProblem({ code: "not_found", detail: "no such run" });
    return principal.tenantId;
  }
  return requireScope(c, scope);
}

export async function signRunToken(
  env: Env,
  tenantId: string,
  runId: string,
  expiresAtMs: number,
): Promise<string> {
  const payload = `${tenantId}.${runId}.${expiresAtMs}`;
  return `rt.${payload}.${await hmac(signingKey(env), payload)}`;
}

/**
 * Run tokens that verified, per isolate: an agent sends the same token with every turn, and the
 * HMAC plus the constant-time compare showed on the replay path (npm run profile). Only a token
 * that verified under the current signing key is kept, and its expiry is still checked every time.
 */
type VerifiedRunToken = { signingKey: string; tenantId: string; runId: string; expiresMs: number };
const verifiedRunTokens = new LruCache<string, VerifiedRunToken>(
  { maxEntries: 4096, maxBytes: 4 * 1024 * 1024 },
  (entry) => 2 * (entry.tenantId.length + entry.runId.length) + 200,
);

async function verifyRunToken(env: Env, token: string): Promise<Principal | null> {
  const key = signingKey(env);
  const known = verifiedRunTokens.get(token);
  if (known && known.signingKey === key)
    return known.expiresMs > Date.now()
      ? { kind: "run", tenantId: known.tenantId, runId: known.runId }
      : null;
  const parts = token.split(".");
  if (parts.length !== 5) return null;
  const [, tenantId, runId, expires, signature] = parts as [string, string, string, string, string];
  const expected = await hmac(key, `${tenantId}.${runId}.${expires}`);
  if (!(await constantTimeEqual(signature, expected))) return null;
  const expiresMs = Number(expires);
  verifiedRunTokens.set(token, { signingKey: key, tenantId, runId, expiresMs });
  return expiresMs > Date.now() ? { kind: "run", tenantId, runId } : null;
}

export function signingKey(env: Env): string {
  const key = signingKeyRequired(env);
  if (!key.ok) throw new ApiProblem(key.error);
  return key.value;
}

/** Who decides, and how toolgate knows it (Decision's `approverId` and `via`). */
export type { Decider } from "../domain/operation/state.ts";

/**
 * Who decides an approval (issue 35). A person behind Cloudflare Access: the verified token's email
 * (or sub), whatever key carried the request; otherwise the deciding key's name (a machine). Four
 * eyes compares it with the run's user, so naming someone else (`{ approver: { id } }`, a service
 * deciding on a person's behalf, which it has authenticated itself) needs the separate scope
 * approvals:delegate: any other approvals:decide key could otherwise pass four eyes by naming anyone.
 * A token that does not verify throws (401 access_denied): nothing is decided.
 */
export async function decider(
  c: Context<AppEnv>,
  named: { id: string } | undefined,
): Promise<Decider> {
  const principal = c.get("principal");
  if (principal.kind !== "key") return { id: principalName(c), via: "api_key", scopes: [] };
  const person = await accessIdentity(c.env, c.req.header(ACCESS_HEADER));
  const { scopes } = principal;
  if (!named)
    return person
      ? { id: person.id, via: "access", scopes, claims: person.claims }
      : { id: principal.keyName, via: "api_key", scopes };
  if (!principal.scopes.includes("approvals:delegate"))
    throw new ApiProblem({
      code: "forbidden",
      detail: `naming the approver (approver.id) needs an API key with the scope approvals:delegate; without it the approver is this key's name (${principal.keyName}). Nothing was decided`,
    });
  if (person)
    throw new ApiProblem({
      code: "invalid_request",
      detail: `approver.id names someone else than the person Access signed in (${person.id}); send one or the other. Nothing was decided`,
    });
  return { id: named.id, via: "delegated", scopes };
}

/** Who did it, for the trace: the key id or the run. */
export function principalName(c: Context<AppEnv>): string {
  const principal = c.get("principal");
  return principal.kind === "admin"
    ? "admin"
    : principal.kind === "key"
      ? principal.keyId
      : principal.runId;
}
