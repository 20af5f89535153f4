// Issue 36, acting as the user: a tool with `auth` sends the run's end user's own token, fetched
// just before the send. Proven against the local authorization server (demo/oauth-server.ts) and
// the counting upstream: whose token each request carried, how often the server was asked to
// refresh, and that no token appears in any answer, trace or event.
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, fireAlarm, manifest, turn, upstream } from "../support/api.ts";
import {
  authServer,
  call,
  connect,
  credentialObject,
  everything,
  registerProvider,
  sentAndLatest,
  settled,
  runAs,
  userTool,
} from "../support/oauth.ts";

describe("acting as the user", { timeout: 30_000 }, () => {
  it("connect → callback → the first call sends the user's own token; two users never share one", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "alice");
    await connect(provider, "bob");
    const tokens = Object.fromEntries(
      (await server.state()).access_tokens.map((t) => [t.sub, t.token]),
    );
    const [aliceRun, bobRun] = [await runAs("alice", tool), await runAs("bob", tool)];
    const a = await call(aliceRun, tool, 1);
    const b = await call(bobRun, tool, 2);
    expect(a.body.results[0].status).toBe("succeeded");
    expect(b.body.results[0].status).toBe("succeeded");
    const requests = (await up.state()).requests;
    expect(requests.map((r) => [r.body, r.authorization])).toEqual([
      [{ amount: 1, currency: "usd" }, `Bearer ${tokens.alice}`],
      [{ amount: 2, currency: "usd" }, `Bearer ${tokens.bob}`],
    ]);
    const read = await everything(
      [aliceRun, bobRun],
      [a.body.results[0].operation_id, b.body.results[0].operation_id],
    );
    expect(read).toContain("{credential}");
    for (const token of Object.values(tokens)) expect(read).not.toContain(token);
  });

  it("refuses {credential} without auth, and auth naming an unknown provider", async () => {
    const up = upstream();
    const bare = manifest({
      url: up.url,
      request: {
        method: "POST",
        url: `${up.url}/x`,
        headers: { Authorization: "Bearer {credential}" },
      },
    });
    const refused = await api("PUT", `/v1/tools/${bare.name}`, bare);
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("invalid_manifest");
    const unknown = { ...bare, auth: { oauth: "nobody", scopes: [] } };
    const missing = await api("PUT", `/v1/tools/${bare.name}`, unknown);
    expect(missing.status).toBe(422);
    expect(missing.body.code).toBe("unknown_oauth_provider");
    const unused = manifest({ url: up.url, auth: { oauth: "nobody", scopes: [] } });
    expect((await api("PUT", `/v1/tools/${unused.name}`, unused)).body.code).toBe(
      "invalid_manifest",
    );
  });

  it("an expired access token is refreshed exactly once before the send, with 10 calls in flight", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "carol");
    const runId = await runAs("carol", tool);
    const calls = Array.from({ length: 10 }, (_, i) => ({
      id: `c${i}`,
      name: tool,
      arguments: { amount: i + 1, currency: "usd" },
    }));
    const answered = await turn(runId, calls);
    expect(answered.body.results.map((r: { status: string }) => r.status)).toEqual(
      Array(10).fill("succeeded"),
    );
    const state = await server.state();
    expect(state.refreshes).toBe(1);
    const refreshed = state.access_tokens[1]!.token;
    const sent = (await up.state()).requests.map((r) => r.authorization);
    expect(sent).toEqual(Array(10).fill(`Bearer ${refreshed}`));
  });

  it("a kill between the refresh and its store leaves a usable token", async () => {
    const server = authServer();
    await server.ttl({ exchange: 1, refresh: 3600 });
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    await connect(provider, "dora");
    const runId = await runAs("dora", tool);
    const object = await credentialObject("dora", provider);
    // This instance dies between the provider's answer and the store (the eviction below drops it).
    await (runInDurableObject as any)(object, (instance: { storeTokens: () => Promise<void> }) => {
      instance.storeTokens = async () => {
        throw new Error("test: died after the refresh, before storing it");
      };
    });
    const first = await call(runId, tool);
    const opId = first.body.results[0].operation_id;
    // The provider answered the refresh, the object died before storing it: nothing was sent.
    expect(first.body.results[0]).toMatchObject({ status: "pending", code: "retry_scheduled" });
    expect((await server.state()).refreshes).toBe(1);
    expect((await up.state()).requests).toHaveLength(0);
    await evictDurableObject(object);
    await fireAlarm(opId);
    expect((await settled(opId)).result.status).toBe("succeeded");
    const { state, sent, latest } = await sentAndLatest(server, up);
    expect(state.refreshes).toBe(2);
    expect(sent).toEqual([latest]);
  });
});
