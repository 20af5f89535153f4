// Security, from the attacker's side, through the public API, asserting on what the upstream
// actually received: tenant-owned write-only secrets (deployment bindings never resolvable, no
// cross-tenant reads, values never echoed), path-safe URLs, https for credentials, pinned ports,
// a gate that accepts exactly what the export shows, and no manifest field accepted and ignored.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  ALL_SCOPES,
  api,
  manifest,
  newTenant,
  pastFactsBound,
  unique,
  upstream,
} from "../support/api.ts";

afterEach(() => {
  vi.useRealTimers();
});

const bindings = env as unknown as Record<string, string>;
const DEPLOYMENT_SECRETS = ["TOOLGATE_ADMIN_TOKEN", "TOOLGATE_SIGNING_KEY", "TOOLGATE_SECRETS_KEY"];

/** A fresh tenant whose every response body is kept, so a test can prove a value never appeared. */
async function tenant() {
  const t = await newTenant(ALL_SCOPES);
  const seen: string[] = [];
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const res = await api(method, path, body, { Authorization: `Bearer ${t.key}`, ...headers });
    seen.push(JSON.stringify(res.body), JSON.stringify([...res.headers]));
    return res;
  };
  const setup = async (tool: Record<string, unknown>, context: Record<string, unknown> = {}) => {
    const put = await call("PUT", `/v1/tools/${tool.name as string}`, tool);
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const run = await call("POST", "/v1/runs", { user: { id: "u1" }, tools: [tool.name], context });
    expect(run.status).toBe(201);
    return run.body.run_id as string;
  };
  const post = (runId: string, calls: unknown[], format = "native") =>
    call(
      "POST",
      `/v1/runs/${runId}/turns?format=${format}`,
      format === "native" ? { calls } : calls,
      { Prefer: "wait=5" },
    );
  return { ...t, seen, call, setup, post };
}

const withSecretHeader = (url: string, secret: string) =>
  manifest({
    url,
    request: {
      method: "POST",
      url: `${url}/charges`,
      headers: { Authorization: `Bearer {secret:${secret}}` },
    },
  });

describe("tenant secrets", () => {
  it("a manifest can name no deployment binding: refused at PUT, nothing ever sent", async () => {
    const t = await tenant();
    const up = upstream();
    for (const name of [
      ...DEPLOYMENT_SECRETS,
      "SHOP_API_KEY",
      "UPSTREAM_URL",
      "DEMO_UPSTREAM_URL",
    ]) {
      const tool = withSecretHeader(up.url, name);
      const res = await t.call("PUT", `/v1/tools/${tool.name}`, tool);
      expect(res.status, name).toBe(422);
      expect(res.body.code, name).toBe("unknown_secret");
      expect(res.body.detail).toContain(name);
    }
    // The deployment's names cannot even be registered as tenant secrets.
    for (const name of DEPLOYMENT_SECRETS) {
      const res = await t.call("PUT", `/v1/secrets/${name}`, { value: "attacker-chosen-value" });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("invalid_request");
    }
    expect((await up.state()).requests).toHaveLength(0);
    const everything = t.seen.join("\n");
    for (const name of [...DEPLOYMENT_SECRETS, "SHOP_API_KEY"])
      expect(everything).not.toContain(bindings[name]!);
  });

  it("each tenant resolves only its own secret of a name; values never appear in any response, trace or error", async () => {
    const a = await tenant();
    const b = await tenant();
    const c = await tenant();
    const valueA = `sk_a_${unique("v")}`;
    const valueB = `sk_b_${unique("v")}`;
    expect((await a.call("PUT", "/v1/secrets/SHOP_KEY", { value: valueA })).status).toBe(201);
    expect((await b.call("PUT", "/v1/secrets/SHOP_KEY", { value: valueB })).status).toBe(201);
    const up = upstream();
    const toolA = withSecretHeader(up.url, "SHOP_KEY");
    const toolB = { ...withSecretHeader(up.url, "SHOP_KEY"), name: unique("tool") };
    const runA = await a.setup(toolA);
    const runB = await b.setup(toolB);
    // C has no secret of that name: refused, whatever A and B hold.
    const refused = await c.call("PUT", `/v1/tools/${toolA.name}`, toolA);
    expect(refused.body.code).toBe("unknown_secret");

    expect(
      (
        await a.post(runA, [
          { id: "c1", name: toolA.name, arguments: { amount: 1, currency: "usd" } },
        ])
      ).body.results[0].status,
    ).toBe("succeeded");
    expect(
      (
        await b.post(runB, [
          { id: "c1", name: toolB.name, arguments: { amount: 1, currency: "usd" } },
        ])
      ).body.results[0].status,
    ).toBe("succeeded");
    // The upstream echoes the credential back, in an error and in a result: scrubbed both times.
    await up.script({ kind: "echo", status: 400 }, { kind: "echo", status: 200 });
    const echoedError = await a.post(runA, [
      { id: "c2", name: toolA.name, arguments: { amount: 2, currency: "usd" } },
    ]);
    expect(echoedError.body.results[0]).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
    expect(echoedError.body.results[0].message).toContain("[redacted]");
    const toolEcho = {
      ...withSecretHeader(up.url, "SHOP_KEY"),
      name: unique("tool"),
      output_schema: undefined,
    };
    const runEcho = await a.setup(toolEcho);
    const echoedResult = await a.post(runEcho, [
      { id: "c3", name: toolEcho.name, arguments: { amount: 3, currency: "usd" } },
    ]);
    expect(echoedResult.body.results[0].status).toBe("succeeded");
    expect(echoedResult.body.results[0].result.headers.authorization).toBe("Bearer [redacted]");

    const auth = (await up.state()).requests.map((r) => r.authorization);
    expect(auth).toEqual([
      `Bearer ${valueA}`,
      `Bearer ${valueB}`,
      `Bearer ${valueA}`,
      `Bearer ${valueA}`,
    ]);

    for (const t of [a, b]) {
      await t.call("GET", "/v1/secrets");
      await t.call("GET", "/v1/tools");
    }
    await a.call("GET", `/v1/runs/${runA}/trace`);
    await a.call("GET", `/v1/runs/${runEcho}/trace`);
    await a.call("GET", `/v1/operations/${echoedResult.body.results[0].operation_id}`);
    const everything = [...a.seen, ...b.seen, ...c.seen].join("\n");
    expect(everything).not.toContain(valueA);
    expect(everything).not.toContain(valueB);
    expect(everything).toContain("SHOP_KEY");
  });

  it("an upstream that echoes the credential across the 200-character snippet cut leaks no part of it, anywhere", async () => {
    const t = await tenant();
    const value = `QJ7w${unique("echo")}`;
    expect((await t.call("PUT", "/v1/secrets/ECHO_KEY", { value })).status).toBe(201);
    const up = upstream();
    const tool = withSecretHeader(up.url, "ECHO_KEY");
    const runId = await t.setup(tool);
    // "invalid key Bearer <secret>" with the secret starting at character 192: the old cut kept 8 of it.
    const prefix = `${"x".repeat(185 - "invalid key ".length)}invalid key `;
    await up.script({ kind: "echo", status: 400, header: "Authorization", prefix });
    const res = await t.post(runId, [
      { id: "c1", name: tool.name, arguments: { amount: 1, currency: "usd" } },
    ]);
    const result = res.body.results[0];
    expect(result).toMatchObject({ status: "rejected", code: "invalid_arguments" });
    expect(result.message).toContain("invalid key Bearer");
    // The upstream really got (and echoed) the credential, at character 192 of its answer.
    const sent = (await up.state()).requests;
    expect(sent.map((r) => r.authorization)).toEqual([`Bearer ${value}`]);
    expect(`${prefix}Bearer ${value}`.indexOf(value)).toBe(192);

    await t.call("GET", `/v1/operations/${result.operation_id}`);
    await t.call("GET", `/v1/runs/${runId}/trace`);
    await t.call("GET", `/v1/runs/${runId}/trace?format=otlp`);
    const everything = t.seen.join("\n");
    expect(everything).toContain("invalid key Bearer");
    const leaked = Array.from({ length: value.length - 3 }, (_, i) => value.slice(0, 4 + i)).filter(
      (fragment) => everything.includes(fragment),
    );
    expect(leaked).toEqual([]);
  });

  it("write-only: listing shows names, fingerprints and times; ciphertext at rest is not the value; PUT rotates; DELETE removes", async () => {
    const t = await tenant();
    const value = `sk_live_${unique("v")}`;
    const created = await t.call("PUT", "/v1/secrets/PAYMENTS", { value });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body).sort()).toEqual([
      "created_at",
      "fingerprint",
      "name",
      "updated_at",
    ]);
    const listed = await t.call("GET", "/v1/secrets");
    expect(listed.body.secrets).toEqual([created.body]);

    const stored: Array<{ ciphertext: string; iv: string }> = await (runInDurableObject as any)(
      (env as any).TENANTS.get((env as any).TENANTS.idFromName(t.tenantId)),
      (_instance: unknown, state: DurableObjectState) =>
        state.storage.sql
          .exec<{ ciphertext: string; iv: string }>("SELECT ciphertext, iv FROM secrets")
          .toArray(),
    );
    expect(stored).toHaveLength(1);
    for (const encoded of [
      stored[0]!.ciphertext,
      atob(stored[0]!.ciphertext.replace(/-/g, "+").replace(/_/g, "/")),
    ])
      expect(encoded).not.toContain(value);

    // Rotation: same name, new value, new fingerprint; once the run's tenant facts are past their
    // bound (issue 19: a new run sees it at once), the next attempt sends the new value.
    const up = upstream();
    const tool = withSecretHeader(up.url, "PAYMENTS");
    const runId = await t.setup(tool);
    await t.post(runId, [{ id: "c1", name: tool.name, arguments: { amount: 1, currency: "usd" } }]);
    const rotatedValue = `sk_live_${unique("rotated")}`;
    const rotated = await t.call("PUT", "/v1/secrets/PAYMENTS", { value: rotatedValue });
    expect(rotated.status).toBe(200);
    expect(rotated.body.fingerprint).not.toBe(created.body.fingerprint);
    expect(rotated.body.created_at).toBe(created.body.created_at);
    pastFactsBound();
    await t.post(runId, [{ id: "c2", name: tool.name, arguments: { amount: 2, currency: "usd" } }]);
    expect((await up.state()).requests.map((r) => r.authorization)).toEqual([
      `Bearer ${value}`,
      `Bearer ${rotatedValue}`,
    ]);

    // Deleting it leaves the tool registered; its next call fails typed, without sending anything.
    expect((await t.call("DELETE", "/v1/secrets/PAYMENTS")).status).toBe(204);
    expect((await t.call("GET", "/v1/secrets")).body.secrets).toEqual([]);
    expect((await t.call("DELETE", "/v1/secrets/PAYMENTS")).status).toBe(404);
    pastFactsBound();
    const after = await t.post(runId, [
      { id: "c3", name: tool.name, arguments: { amount: 3, currency: "usd" } },
    ]);
    expect(after.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(after.body.results[0].message).toContain("PAYMENTS");
    expect((await up.state()).requests).toHaveLength(2);
    expect(t.seen.join("\n")).not.toContain(value);
    expect(t.seen.join("\n")).not.toContain(rotatedValue);
  });

  it("bad secret requests are typed and change nothing; secrets:write is its own scope", async () => {
    const t = await tenant();
    expect((await t.call("PUT", "/v1/secrets/1BAD", { value: "long-enough-value" })).status).toBe(
      400,
    );
    expect(
      (await t.call("PUT", "/v1/secrets/HAS-DASH", { value: "long-enough-value" })).status,
    ).toBe(400);
    expect((await t.call("PUT", "/v1/secrets/SHORT", { value: "short" })).body.code).toBe(
      "invalid_request",
    );
    expect(
      (await t.call("PUT", "/v1/secrets/EXTRA", { value: "long-enough-value", note: "x" })).body
        .code,
    ).toBe("invalid_request");
    expect((await t.call("GET", "/v1/secrets")).body.secrets).toEqual([]);
    const narrow = await newTenant(["tools:write", "runs:write"]);
    const denied = await api(
      "PUT",
      "/v1/secrets/X_KEY",
      { value: "long-enough-value" },
      { Authorization: `Bearer ${narrow.key}` },
    );
    expect(denied).toMatchObject({ status: 403, body: { code: "forbidden" } });
  });

  it("without TOOLGATE_SECRETS_KEY the tenant object answers misconfigured, never a fallback key", async () => {
    const t = await tenant();
    const stub: DurableObjectStub = (env as any).TENANTS.get(
      (env as any).TENANTS.idFromName(t.tenantId),
    );
    const result: any[] = await (runInDurableObject as any)(
      stub,
      async (instance: any): Promise<any[]> => {
        const saved = instance.env;
        instance.env = { ...saved, TOOLGATE_SECRETS_KEY: undefined };
        try {
          return [
            await instance.putSecret(t.tenantId, "NO_KEY", "some-long-value"),
            await instance.secretsFor(t.tenantId, ["NO_KEY"]),
          ];
        } finally {
          instance.env = saved;
        }
      },
    );
    expect(result.map((r: any) => r.error?.code)).toEqual(["misconfigured", "misconfigured"]);
    expect((await t.call("GET", "/v1/secrets")).body.secrets).toEqual([]);
  });
});

describe("transport", () => {
  const tool = (url: string, headers: Record<string, string> = {}) =>
    manifest({ url, request: { method: "POST", url: `${url}/charges`, headers } });

  it("secrets go only over https to non-loopback hosts; a pinned port is enforced, an unpinned entry means the default port", async () => {
    const t = await tenant();
    await t.call("PUT", "/v1/secrets/API_KEY", { value: "sk_transport_secret" });
    const put = (m: Record<string, unknown>) => t.call("PUT", `/v1/tools/${m.name as string}`, m);
    const plain = await put(
      tool("http://api.example.test", { Authorization: "Bearer {secret:API_KEY}" }),
    );
    expect(plain.status).toBe(422);
    expect(plain.body.detail).toContain("https");
    expect((await put(tool("http://api.example.test"))).status).toBe(201);
    expect(
      (await put(tool("https://api.example.test", { Authorization: "Bearer {secret:API_KEY}" })))
        .status,
    ).toBe(201);
    expect((await put(tool("https://pinned.example.test:8443"))).status).toBe(201);
    for (const url of [
      "https://pinned.example.test",
      "https://pinned.example.test:9443",
      "https://api.example.test:8443",
      "https://evil.example.test",
    ]) {
      const res = await put(tool(url));
      expect(res.body.code, url).toBe("upstream_not_allowed");
    }
    // A reconcile request is held to the same rules.
    const reconcile = {
      ...tool("https://api.example.test"),
      reconcile: {
        url: "http://api.example.test/lookup",
        headers: { Authorization: "{secret:API_KEY}" },
      },
    };
    expect((await put(reconcile)).status).toBe(422);
    // Secrets in a URL are refused outright (URLs end up in logs).
    const inUrl = manifest({
      url: "https://api.example.test",
      request: { method: "GET", url: "https://api.example.test/x?key={secret:API_KEY}" },
    });
    expect((await put(inUrl)).body.code).toBe("invalid_manifest");
  });
});

describe("path-safe URLs", () => {
  const readTool = (url: string) =>
    manifest({
      url,
      risk: "read",
      idempotency: { mode: "none" },
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          customer_id: { type: "string" },
          kind: { type: "string" },
          id: { type: "string" },
        },
        required: ["customer_id", "kind", "id"],
      },
      output_schema: undefined,
      bind: { customer_id: "context.customer_id" },
      request: { method: "GET", url: `${url}/customers/{customer_id}/{kind}/{id}` },
    });

  it("'..', '.' and '' in a path placeholder are refused naming the field; nothing is sent; %2e%2e stays encoded", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = readTool(up.url);
    const runId = await t.setup(tool, { customer_id: "cus_1" });
    const attacks = [
      { kind: "..", id: ".." },
      { kind: "orders", id: ".." },
      { kind: ".", id: "x" },
      { kind: "orders", id: "" },
    ];
    for (const [index, args] of attacks.entries()) {
      const res = await t.post(runId, [{ id: `a${index}`, name: tool.name, arguments: args }]);
      expect(res.body.results[0], JSON.stringify(args)).toMatchObject({
        status: "rejected",
        code: "invalid_arguments",
      });
      expect(res.body.results[0].message).toMatch(/kind|id/);
    }
    expect((await up.state()).requests).toHaveLength(0);
    const encoded = await t.post(runId, [
      { id: "ok1", name: tool.name, arguments: { kind: "%2e%2e", id: "a/../b" } },
    ]);
    expect(encoded.body.results[0].status).toBe("succeeded");
    const paths = (await up.state()).requests.map((r) => r.path);
    expect(paths).toEqual(["/customers/cus_1/%252e%252e/a%2F..%2Fb"]);
  });

  it("a reconcile URL is checked the same way, before anything is sent", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = manifest({
      url: up.url,
      idempotency: { mode: "none" },
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { ref: { type: "string" }, amount: { type: "integer" } },
        required: ["ref", "amount"],
      },
      request: { method: "POST", url: `${up.url}/charges` },
      reconcile: { url: `${up.url}/effects/{ref}` },
    });
    const runId = await t.setup(tool);
    const res = await t.post(runId, [
      { id: "c1", name: tool.name, arguments: { ref: "..", amount: 1 } },
    ]);
    expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "invalid_arguments" });
    expect(res.body.results[0].message).toContain("ref");
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("the gate accepts exactly what the export describes", () => {
  const schema = {
    type: "object",
    properties: {
      amount: { type: "integer" },
      note: { type: "string" },
      address: {
        type: "object",
        properties: { city: { type: "string" }, zip: { type: "string" } },
        required: ["city"],
      },
    },
    required: ["amount", "address"],
  };

  it("an undeclared field is refused by name, even when the schema did not say additionalProperties: false", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = manifest({ url: up.url, input_schema: schema, output_schema: undefined });
    const runId = await t.setup(tool);
    const exported = await t.call("GET", `/v1/runs/${runId}/tools?format=openai-chat`);
    expect(exported.body.tools[0].function).toMatchObject({
      strict: true,
      parameters: { additionalProperties: false },
    });
    for (const [index, args] of [
      { amount: 1, address: { city: "Oslo" }, refund_to_account: "acct_evil" },
      { amount: 1, address: { city: "Oslo", country: "XX" } },
    ].entries()) {
      const res = await t.post(runId, [{ id: `x${index}`, name: tool.name, arguments: args }]);
      expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "invalid_arguments" });
      expect(res.body.results[0].message).toMatch(
        index === 0 ? /refund_to_account/ : /address\.country/,
      );
    }
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a schema that explicitly allows more keys accepts them and is exported non-strict", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: { ...schema, additionalProperties: true },
      output_schema: undefined,
    });
    const runId = await t.setup(tool);
    const exported = await t.call("GET", `/v1/runs/${runId}/tools?format=openai-chat`);
    expect(exported.body.tools[0].function.strict).toBe(false);
    const res = await t.post(runId, [
      { id: "c1", name: tool.name, arguments: { amount: 1, address: { city: "Oslo" }, tag: "x" } },
    ]);
    expect(res.body.results[0].status).toBe("succeeded");
    expect((await up.state()).requests[0]!.body).toEqual({
      amount: 1,
      address: { city: "Oslo" },
      tag: "x",
    });
  });

  it("a strict-mode null for an optional field (top level and nested) reads as absent in every format", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = manifest({ url: up.url, input_schema: schema, output_schema: undefined });
    const runId = await t.setup(tool);
    const exported = (await t.call("GET", `/v1/runs/${runId}/tools?format=anthropic`)).body.tools[0]
      .input_schema;
    expect(exported.properties.note).toEqual({ type: ["string", "null"] });
    expect(exported.properties.address.properties.zip).toEqual({ type: ["string", "null"] });
    const args = (amount: number) => ({ amount, note: null, address: { city: "Oslo", zip: null } });
    const bodies: Array<[string, unknown]> = [
      ["native", [{ id: "n1", name: tool.name, arguments: args(1) }]],
      [
        "anthropic",
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "toolu_1", name: tool.name, input: args(2) }],
        },
      ],
      [
        "openai-responses",
        {
          output: [
            {
              type: "function_call",
              id: "fc_1",
              call_id: "call_r",
              name: tool.name,
              arguments: JSON.stringify(args(3)),
            },
          ],
        },
      ],
      [
        "openai-chat",
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_c",
              type: "function",
              function: { name: tool.name, arguments: JSON.stringify(args(4)) },
            },
          ],
        },
      ],
    ];
    for (const [format, body] of bodies) {
      const res = await t.post(runId, body as unknown[], format);
      expect(res.status, `${format}: ${JSON.stringify(res.body)}`).toBe(200);
      expect(JSON.stringify(res.body.results), format).toContain("succeeded");
    }
    const received = (await up.state()).requests.map((r) => r.body);
    expect(received).toEqual([1, 2, 3, 4].map((amount) => ({ amount, address: { city: "Oslo" } })));
    // A null for a required field is still refused: only the export's own nullables read as absent.
    const required = await t.post(runId, [
      { id: "n2", name: tool.name, arguments: { amount: null, address: { city: "Oslo" } } },
    ]);
    expect(required.body.results[0]).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
  });

  it("nullable objects export as anyOf (the Anthropic SDK drops properties from a type array)", async () => {
    const t = await tenant();
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        properties: { amount: { type: "integer" }, shipping: schema.properties.address },
        required: ["amount"],
      },
      output_schema: undefined,
    });
    const runId = await t.setup(tool);
    const exported = (await t.call("GET", `/v1/runs/${runId}/tools?format=anthropic`)).body.tools[0]
      .input_schema;
    expect(exported.properties.shipping.anyOf).toEqual([
      expect.objectContaining({ type: "object", properties: expect.any(Object) }),
      { type: "null" },
    ]);
    const res = await t.post(runId, [
      { id: "c1", name: tool.name, arguments: { amount: 1, shipping: null } },
    ]);
    expect(res.body.results[0].status).toBe("succeeded");
    expect((await up.state()).requests[0]!.body).toEqual({ amount: 1 });
  });
});

describe("nothing accepted and ignored", () => {
  // `redact` is enforced now (issue 10); a pointer that is not RFC 6901 would hide nothing, so it is refused.
  it.each([["customer_id"], [""], ["/a~2b"]])(
    "redact %j → invalid_pointer, nothing registered",
    async (pointer) => {
      const t = await tenant();
      const tool = { ...manifest({ url: upstream().url }), redact: ["/amount", pointer] };
      const res = await t.call("PUT", `/v1/tools/${tool.name}`, tool);
      expect(res.status).toBe(422);
      expect(res.body.code).toBe("invalid_pointer");
      expect(res.body.detail).toContain(JSON.stringify(pointer));
      expect((await t.call("GET", `/v1/tools/${tool.name}`)).status).toBe(404);
    },
  );

  it("an unknown field is refused by name", async () => {
    const t = await tenant();
    const ok = {
      ...manifest({ url: upstream().url }),
      risk: "irreversible_write",
      approval: "never",
    };
    expect((await t.call("PUT", `/v1/tools/${ok.name}`, ok)).status).toBe(201);
    for (const extra of [
      { approvals: "always" },
      { retry: { min_delay_ms: 0, jitter: true } },
      { request: { method: "POST", url: "http://127.0.0.1:1/x", follow_redirects: true } },
    ]) {
      const tool = { ...manifest({ url: upstream().url }), ...extra };
      const res = await t.call("PUT", `/v1/tools/${tool.name}`, tool);
      expect(res.body.code, JSON.stringify(extra)).toBe("invalid_manifest");
      expect(res.body.detail).toMatch(/approvals|jitter|follow_redirects/);
    }
  });
});
