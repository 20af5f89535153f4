// Authentication. For now one deployment admin token (TOOLGATE_ADMIN_TOKEN) acts for the default
// tenant; run tokens (HMAC-signed run id + expiry) let an agent drive exactly one run. Tokens are
// compared in constant time; production has no default credentials (unset secret → 500, not open).
import type { Context, MiddlewareHandler } from "hono";
import type { Env } from "../env.ts";
import { ApiProblem } from "./problem.ts";

export const DEFAULT_TENANT = "t_default";
export type Principal = { kind: "admin"; tenantId: string } | { kind: "run"; tenantId: string; runId: string };
export type AppEnv = { Bindings: Env; Variables: { principal: Principal } };

export const authenticate: MiddlewareHandler<AppEnv> = async (c, next) => {
  const adminToken = c.env.TOOLGATE_ADMIN_TOKEN;
  if (!adminToken) throw new ApiProblem({ code: "misconfigured", detail: "TOOLGATE_ADMIN_TOKEN is not set for this deployment" });
  const header = c.req.header("Authorization") ?? "";
  const token = /^Bearer (.+)$/.exec(header)?.[1];
  if (!token) throw new ApiProblem({ code: "unauthorized", detail: "send Authorization: Bearer <token>" });
  if (await constantTimeEqual(token, adminToken)) {
    c.set("principal", { kind: "admin", tenantId: DEFAULT_TENANT });
    return next();
  }
  const run = await verifyRunToken(c.env, token);
  if (!run) throw new ApiProblem({ code: "unauthorized", detail: "the token is not valid" });
  c.set("principal", { kind: "run", tenantId: run.tenantId, runId: run.runId });
  return next();
};

/** Admin-only routes; a run token is for driving its own run, nothing else. */
export function requireAdmin(c: Context<AppEnv>): string {
  const principal = c.get("principal");
  if (principal.kind !== "admin") throw new ApiProblem({ code: "forbidden", detail: "a run token cannot do this" });
  return principal.tenantId;
}

/** The run a request may touch: any of the tenant's for the admin, only its own for a run token. */
export function requireRun(c: Context<AppEnv>, runId: string): string {
  const principal = c.get("principal");
  if (principal.kind === "run" && principal.runId !== runId) throw new ApiProblem({ code: "not_found", detail: "no such run" });
  return principal.tenantId;
}

export async function signRunToken(env: Env, tenantId: string, runId: string, expiresAtMs: number): Promise<string> {
  const payload = `${tenantId}.${runId}.${expiresAtMs}`;
  return `rt.${payload}.${await hmac(signingKey(env), payload)}`;
}

async function verifyRunToken(env: Env, token: string): Promise<{ tenantId: string; runId: string } | null> {
  const parts = token.split(".");
  if (parts.length !== 5 || parts[0] !== "rt" || !env.TOOLGATE_SIGNING_KEY) return null;
  const [, tenantId, runId, expires, signature] = parts as [string, string, string, string, string];
  const expected = await hmac(signingKey(env), `${tenantId}.${runId}.${expires}`);
  if (!(await constantTimeEqual(signature, expected))) return null;
  return Number(expires) > Date.now() ? { tenantId, runId } : null;
}

function signingKey(env: Env): string {
  if (!env.TOOLGATE_SIGNING_KEY) throw new ApiProblem({ code: "misconfigured", detail: "TOOLGATE_SIGNING_KEY is not set for this deployment" });
  return env.TOOLGATE_SIGNING_KEY;
}

async function hmac(key: string, payload: string): Promise<string> {
  const cryptoKey = await crypto.subtle.importKey("raw", new TextEncoder().encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const signature = await crypto.subtle.sign("HMAC", cryptoKey, new TextEncoder().encode(payload));
  return btoa(String.fromCharCode(...new Uint8Array(signature))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Compares digests, so timing reveals nothing about the secret (workerd's timingSafeEqual needs equal lengths). */
async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const [da, db] = await Promise.all([a, b].map((s) => crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))));
  return crypto.subtle.timingSafeEqual(da!, db!);
}
