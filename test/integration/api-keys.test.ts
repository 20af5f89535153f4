// Tenant API keys from an attacker's side: anyone who has seen a tenant id (it is in every key, run
// token and console header) can make up keys of the right shape. The Worker must refuse them by
// their tag without asking the tenant's object (the object is counted here: its class is wrapped,
// as workerd's RPC refuses own properties); keys issued before tags go through a failure limiter.
import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN, api, newTenant } from "../support/api.ts";

const as = (key: string) => ({ Authorization: `Bearer ${key}` });
const tenantObject = (tenantId: string) =>
  (env as any).TENANTS.get((env as any).TENANTS.idFromName(tenantId));
const random = (length: number, alphabet: string) =>
  Array.from(
    crypto.getRandomValues(new Uint8Array(length)),
    (b) => alphabet[b % alphabet.length],
  ).join("");
const ULID = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** A made-up key for `tenantId`, shaped exactly like `like` (an issued key): same parts, same lengths. */
function forge(like: string, tenantId: string): string {
  const [prefix, , , ...rest] = like.split(".");
  return [
    prefix,
    tenantId,
    `key_${random(26, ULID)}`,
    ...rest.map((p) => random(p.length, B64URL)),
  ].join(".");
}

/** Counts the RPCs the tenant's object serves (verifyKey, keyInfo) until restored. */
const restore: Array<() => void> = [];
afterEach(() => restore.splice(0).forEach((undo) => undo()));
async function countCalls(tenantId: string) {
  const calls = { verifyKey: 0, keyInfo: 0 };
  const [proto, self] = await runInDurableObject(tenantObject(tenantId), (instance: object) => [
    Object.getPrototypeOf(instance),
    instance,
  ]);
  for (const method of ["verifyKey", "keyInfo"] as const) {
    const original = proto[method];
    proto[method] = function (this: object, ...args: unknown[]) {
      if (this === self) calls[method]++;
      return original.apply(this, args);
    };
    restore.push(() => void (proto[method] = original));
  }
  return calls;
}

async function consoleSignIn(key: string) {
  const fetcher = (exports as unknown as { default: Fetcher }).default;
  const form = await fetcher.fetch("http://toolgate.test/console/sign-in");
  const html = await form.text();
  const login = form.headers.getSetCookie().find((c) => c.startsWith("tg_console_login="))!;
  const csrf = /name="csrf" value="([^"]*)"/.exec(html)![1]!;
  const response = await fetcher.fetch("http://toolgate.test/console/sign-in", {
    method: "POST",
    headers: {
      "Content-Type": "application/x-www-form-urlencoded",
      Cookie: login.split(";")[0]!,
    },
    body: new URLSearchParams({ csrf, next: "/console", api_key: key }).toString(),
    redirect: "manual",
  });
  return { status: response.status, text: await response.text() };
}

describe("API keys are checked at the edge", () => {
  it("a made-up key shaped like an issued one gets 401 and the tenant's object is never asked; a real key still works", async () => {
    const t = await newTenant(["tools:write"]);
    const calls = await countCalls(t.tenantId);
    for (let i = 0; i < 5; i++) {
      const forged = await api("GET", "/v1/tools", undefined, as(forge(t.key, t.tenantId)));
      expect(forged).toMatchObject({ status: 401, body: { code: "unauthorized" } });
    }
    const signIn = await consoleSignIn(forge(t.key, t.tenantId));
    expect(signIn.status).toBe(401);
    expect(signIn.text).toContain("That API key is not valid");
    expect(calls).toEqual({ verifyKey: 0, keyInfo: 0 });

    // The real key: one question to the object (the counter works), and an answer.
    expect((await api("GET", "/v1/tools", undefined, as(t.key))).status).toBe(200);
    expect(calls.verifyKey).toBe(1);
    expect((await consoleSignIn(t.key)).status).toBe(303);
    expect(calls.verifyKey).toBe(2);
  });

  it("a real key whose tag is altered, or moved to another key id or tenant, is refused without asking the object", async () => {
    const t = await newTenant(["tools:write"]);
    const other = await newTenant(["tools:write"]);
    const calls = await countCalls(t.tenantId);
    const [prefix, tenant, keyId, secret, tag] = t.key.split(".") as string[];
    const flipped = `${tag!.slice(0, -1)}${tag!.endsWith("A") ? "B" : "A"}`;
    const otherTag = other.key.split(".")[4]!;
    for (const key of [
      [prefix, tenant, keyId, secret, flipped].join("."),
      [prefix, tenant, keyId, secret, otherTag].join("."),
      [prefix, tenant, `key_${random(26, ULID)}`, secret, tag].join("."),
      `${t.key}.extra`,
    ]) {
      const refused = await api("GET", "/v1/tools", undefined, as(key));
      expect(refused).toMatchObject({ status: 401, body: { code: "unauthorized" } });
    }
    expect(calls.verifyKey).toBe(0);
    // The genuine tag with a wrong secret reaches the object, which refuses it.
    const wrongSecret = [prefix, tenant, keyId, "not-the-secret", tag].join(".");
    expect((await api("GET", "/v1/tools", undefined, as(wrongSecret))).status).toBe(401);
    expect(calls.verifyKey).toBe(1);
    expect((await api("GET", "/v1/tools", undefined, as(t.key))).status).toBe(200);
  });

  it("keys issued before tags: checked by the object, but made-up ones are rationed per tenant and isolate; a known real one keeps working", async () => {
    const t = await newTenant(["tools:write"]);
    // A key as it was issued before tags: the tenant object's part of today's key.
    const legacy = t.key.split(".").slice(0, 4).join(".");
    const second = await api(
      "POST",
      `/v1/admin/tenants/${t.tenantId}/keys`,
      { name: "second", scopes: ["tools:write"] },
      as(ADMIN),
    );
    const legacySecond = (second.body.key as string).split(".").slice(0, 4).join(".");
    expect((await api("GET", "/v1/tools", undefined, as(legacy))).status).toBe(200);

    const calls = await countCalls(t.tenantId);
    const forged = () => forge(legacy, t.tenantId);
    for (let i = 0; i < 10; i++)
      expect((await api("GET", "/v1/tools", undefined, as(forged()))).status).toBe(401);
    expect(calls.verifyKey).toBe(10);
    for (let i = 0; i < 20; i++) {
      const refused = await api("GET", "/v1/tools", undefined, as(forged()));
      expect(refused).toMatchObject({ status: 401, body: { code: "api_key_outdated" } });
      expect(refused.body.detail).toMatch(/issue a new key/);
    }
    expect(calls.verifyKey).toBe(10);

    // The old key already seen to verify here still works (and is still checked for revocation).
    expect((await api("GET", "/v1/tools", undefined, as(legacy))).status).toBe(200);
    expect(calls.verifyKey).toBe(11);
    // An old key not seen here yet waits out the minute: the cost of keeping old keys (reissue them).
    expect((await api("GET", "/v1/tools", undefined, as(legacySecond))).body.code).toBe(
      "api_key_outdated",
    );
    // Keys with a tag are not affected by the limiter.
    expect((await api("GET", "/v1/tools", undefined, as(second.body.key))).status).toBe(200);
    expect((await api("GET", "/v1/tools", undefined, as(t.key))).status).toBe(200);
    expect(calls.verifyKey).toBe(13);

    const revoke = await api(
      "DELETE",
      `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`,
      undefined,
      as(ADMIN),
    );
    expect(revoke.status).toBe(204);
    expect((await api("GET", "/v1/tools", undefined, as(legacy))).status).toBe(401);
  });
});

describe("a key's stored scopes are decoded, failing closed", () => {
  it("a stored scope that is not an ApiScope makes the key no key at all (API and console), never a wider one", async () => {
    const t = await newTenant(["tools:write"]);
    const other = await newTenant(["tools:write"]);
    // A corrupt or downgraded row: a scope this version does not know beside one it does.
    const storeScopes = (scopes: string) =>
      runInDurableObject(tenantObject(t.tenantId), (_i: unknown, state: DurableObjectState) => {
        state.storage.sql.exec("UPDATE api_keys SET scopes = ? WHERE id = ?", scopes, t.keyId);
      });
    await storeScopes(JSON.stringify(["tools:write", "admin:*"]));
    expect(await api("GET", "/v1/tools", undefined, as(t.key))).toMatchObject({ status: 401 });
    expect(await api("GET", "/v1/webhooks", undefined, as(t.key))).toMatchObject({ status: 401 });
    expect((await consoleSignIn(t.key)).status).not.toBe(303);
    // Not JSON at all: the same.
    await storeScopes("{");
    expect(await api("GET", "/v1/tools", undefined, as(t.key))).toMatchObject({ status: 401 });
    // Another tenant's sound key is untouched.
    expect((await api("GET", "/v1/tools", undefined, as(other.key))).status).toBe(200);
  });
});
