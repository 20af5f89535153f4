// OAuth test helpers (issue 36): a provider registered against the local authorization server
// (demo/oauth-server.ts, one namespace per test), and a user's consent driven end to end — the
// authorization URL opened at the server (which consents at once as `sub`), its redirect followed
// to toolgate's public callback. Everything goes through the public API.
import { env, exports } from "cloudflare:workers";
import { DEMO_CLIENT } from "../../demo/oauth-server.ts";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { consolePage } from "./console-page.ts";
import { api, manifest, operation, testTenant, trace, turn, unique, until } from "./api.ts";

const upstreamBase = (env as unknown as { UPSTREAM_URL: string }).UPSTREAM_URL;

export function authServer() {
  const ns = unique("as");
  const control = (body?: unknown) =>
    fetch(`${upstreamBase}/_control/oauth?ns=${ns}`, {
      method: body === undefined ? "GET" : "POST",
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }).then(
      (r) =>
        r.json() as Promise<{
          refreshes: number;
          exchanges: number;
          access_tokens: Array<{ token: string; sub: string }>;
          refresh_tokens: string[];
        }>,
    );
  return {
    issuer: `${upstreamBase}/as/${ns}`,
    state: () => control(),
    revoke: (sub: string) => control({ revoke: sub }),
    ttl: (ttl: { exchange?: number; refresh?: number }) => control({ ttl }),
    tokenFaults: (...statuses: number[]) => control({ token_faults: statuses }),
  };
}

export async function registerProvider(
  server: ReturnType<typeof authServer>,
  extra: Record<string, unknown> = {},
) {
  const id = unique("prov").replace(/_/g, "-");
  const put = await api("PUT", `/v1/oauth-providers/${id}`, {
    issuer: server.issuer,
    client_id: DEMO_CLIENT.id,
    client_secret: DEMO_CLIENT.secret,
    scopes: ["calendar.read"],
    ...extra,
  });
  if (put.status !== 201) throw new Error(`provider PUT failed: ${JSON.stringify(put.body)}`);
  return id;
}

export const publicFetch = (url: string) =>
  (exports as unknown as { default: Fetcher }).default.fetch(new Request(url));

/** The authorization URL opened as `sub`: the server's redirect back to toolgate (not yet followed). */
export async function consentRedirect(authorizationUrl: string, sub: string): Promise<string> {
  const url = new URL(authorizationUrl);
  url.searchParams.set("sub", sub);
  const answered = await fetch(url, { redirect: "manual" });
  const location = answered.headers.get("location");
  if (answered.status !== 302 || !location)
    throw new Error(`the authorization server did not redirect: ${answered.status}`);
  return location;
}

/** POST /v1/connections, then consent as `sub` and follow the redirect to the callback. */
export async function connect(provider: string, user: string, sub = user) {
  const started = await api("POST", "/v1/connections", { provider, user });
  if (started.status !== 201) throw new Error(`connect failed: ${JSON.stringify(started.body)}`);
  return completeConsent(started.body.authorization_url as string, sub);
}

export async function completeConsent(authorizationUrl: string, sub: string) {
  const callback = await consentRedirect(authorizationUrl, sub);
  const answered = await publicFetch(callback);
  return { status: answered.status, body: (await answered.json()) as any, callback };
}

export async function userTool(
  provider: string,
  url: string,
  scopes: string[] = [],
  extra: Record<string, unknown> = {},
) {
  const tool = manifest({
    url,
    request: {
      method: "POST",
      url: `${url}/events`,
      headers: { Authorization: "Bearer {credential}" },
    },
    auth: { oauth: provider, scopes },
    ...extra,
  });
  const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
  if (put.status !== 201) throw new Error(`tool PUT failed: ${JSON.stringify(put.body)}`);
  return tool.name as string;
}

export async function runAs(user: string, tool: string) {
  const run = await api("POST", "/v1/runs", { user: { id: user, scopes: [] }, tools: [tool] });
  if (run.status !== 201) throw new Error(`run failed: ${JSON.stringify(run.body)}`);
  return run.body.run_id as string;
}

/** One call in a turn; `waitSeconds` 0 for a call that will wait for a person (an approval). */
export const call = (runId: string, tool: string, amount = 1, waitSeconds = 5) =>
  turn(
    runId,
    [{ id: `c${amount}`, name: tool, arguments: { amount, currency: "usd" } }],
    waitSeconds,
  );

export const credentialObject = async (user: string, provider: string): Promise<any> =>
  placedStub(
    env as unknown as Env,
    "CREDENTIALS",
    `${(await testTenant()).tenantId}:credential:${JSON.stringify([user, provider])}`,
  ) as any;

/** Every body a person or program could read about these runs (console pages too), as one string to search. */
export async function everything(runIds: string[], operationIds: string[]) {
  const bodies: unknown[] = [];
  for (const runId of runIds)
    bodies.push(await trace(runId), (await api("GET", `/v1/runs/${runId}`)).body);
  for (const id of operationIds) bodies.push((await operation(id)).body);
  bodies.push((await api("GET", "/v1/events?limit=500")).body);
  for (const runId of runIds) bodies.push(await consolePage(`/console/runs/${runId}`));
  for (const id of operationIds) bodies.push(await consolePage(`/console/operations/${id}`));
  return JSON.stringify(bodies);
}

/** The operation once recorded (read until then, bounded), as GET /v1/operations/{id} shows it. */
export const settled = async (operationId: string) =>
  (
    await until(
      () => operation(operationId),
      (r) => r.body.phase === "recorded",
    )
  ).body;

/** The Authorization headers the upstream received, and the newest token the server issued. */
export async function sentAndLatest(
  server: ReturnType<typeof authServer>,
  up: { state(): Promise<{ requests: Array<{ authorization: string | null }> }> },
) {
  const state = await server.state();
  return {
    state,
    sent: (await up.state()).requests.map((r) => r.authorization),
    latest: `Bearer ${state.access_tokens.at(-1)!.token}`,
  };
}
