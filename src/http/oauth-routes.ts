// Acting as the user (issue 36): /v1/oauth-providers (the tenant's OAuth clients, discovered at PUT,
// the client secret write-only; scope secrets:write), /v1/connections (an end user's connect link,
// their connections' health, disconnect; scope runs:write, as the backend that makes their runs)
// and the public callback /oauth/callback (the state names its credential object and carries a
// nonce only that object holds: a tampered or replayed state is refused, nothing stored).
import { Hono, type Context } from "hono";
import { z } from "zod";
import { hostPolicy } from "../config.ts";
import { decodeState, OAuthProviderBody, PROVIDER_ID } from "../domain/credential.ts";
import { credentialStub } from "../durable/stubs.ts";
import { resolveEndpoints } from "../durable/credential/protocol.ts";
import { callbackUri, connectLink, decodeText } from "../durable/credential/connect.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import type { Env } from "../durable/env.ts";
import { ApiProblem } from "./problem.ts";
import { forced, readJson, readQuery, tenantStub, unwrap } from "./request.ts";

export const PutOAuthProvider = OAuthProviderBody;
export const PostConnection = z.strictObject({
  provider: z.string().regex(PROVIDER_ID),
  user: z.string().min(1).max(256),
});
const UserQuery = z.strictObject({ user: z.string().min(1).max(256) });

const providerId = (id: string) => {
  if (!PROVIDER_ID.test(id))
    throw new ApiProblem({
      code: "invalid_request",
      detail:
        "a provider id is 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit",
    });
  return id;
};

export const oauthProviderRoutes = new Hono<AppEnv>()
  .put("/:id", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    const id = providerId(c.req.param("id"));
    const body = await readJson(c, PutOAuthProvider);
    const endpoints = await resolveEndpoints(body, hostPolicy(c.env));
    if (!endpoints.ok)
      throw new ApiProblem({ code: "oauth_provider_invalid", detail: endpoints.error });
    const { created, ...view } = unwrap(
      await tenantStub(c, tenantId).putOauthProvider(tenantId, id, body, endpoints.value),
    );
    return c.json(view, created ? 201 : 200);
  })
  .get("/", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    return c.json({ providers: await tenantStub(c, tenantId).listOauthProviders() });
  })
  .get("/:id", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    return c.json(
      unwrap(await tenantStub(c, tenantId).getOauthProvider(providerId(c.req.param("id")))),
    );
  })
  .delete("/:id", async (c) => {
    const tenantId = requireScope(c, "secrets:write");
    const force = forced(c);
    const id = providerId(c.req.param("id"));
    const { tools } = unwrap(await tenantStub(c, tenantId).deleteOauthProvider(id, force));
    // A forced delete names the tools left acting with no provider, as a forced tool change warns.
    return tools.length > 0
      ? c.json({ deleted: true, tools_without_provider: tools }, 200)
      : c.body(null, 204);
  });

export const connectionRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const tenantId = requireScope(c, "runs:write");
    const { provider, user } = await readJson(c, PostConnection);
    unwrap(await tenantStub(c, tenantId).getOauthProvider(provider));
    const link = unwrap(
      await connectLink(c.env, { tenantId, user, provider }, callbackUri(c.env, c.req.url), []),
    );
    return c.json({ provider, user, ...link }, 201);
  })
  .get("/", async (c) => {
    const tenantId = requireScope(c, "runs:write");
    const { user } = readQuery(c, UserQuery);
    const providers = await tenantStub(c, tenantId).listOauthProviders();
    const connections = await Promise.all(
      providers.map((p) =>
        credentialStub(c.env, tenantId, user, p.id).view({ tenantId, user, provider: p.id }, []),
      ),
    );
    return c.json({ user, connections });
  })
  .delete("/:provider", async (c) => {
    const tenantId = requireScope(c, "runs:write");
    const provider = providerId(c.req.param("provider"));
    const { user } = readQuery(c, UserQuery);
    const owner = { tenantId, user, provider };
    const dropped = await credentialStub(c.env, tenantId, user, provider).disconnect(owner);
    if (!dropped)
      throw new ApiProblem({
        code: "not_found",
        detail: `${user} has no connection to ${provider}`,
      });
    return c.body(null, 204);
  });

/** GET /oauth/callback: public; the state alone says whose connection this completes. */
export async function oauthCallback(c: Context<AppEnv>) {
  const state = c.req.query("state") ?? "";
  const parts = decodeState(state, decodeText);
  if (!parts.ok) throw new ApiProblem({ code: "connection_state_invalid", detail: parts.error });
  const { tenantId, user, provider, nonce } = parts.value;
  const done = unwrap(
    await credentialStub(c.env, tenantId, user, provider).complete(
      { tenantId, user, provider },
      nonce,
      c.req.url,
    ),
  );
  if ((c.req.header("Accept") ?? "").includes("text/html"))
    return c.html(
      `<!doctype html><meta charset="utf-8"><title>Connected</title><p>Connected to ${escape(provider)}. You can close this page; the waiting calls continue.</p>`,
    );
  return c.json({ connected: true, ...done });
}

const escape = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/**
 * Each pending approval of a tool acting as the user, with that user's connection health now
 * (issue 36): `must_reconnect` tells the approver that approving alone will not send it — the call
 * then waits for the user (awaiting_credential), and the token is refreshed only after approval.
 */
export async function withCredentialHealth<
  T extends { state: string; credential?: { provider: string; user: string; scopes: string[] } },
>(env: Env, tenantId: string, items: T[]) {
  return Promise.all(
    items.map(async (item) => {
      if (!item.credential || item.state !== "pending") return item;
      const { provider, user, scopes } = item.credential;
      const owner = { tenantId, user, provider };
      const health = await credentialStub(env, tenantId, user, provider)
        .view(owner, scopes)
        .then((view) => view.health)
        .catch(() => null);
      return {
        ...item,
        credential: { ...item.credential, health, must_reconnect: health === "needs_consent" },
      };
    }),
  );
}
