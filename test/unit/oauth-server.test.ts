// The local authorization server (demo/oauth-server.ts) speaks OAuth as oauth4webapi expects:
// discovery, code + PKCE, refresh with rotation and a reuse interval, revocation, scripted faults.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as o from "oauth4webapi";
import { startUpstream, type Upstream } from "../../demo/upstream.ts";
import { DEMO_CLIENT } from "../../demo/oauth-server.ts";

const insecure = { [o.allowInsecureRequests]: true };
let up: Upstream;
beforeAll(async () => {
  up = await startUpstream();
});
afterAll(() => up.close());

async function connect(ns: string, sub: string) {
  const issuer = new URL(`${up.url}/as/${ns}`);
  const as = await o.processDiscoveryResponse(
    issuer,
    await o.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }),
  );
  const client = { client_id: DEMO_CLIENT.id };
  const auth = o.ClientSecretBasic(DEMO_CLIENT.secret);
  const verifier = o.generateRandomCodeVerifier();
  const url = new URL(as.authorization_endpoint!);
  for (const [k, v] of Object.entries({
    client_id: DEMO_CLIENT.id,
    redirect_uri: "http://cb.test/cb",
    code_challenge: await o.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state: "st1",
    sub,
  }))
    url.searchParams.set(k, v);
  const redirected = await fetch(url, { redirect: "manual" });
  const params = o.validateAuthResponse(
    as,
    client,
    new URL(redirected.headers.get("location")!),
    "st1",
  );
  const exchange = (v: string) =>
    o.authorizationCodeGrantRequest(as, client, auth, params, "http://cb.test/cb", v, insecure);
  const refresh = async (token: string) =>
    o.processRefreshTokenResponse(
      as,
      client,
      await o.refreshTokenGrantRequest(as, client, auth, token, insecure),
    );
  return { as, client, exchange, verifier, refresh };
}

describe("the local authorization server", { timeout: 30_000 }, () => {
  it("exchanges a code once with its PKCE verifier, rotates refresh tokens, revokes", async () => {
    const ns = `as_${Date.now()}`;
    const c = await connect(ns, "alice");
    await expect(
      o.processAuthorizationCodeResponse(
        c.as,
        c.client,
        await c.exchange("wrong-verifier-".repeat(3)),
      ),
    ).rejects.toMatchObject({ error: "invalid_grant" });
    const tokens = await o.processAuthorizationCodeResponse(
      c.as,
      c.client,
      await c.exchange(c.verifier),
    );
    expect(tokens.access_token).toMatch(/^at_alice_/);
    // A code is single-use.
    await expect(
      o.processAuthorizationCodeResponse(c.as, c.client, await c.exchange(c.verifier)),
    ).rejects.toMatchObject({ error: "invalid_grant" });
    const first = await c.refresh(tokens.refresh_token!);
    expect(first.refresh_token).not.toBe(tokens.refresh_token);
    // Reuse interval: the predecessor still refreshes until its successor is used.
    const again = await c.refresh(tokens.refresh_token!);
    await c.refresh(again.refresh_token!);
    await expect(c.refresh(tokens.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
    });
    await fetch(`${up.url}/_control/oauth?ns=${ns}`, {
      method: "POST",
      body: JSON.stringify({ revoke: "alice" }),
    });
    await expect(c.refresh(again.refresh_token!)).rejects.toMatchObject({
      error: "invalid_grant",
      status: 400,
    });
    await fetch(`${up.url}/_control/oauth?ns=${ns}`, {
      method: "POST",
      body: JSON.stringify({ token_faults: [503] }),
    });
    await expect(c.refresh(again.refresh_token!)).rejects.toMatchObject({
      code: "OAUTH_RESPONSE_IS_NOT_CONFORM",
    });
    const state = await fetch(`${up.url}/_control/oauth?ns=${ns}`).then(
      (r) => r.json() as Promise<{ refreshes: number; exchanges: number }>,
    );
    expect(state.refreshes).toBe(6);
    expect(state.exchanges).toBe(3);
  });
});
