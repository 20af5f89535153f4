// Issue 36: OAuth providers and connections through the public API, against the local
// authorization server (demo/oauth-server.ts): discovery, the sealed client secret, connect →
// consent → callback, health, disconnect; a tampered state and a replayed callback refused.
import { describe, expect, it } from "vitest";
import { api } from "../support/api.ts";
import {
  authServer,
  completeConsent,
  consentRedirect,
  publicFetch,
  registerProvider,
} from "../support/oauth.ts";
import { DEMO_CLIENT } from "../../demo/oauth-server.ts";

describe("OAuth providers", { timeout: 30_000 }, () => {
  it("discovers the endpoints, seals the client secret and never returns it", async () => {
    const server = authServer();
    const id = await registerProvider(server);
    const got = await api("GET", `/v1/oauth-providers/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id,
      issuer: server.issuer,
      authorization_endpoint: `${server.issuer}/authorize`,
      token_endpoint: `${server.issuer}/token`,
      client_id: DEMO_CLIENT.id,
      pkce: true,
    });
    expect(got.body.client_secret_fingerprint).toMatch(/^hmac:/);
    const listed = await api("GET", "/v1/oauth-providers");
    expect(JSON.stringify([got.body, listed.body])).not.toContain(DEMO_CLIENT.secret);
    expect(listed.body.providers.map((p: { id: string }) => p.id)).toContain(id);
    expect((await api("DELETE", `/v1/oauth-providers/${id}`)).status).toBe(204);
    expect((await api("GET", `/v1/oauth-providers/${id}`)).body.code).toBe(
      "unknown_oauth_provider",
    );
  });

  it("refuses an issuer whose discovery fails, and unknown fields, storing nothing", async () => {
    const bad = await api("PUT", "/v1/oauth-providers/nowhere", {
      issuer: "http://127.0.0.1:9/as/none",
      client_id: "x",
      client_secret: "y",
    });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe("oauth_provider_invalid");
    const extra = await api("PUT", "/v1/oauth-providers/nowhere", {
      issuer: authServer().issuer,
      client_id: "x",
      client_secret: "y",
      grant: "implicit",
    });
    expect(extra.status).toBe(400);
    expect((await api("GET", "/v1/oauth-providers/nowhere")).status).toBe(422);
  });
});

describe("connections", { timeout: 30_000 }, () => {
  it("connect → consent → callback: connected, the token never shown; disconnect", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const before = await api("GET", "/v1/connections?user=alice");
    expect(before.body.connections).toContainEqual(
      expect.objectContaining({ provider, health: "needs_consent" }),
    );
    const started = await api("POST", "/v1/connections", { provider, user: "alice" });
    expect(started.status).toBe(201);
    const url = new URL(started.body.authorization_url);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.get("scope")).toBe("calendar.read");
    const done = await completeConsent(started.body.authorization_url, "alice");
    expect(done).toMatchObject({ status: 200, body: { connected: true, user: "alice", provider } });
    const after = await api("GET", "/v1/connections?user=alice");
    const mine = after.body.connections.find((c: { provider: string }) => c.provider === provider);
    expect(mine).toMatchObject({ health: "connected", scopes: ["calendar.read"] });
    const tokens = (await server.state()).access_tokens.map((t) => t.token);
    expect(tokens).toHaveLength(1);
    expect(JSON.stringify([after.body, done.body])).not.toContain(tokens[0]);
    // Another user of the tenant is not connected by alice's consent.
    const bob = await api("GET", "/v1/connections?user=bob");
    expect(
      bob.body.connections.find((c: { provider: string }) => c.provider === provider).health,
    ).toBe("needs_consent");
    expect((await api("DELETE", `/v1/connections/${provider}?user=alice`)).status).toBe(204);
    const gone = await api("GET", "/v1/connections?user=alice");
    expect(
      gone.body.connections.find((c: { provider: string }) => c.provider === provider),
    ).toMatchObject({
      health: "needs_consent",
      reason: "disconnected",
    });
  });

  it("refuses a tampered state and a replayed callback, storing nothing", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const started = await api("POST", "/v1/connections", { provider, user: "carol" });
    const callback = new URL(await consentRedirect(started.body.authorization_url, "mallory"));
    const state = callback.searchParams.get("state")!;
    // The state re-pointed at another user (same nonce): that user's object holds no such nonce.
    const [head, nonce] = state.split(".") as [string, string];
    const [tenantId] = JSON.parse(atob(head.replace(/-/g, "+").replace(/_/g, "/"))) as string[];
    const forged = btoa(JSON.stringify([tenantId, "dave", provider]))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    for (const bad of [`${forged}.${nonce}`, `${head}.${"x".repeat(43)}`, "garbage"]) {
      const tampered = new URL(callback);
      tampered.searchParams.set("state", bad);
      const answered = await publicFetch(tampered.toString());
      expect(answered.status).toBe(400);
      expect(((await answered.json()) as { code: string }).code).toBe("connection_state_invalid");
    }
    expect((await server.state()).exchanges).toBe(0);
    const first = await publicFetch(callback.toString());
    expect(first.status).toBe(200);
    const replay = await publicFetch(callback.toString());
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { code: string }).code).toBe("connection_state_invalid");
    expect((await server.state()).exchanges).toBe(1);
    const dave = await api("GET", "/v1/connections?user=dave");
    expect(
      dave.body.connections.find((c: { provider: string }) => c.provider === provider).health,
    ).toBe("needs_consent");
  });

  it("refuses a connection to an unknown provider", async () => {
    const answered = await api("POST", "/v1/connections", { provider: "nope", user: "alice" });
    expect(answered.status).toBe(422);
    expect(answered.body.code).toBe("unknown_oauth_provider");
  });
});
