// Security sweep (issue 11): the worst legal and illegal inputs an attacker or a confused client
// sends, each through the public HTTP API. Every one must get a typed problem+json and change
// nothing: no tool registered, no run created, no operation started, zero upstream requests.
import { describe, expect, it } from "vitest";
import { hmac } from "../../src/crypto.ts";
import { ADMIN, api, manifest, newTenant, unique, upstream } from "../support/api.ts";

/** Sends a raw JSON text (api() would re-serialize it and hide duplicates and escapes). */
async function raw(
  method: string,
  path: string,
  text: string,
  headers: Record<string, string> = {},
) {
  const { exports } = await import("cloudflare:workers");
  const tenantKey = headers.Authorization ?? `Bearer ${(await newTenantOnce()).key}`;
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`http://toolgate.test${path}`, {
      method,
      headers: { "Content-Type": "application/json", ...headers, Authorization: tenantKey },
      body: text,
    }),
  );
  return {
    status: response.status,
    body: (await response.json()) as any,
    headers: response.headers,
  };
}
let sweepTenant: ReturnType<typeof newTenant> | undefined;
const newTenantOnce = () =>
  (sweepTenant ??= newTenant([
    "runs:write",
    "runs:read",
    "tools:write",
    "secrets:write",
    "approvals:decide",
    "operations:resolve",
    "traces:read",
  ]));

/** A tool and a run in the sweep tenant; the upstream counts what reaches it. */
async function sweepRun() {
  const t = await newTenantOnce();
  const auth = { Authorization: `Bearer ${t.key}` };
  const up = upstream();
  const tool = manifest({
    url: up.url,
    input_schema: {
      type: "object",
      properties: { amount: { type: "integer" }, currency: { type: "string" }, note: {} },
      required: ["amount", "currency"],
    },
  });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    { user: { id: "u1", scopes: [] }, tools: [tool.name] },
    auth,
  );
  expect(run.status).toBe(201);
  const runId = run.body.run_id as string;
  const turnText = (args: string) =>
    `{"calls":[{"id":"${unique("call")}","name":"${tool.name}","arguments":${args}}]}`;
  const postTurn = (text: string, wait = 0) =>
    raw("POST", `/v1/runs/${runId}/turns?format=native`, text, { ...auth, Prefer: `wait=${wait}` });
  const usage = async () => (await api("GET", `/v1/runs/${runId}`, undefined, auth)).body.usage;
  return { t, auth, up, tool, runId, turnText, postTurn, usage };
}

const expectProblem = (
  res: { status: number; body: any; headers: Headers },
  status: number,
  code: string,
) => {
  expect(res.status).toBe(status);
  expect(res.headers.get("Content-Type")).toMatch(/^application\/problem\+json/);
  expect(res.body.code).toBe(code);
};

describe("hostile JSON bodies", () => {
  it.each([
    ["duplicate keys", `{"amount":1,"amount":900,"currency":"usd"}`, "duplicate key"],
    [
      "a duplicate key spelled with an escape",
      `{"amount":1,"\\u0061mount":900,"currency":"usd"}`,
      "duplicate key",
    ],
    ["a lone surrogate", `{"amount":1,"currency":"usd","note":"\\ud800"}`, "lone surrogate"],
    [
      "a __proto__ key",
      `{"amount":1,"currency":"usd","note":{"__proto__":{"polluted":true}}}`,
      "__proto__",
    ],
    [
      "nesting 10,000 deep",
      `{"amount":1,"currency":"usd","note":${"[".repeat(10_000)}${"]".repeat(10_000)}}`,
      "nested deeper",
    ],
  ])(
    "a turn whose arguments hold %s → 400 invalid_json, nothing runs, no budget used",
    async (_, args, detail) => {
      const { up, postTurn, turnText, usage } = await sweepRun();
      const before = await usage();
      const res = await postTurn(turnText(args));
      expectProblem(res, 400, "invalid_json");
      expect(res.body.detail).toContain(detail);
      expect((await up.state()).requests).toHaveLength(0);
      expect(await usage()).toEqual(before);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    },
  );

  it("the same duplicate-key and deep bodies are refused on every JSON route: tools, runs, secrets, decisions", async () => {
    const { auth, tool, runId } = await sweepRun();
    const dup = `{"name":"x","name":"y"}`;
    const deep = `${"[".repeat(100)}${"]".repeat(100)}`;
    const name = unique("tool");
    const toolText = JSON.stringify({ ...tool, name }).replace(
      '"risk":"write"',
      '"risk":"read","risk":"write"',
    );
    for (const [method, path, text] of [
      ["PUT", `/v1/tools/${name}`, toolText],
      ["PUT", `/v1/tools/${name}`, deep],
      ["POST", "/v1/runs", `{"user":{"id":"u1","id":"admin"},"tools":["${tool.name}"]}`],
      ["PATCH", `/v1/runs/${runId}`, `{"tools":["${tool.name}"],"tools":[]}`],
      ["PUT", "/v1/secrets/SWEEP_KEY", `{"value":"aaaaaaaaaa","value":"bbbbbbbbbb"}`],
    ] as const) {
      const res = await raw(method, path, text, auth);
      expectProblem(res, 400, "invalid_json");
    }
    expectProblem(
      await raw("POST", "/v1/admin/tenants", dup, { Authorization: `Bearer ${ADMIN}` }),
      400,
      "invalid_json",
    );
    expect((await api("GET", `/v1/tools/${name}`, undefined, auth)).status).toBe(404);
    expect((await api("GET", "/v1/secrets", undefined, auth)).body.secrets).not.toContainEqual(
      expect.objectContaining({ name: "SWEEP_KEY" }),
    );
    expect((await api("GET", `/v1/runs/${runId}`, undefined, auth)).body.status).toBe("active");
  });

  it("a body over the limit is 413 payload_too_large before it is parsed", async () => {
    const { postTurn, turnText, up } = await sweepRun();
    const res = await postTurn(
      turnText(`{"amount":1,"currency":"usd","note":"${"x".repeat(300_000)}"}`),
    );
    expectProblem(res, 413, "payload_too_large");
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("prototype-shaped keys that JSON allows stay plain data and pollute nothing", async () => {
    const { up, postTurn, turnText } = await sweepRun();
    const res = await postTurn(
      turnText(
        `{"amount":1,"currency":"usd","note":{"constructor":{"prototype":{"polluted":true}}}}`,
      ),
      5,
    );
    expect(res.status).toBe(200);
    expect(res.body.results[0].status).toBe("succeeded");
    expect((await up.state()).requests[0]!.body.note).toEqual({
      constructor: { prototype: { polluted: true } },
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("lookalike tool names", () => {
  it.each([
    ["Cyrillic а", "ch\u0430rge_card"],
    ["zero-width space", "charge\u200bcard"],
    ["right-to-left override", "charge\u202ecard"],
    ["fullwidth letters", "\uff43harge_card"],
  ])("a tool named with %s cannot be registered", async (_, name) => {
    const { auth, up } = await sweepRun();
    const res = await api(
      "PUT",
      `/v1/tools/${encodeURIComponent(name)}`,
      manifest({ url: up.url, name }),
      auth,
    );
    expectProblem(res, 422, "invalid_manifest");
  });

  it("a model calling a lookalike of a registered tool gets unknown_tool, never the real tool", async () => {
    const { runId, tool, up, auth } = await sweepRun();
    const lookalike = tool.name.replace("_", "\u200b_");
    const res = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      { calls: [{ id: "c_look", name: lookalike, arguments: { amount: 1, currency: "usd" } }] },
      auth,
    );
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "unknown_tool" });
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("tokens", () => {
  it("forged, tampered, expired and other-run tokens are refused on every run route; nothing runs", async () => {
    const a = await sweepRun();
    const b = await sweepRun();
    const tokenA = (
      await api(
        "POST",
        "/v1/runs",
        { user: { id: "u1", scopes: [] }, tools: [a.tool.name] },
        a.auth,
      )
    ).body;
    const [, tenant, run, expires] = (tokenA.run_token as string).split(".");
    const sign = async (payload: string) =>
      `rt.${payload}.${await hmac("test-signing-key", payload)}`;
    const expired = await sign(`${tenant}.${run}.${Date.now() - 1000}`);
    const tampered = `rt.${tenant}.${b.runId}.${expires}.${(tokenA.run_token as string).split(".")[4]}`;
    const wrongKey = `rt.${tenant}.${run}.${Date.now() + 60_000}.${await hmac("another-deployment-key", `${tenant}.${run}.${Date.now() + 60_000}`)}`;
    const body = {
      calls: [{ id: "c_tok", name: a.tool.name, arguments: { amount: 1, currency: "usd" } }],
    };
    for (const token of [expired, tampered, wrongKey, "rt.x.y.z", `${tokenA.run_token}x`]) {
      const res = await api("POST", `/v1/runs/${tokenA.run_id}/turns?format=native`, body, {
        Authorization: `Bearer ${token}`,
      });
      expectProblem(res, 401, "unauthorized");
    }
    // A valid token of run A opens nothing of run B, and no tenant-wide route.
    const own = { Authorization: `Bearer ${tokenA.run_token}` };
    for (const [method, path] of [
      ["POST", `/v1/runs/${b.runId}/turns?format=native`],
      ["GET", `/v1/runs/${b.runId}`],
      ["GET", `/v1/runs/${b.runId}/tools`],
    ] as const) {
      const res = await api(method, path, method === "POST" ? body : undefined, own);
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    for (const [method, path] of [
      ["POST", `/v1/runs/${b.runId}/cancel`],
      ["GET", `/v1/runs/${b.runId}/trace`],
      ["GET", "/v1/tools"],
      ["PUT", `/v1/tools/${a.tool.name}`],
      ["POST", "/v1/runs"],
      ["GET", "/v1/approvals"],
      ["GET", "/v1/secrets"],
      ["GET", "/v1/admin/tenants"],
    ] as const) {
      const res = await api(method, path, method === "GET" ? undefined : {}, own);
      expect([403, 404], `${method} ${path}`).toContain(res.status);
    }
    expect((await api("GET", `/v1/runs/${b.runId}`, undefined, b.auth)).body.status).toBe("active");
    expect((await a.up.state()).requests).toHaveLength(0);
    expect((await b.up.state()).requests).toHaveLength(0);
  });
});

describe("another tenant's ids", () => {
  it("every route answers 404 for another tenant's run, operation, tool and secret, and changes nothing", async () => {
    const owner = await newTenant([
      "runs:write",
      "runs:read",
      "tools:write",
      "secrets:write",
      "approvals:decide",
      "operations:resolve",
      "traces:read",
    ]);
    const ownerAuth = { Authorization: `Bearer ${owner.key}` };
    const up = upstream();
    const tool = manifest({ url: up.url, risk: "irreversible_write" });
    await api("PUT", `/v1/tools/${tool.name}`, tool, ownerAuth);
    await api("PUT", "/v1/secrets/OWNER_SECRET", { value: "sk_owner_secret_value" }, ownerAuth);
    const run = (
      await api(
        "POST",
        "/v1/runs",
        { user: { id: "u1", scopes: [] }, tools: [tool.name] },
        ownerAuth,
      )
    ).body;
    const waiting = await api(
      "POST",
      `/v1/runs/${run.run_id}/turns?format=native`,
      { calls: [{ id: "c_x", name: tool.name, arguments: { amount: 5, currency: "usd" } }] },
      { ...ownerAuth, Prefer: "wait=0" },
    );
    const op = waiting.body.results[0].operation_id as string;
    expect(waiting.body.results[0].status).toBe("awaiting_approval");

    const stranger = await newTenant([
      "runs:write",
      "runs:read",
      "tools:write",
      "secrets:write",
      "approvals:decide",
      "operations:resolve",
      "traces:read",
    ]);
    const auth = { Authorization: `Bearer ${stranger.key}` };
    const calls = {
      calls: [{ id: "c_y", name: tool.name, arguments: { amount: 5, currency: "usd" } }],
    };
    for (const [method, path, body] of [
      ["GET", `/v1/runs/${run.run_id}`, undefined],
      ["PATCH", `/v1/runs/${run.run_id}`, { tools: [tool.name] }],
      ["POST", `/v1/runs/${run.run_id}/turns?format=native`, calls],
      ["GET", `/v1/runs/${run.run_id}/turns/${waiting.body.turn_id}`, undefined],
      ["GET", `/v1/runs/${run.run_id}/tools`, undefined],
      ["GET", `/v1/runs/${run.run_id}/trace`, undefined],
      ["POST", `/v1/runs/${run.run_id}/cancel`, {}],
      ["GET", `/v1/operations/${op}`, undefined],
      ["POST", `/v1/operations/${op}/approve`, {}],
      ["POST", `/v1/operations/${op}/reject`, { reason: "mine now" }],
      ["POST", `/v1/operations/${op}/resolve`, { outcome: "failed", reason: "mine now" }],
      ["POST", `/v1/operations/${op}/cancel`, {}],
      ["GET", `/v1/tools/${tool.name}`, undefined],
      ["DELETE", `/v1/tools/${tool.name}`, undefined],
      ["DELETE", "/v1/secrets/OWNER_SECRET", undefined],
    ] as const) {
      const res = await api(method, path, body, auth);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.code, `${method} ${path}`).toBe("not_found");
    }
    // A run in the stranger's tenant cannot name the owner's tool either.
    expect(
      (await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: [tool.name] }, auth))
        .status,
    ).toBe(404);
    // The stranger's inbox and lists do not show the owner's operation.
    expect(JSON.stringify((await api("GET", "/v1/approvals", undefined, auth)).body)).not.toContain(
      op,
    );
    expect(
      JSON.stringify((await api("GET", "/v1/unknown-outcomes", undefined, auth)).body),
    ).not.toContain(op);

    // The owner's state is untouched: still waiting, the tool and secret still there, nothing sent.
    const view = await api("GET", `/v1/operations/${op}`, undefined, ownerAuth);
    expect(view.body.phase).toBe("awaiting_approval");
    expect((await api("GET", `/v1/tools/${tool.name}`, undefined, ownerAuth)).status).toBe(200);
    expect((await api("GET", "/v1/secrets", undefined, ownerAuth)).body.secrets).toContainEqual(
      expect.objectContaining({ name: "OWNER_SECRET" }),
    );
    expect((await api("GET", `/v1/runs/${run.run_id}`, undefined, ownerAuth)).body.status).toBe(
      "active",
    );
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("a hostile upstream answer", () => {
  it("a keyed write answered with 10,000-deep JSON is recorded failed/invalid_output that says it took effect; never a 500, never stuck", async () => {
    const { up, postTurn, turnText } = await sweepRun();
    await up.script({ kind: "deep", depth: 10_000 });
    const res = await postTurn(turnText(`{"amount":7,"currency":"usd"}`), 5);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: "failed", code: "invalid_output" });
    expect(res.body.results[0].message).toMatch(/nested deeper than 64/);
    expect(res.body.results[0].message).not.toMatch(/did not take effect|nothing was sent/);
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests).toHaveLength(1);
    const op = await api("GET", `/v1/operations/${res.body.results[0].operation_id}`, undefined, {
      Authorization: `Bearer ${(await newTenantOnce()).key}`,
    });
    expect(op.body.phase).toBe("recorded");
  });
});

describe("hostile schemas", () => {
  it("an input schema whose $ref loops on itself is refused at registration (it hung every turn in a stack overflow)", async () => {
    const { auth, up } = await sweepRun();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }] }, b: { allOf: [{ $ref: "#/$defs/a" }] } },
        properties: { x: { $ref: "#/$defs/a" } },
      },
    });
    const put = await api("PUT", `/v1/tools/${tool.name}`, tool, auth);
    expectProblem(put, 422, "invalid_manifest");
    expect(put.body.detail).toContain("never ends");
    const dangling = manifest({
      url: up.url,
      input_schema: { type: "object", properties: { x: { $ref: "https://evil.example/s.json" } } },
    });
    expect((await api("PUT", `/v1/tools/${dangling.name}`, dangling, auth)).body.detail).toContain(
      "does not resolve",
    );
    expect((await api("GET", `/v1/tools/${tool.name}`, undefined, auth)).status).toBe(404);
  });

  it("a recursive schema through properties is fine: exported in every format, enforced, bounded by the body depth", async () => {
    const { auth, up } = await sweepRun();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        $defs: {
          tree: {
            type: "object",
            properties: { child: { $ref: "#/$defs/tree" }, n: { type: "integer" } },
          },
        },
        properties: { t: { $ref: "#/$defs/tree" } },
        required: ["t"],
      },
    });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
    const run = await api(
      "POST",
      "/v1/runs",
      { user: { id: "u1", scopes: [] }, tools: [tool.name] },
      auth,
    );
    for (const format of ["anthropic", "openai-responses", "openai-chat", "mcp"])
      expect(
        (await api("GET", `/v1/runs/${run.body.run_id}/tools?format=${format}`, undefined, auth))
          .status,
      ).toBe(200);
    const call = (args: unknown, id: string) =>
      api(
        "POST",
        `/v1/runs/${run.body.run_id}/turns?format=native`,
        { calls: [{ id, name: tool.name, arguments: args }] },
        { ...auth, Prefer: "wait=5" },
      );
    const bad = await call({ t: { child: { child: { n: "not a number" } } } }, "c_bad");
    expect(bad.body.results[0]).toMatchObject({ status: "rejected", code: "invalid_arguments" });
    const good = await call({ t: { child: { child: { n: 3 } } } }, "c_good");
    expect(good.body.results[0].status).toBe("succeeded");
    expect((await up.state()).requests).toHaveLength(1);
  });
});
