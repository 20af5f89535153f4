// The HTTP contract: authentication, typed problem+json errors for bad input (which change
// nothing), manifest validation, bound arguments, secrets that never leak, and the tool registry.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/http/app.ts";
import { ROUTES } from "../../src/http/openapi.ts";
import { api, manifest, setup, trace, turn, unique, upstream } from "../support/api.ts";

const fetchRaw = (path: string, init: RequestInit) =>
  (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`http://toolgate.test${path}`, init),
  );

describe("authentication", () => {
  it("401 without a token and with a wrong one, as problem+json", async () => {
    const none = await fetchRaw("/v1/tools", {});
    expect(none.status).toBe(401);
    expect(none.headers.get("Content-Type")).toBe("application/problem+json");
    expect(((await none.json()) as { code: string }).code).toBe("unauthorized");
    const wrong = await api("GET", "/v1/tools", undefined, { Authorization: "Bearer nope" });
    expect(wrong.status).toBe(401);
  });

  it("a run token drives its own run only, and cannot administer", async () => {
    const up = upstream();
    const a = await setup(manifest({ url: up.url }));
    const b = await setup(manifest({ url: up.url }));
    const own = await api(
      "POST",
      `/v1/runs/${a.runId}/turns`,
      { calls: [{ id: "c1", name: a.name, arguments: { amount: 1, currency: "usd" } }] },
      { Authorization: `Bearer ${a.runToken}` },
    );
    expect(own.status).toBe(200);
    const other = await api(
      "POST",
      `/v1/runs/${b.runId}/turns`,
      { calls: [{ id: "c1", name: b.name, arguments: { amount: 1, currency: "usd" } }] },
      { Authorization: `Bearer ${a.runToken}` },
    );
    expect(other.status).toBe(404);
    const admin = await api("GET", "/v1/tools", undefined, {
      Authorization: `Bearer ${a.runToken}`,
    });
    expect(admin.status).toBe(403);
    const forged = await api("GET", `/v1/runs/${a.runId}`, undefined, {
      Authorization: `Bearer ${a.runToken.slice(0, -2)}xx`,
    });
    expect(forged.status).toBe(401);
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("bad input changes nothing", () => {
  it("rejects malformed turns with stable codes and no upstream request", async () => {
    const up = upstream();
    const { runId, name } = await setup(manifest({ url: up.url }));
    const path = `/v1/runs/${runId}/turns`;
    const call = { id: "c1", name, arguments: { amount: 1, currency: "usd" } };
    const cases: Array<[string, Awaited<ReturnType<typeof api>>, number, string]> = [
      ["malformed JSON", await api("POST", path, "{nope"), 400, "invalid_json"],
      [
        "wrong content type",
        await api("POST", path, JSON.stringify({ calls: [call] }), {
          "Content-Type": "text/plain",
        }),
        415,
        "unsupported_media_type",
      ],
      [
        "duplicate call ids",
        await api("POST", path, { calls: [call, call] }),
        400,
        "invalid_request",
      ],
      [
        "too many calls",
        await api("POST", path, {
          calls: Array.from({ length: 65 }, (_, i) => ({ ...call, id: `c${i}` })),
        }),
        400,
        "invalid_request",
      ],
      ["no calls", await api("POST", path, { calls: [] }), 400, "invalid_request"],
      [
        "unknown format",
        await api("POST", `${path}?format=smoke-signals`, { calls: [call] }),
        400,
        "invalid_request",
      ],
      [
        "oversized arguments",
        await api("POST", path, { calls: [{ ...call, arguments: { pad: "x".repeat(40_000) } }] }),
        400,
        "invalid_request",
      ],
      [
        "oversized body",
        await api("POST", path, { calls: [{ ...call, arguments: { pad: "x".repeat(300_000) } }] }),
        413,
        "payload_too_large",
      ],
      [
        "unknown run",
        await api("POST", "/v1/runs/run_01M8WCZ1504KEP70F8BRJDTEY0/turns", { calls: [call] }),
        404,
        "not_found",
      ],
      [
        "malformed run id",
        await api("POST", "/v1/runs/../turns", { calls: [call] }),
        404,
        "not_found",
      ],
    ];
    for (const [what, res, status, code] of cases) {
      expect({ what, status: res.status, code: res.body?.code }).toEqual({ what, status, code });
    }
    expect((await up.state()).requests).toHaveLength(0);
    expect((await api("GET", `/v1/runs/${runId}`)).body.usage).toEqual({
      turns: 0,
      tool_calls: 0,
      cost: 0,
    });
  });

  it("validates manifests: bad schema, placeholders in the host, hosts off the allow-list", async () => {
    const up = upstream();
    const bad = await api("PUT", "/v1/tools/broken", { name: "broken", description: "x" });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe("invalid_manifest");
    const hostTemplate = manifest({ url: "http://{host}.example.com" });
    expect((await api("PUT", `/v1/tools/${hostTemplate.name}`, hostTemplate)).body.code).toBe(
      "invalid_manifest",
    );
    const offList = manifest({ url: "https://payments.example.com" });
    const off = await api("PUT", `/v1/tools/${offList.name}`, offList);
    expect(off.status).toBe(403);
    expect(off.body.code).toBe("upstream_not_allowed");
    const mismatch = manifest({ url: up.url });
    expect((await api("PUT", "/v1/tools/other_name", mismatch)).status).toBe(422);
    expect((await api("GET", `/v1/tools/${offList.name}`)).status).toBe(404);
  });
});

describe("tools and policy at the edge", () => {
  it("registers, lists, reads, replaces and deletes manifests", async () => {
    const up = upstream();
    const tool = manifest({ url: up.url });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const replaced = await api("PUT", `/v1/tools/${tool.name}`, { ...tool, description: "v2" });
    expect(replaced.status).toBe(200);
    expect(replaced.body.version).toBe(2);
    expect((await api("GET", `/v1/tools/${tool.name}`)).body.manifest.description).toBe("v2");
    expect(
      (await api("GET", "/v1/tools")).body.tools.map((t: { name: string }) => t.name),
    ).toContain(tool.name);
    expect((await api("DELETE", `/v1/tools/${tool.name}`)).status).toBe(204);
    expect((await api("GET", `/v1/tools/${tool.name}`)).status).toBe(404);
    expect((await api("POST", "/v1/runs", { user: { id: "u" }, tools: [tool.name] })).status).toBe(
      404,
    );
  });

  it("a tool name the tenant never registered is rejected/unknown_tool before any request", async () => {
    const up = upstream();
    const { runId } = await setup(manifest({ url: up.url }));
    const res = await turn(runId, [{ id: "c1", name: "delete_everything", arguments: {} }]);
    expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "unknown_tool" });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("bound arguments come from the run context; a model-supplied customer_id is refused and never reaches the upstream", async () => {
    const up = upstream();
    const tool = manifest({
      url: up.url,
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: {
          amount: { type: "integer" },
          currency: { enum: ["usd"] },
          customer_id: { type: "string" },
        },
        required: ["amount", "currency", "customer_id"],
      },
      bind: { customer_id: "context.customer_id" },
    });
    const { runId, name } = await setup(tool, { customer_id: "cus_real" });
    const attack = await turn(runId, [
      { id: "c1", name, arguments: { amount: 5, currency: "usd", customer_id: "cus_attacker" } },
    ]);
    expect(attack.body.results[0]).toMatchObject({ status: "rejected", code: "invalid_arguments" });
    expect(attack.body.results[0].message).toContain("customer_id");
    expect((await up.state()).requests).toHaveLength(0);
    const res = await turn(runId, [{ id: "c2", name, arguments: { amount: 5, currency: "usd" } }]);
    expect(res.body.results[0].status).toBe("succeeded");
    const state = await up.state();
    expect(state.requests.map((r) => r.body.customer_id)).toEqual(["cus_real"]);
    expect(JSON.stringify(await trace(runId))).not.toContain("cus_attacker");
  });

  it("a code tool (defineTool) runs through the same executor", async () => {
    const run = await api("POST", "/v1/runs", { user: { id: "u1" }, tools: ["create_shipment"] });
    expect(run.status).toBe(201);
    const res = await turn(run.body.run_id, [
      {
        id: unique("c"),
        name: "create_shipment",
        arguments: { order_id: unique("ord"), weight_kg: 1.25 },
      },
    ]);
    expect(res.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { weight_grams: 1250 },
    });
  });
});

describe("documentation", () => {
  it("serves an OpenAPI document generated from the request schemas, and a docs page", async () => {
    const doc = await fetchRaw("/openapi.json", {});
    expect(doc.status).toBe(200);
    const spec = (await doc.json()) as any;
    expect(spec.openapi).toBe("3.1.0");
    const createRun = spec.paths["/v1/runs"].post.requestBody.content["application/json"].schema;
    expect(createRun.required).toEqual(expect.arrayContaining(["user", "tools"]));
    expect(Object.keys(createRun.properties.budgets.properties)).toEqual([
      "max_turns",
      "max_tool_calls",
      "max_duration_ms",
      "max_cost",
    ]);
    expect(
      spec.paths["/v1/tools/{name}"].put.requestBody.content["application/json"].schema.properties
        .idempotency,
    ).toBeDefined();
    const docs = await fetchRaw("/docs", {});
    expect(docs.headers.get("Content-Type")).toMatch(/text\/html/);
    expect(await docs.text()).toContain("/v1/runs/{run_id}/turns");
  });

  it("documents every route the router serves, and serves every route it documents", () => {
    // The router's own table (Hono's app.routes), in OpenAPI's spelling. Middleware is registered
    // as ALL on a wildcard; the console is pages for people, not the API. /mcp is one ALL handler
    // (Streamable HTTP), documented as its POST.
    const served = new Set(
      app.routes
        .filter((r) => !r.path.endsWith("*") && !r.path.startsWith("/console"))
        .map(
          (r) => `${r.method === "ALL" ? "POST" : r.method} ${r.path.replace(/:(\w+)/g, "{$1}")}`,
        ),
    );
    const documented = new Set(ROUTES.map((r) => `${r.method.toUpperCase()} ${r.path}`));
    expect([...served].filter((route) => !documented.has(route))).toEqual([]);
    expect([...documented].filter((route) => !served.has(route))).toEqual([]);
    expect(documented.size).toBeGreaterThan(40);
  });
});
