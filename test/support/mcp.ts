// MCP over the public HTTP API (exports.default.fetch): JSON-RPC posts to /mcp in either era, the
// answer parsed whether it came as JSON or as one SSE stream, plus a run with a read, a write and
// an approval-gated write against the fault-injecting upstream.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { api, manifest, unique, upstream } from "./api.ts";

export const MODERN = "2026-07-28";
export const LEGACY = "2025-11-25";

/** The 2026-07-28 per-request envelope (`_meta`) a modern client sends with every request. */
export const envelope = {
  "io.modelcontextprotocol/protocolVersion": MODERN,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "toolgate-test", version: "1.0.0" },
};

let nextId = 1;
export type RpcReply = { status: number; headers: Headers; body: any; messages: any[] };

export async function mcpPost(
  token: string | null,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<RpcReply> {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request("http://toolgate.test/mcp", {
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      ...(signal ? { signal } : {}),
    }),
  );
  const text = await response.text();
  const type = response.headers.get("Content-Type") ?? "";
  const messages = type.startsWith("text/event-stream")
    ? text
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)))
    : text
      ? [JSON.parse(text)]
      : [];
  return { status: response.status, headers: response.headers, body: messages.at(-1), messages };
}

/** One JSON-RPC request in the 2025 era (stateless: no initialize needed) or the 2026 era. */
export function rpc(
  token: string,
  method: string,
  params: Record<string, unknown> = {},
  era: "legacy" | "modern" = "legacy",
  id: number | string = nextId++,
) {
  const modern = era === "modern";
  return mcpPost(
    token,
    {
      jsonrpc: "2.0",
      id,
      method,
      params: modern ? { ...params, _meta: envelope } : params,
    },
    modern
      ? {
          "MCP-Protocol-Version": MODERN,
          "Mcp-Method": method,
          ...(typeof params.name === "string" ? { "Mcp-Name": params.name } : {}),
        }
      : { "MCP-Protocol-Version": LEGACY },
  );
}

export const callTool = (
  token: string,
  name: string,
  args: Record<string, unknown>,
  era: "legacy" | "modern" = "legacy",
  id?: number | string,
) => rpc(token, "tools/call", { name, arguments: args }, era, id);

/** A run offering a read (lookup), a keyed write (charge, customer_id bound) and a refund that always asks a person. */
export async function mcpRun(overrides: { charge?: Record<string, unknown> } = {}) {
  const up = upstream();
  const lookup = manifest({
    url: up.url,
    name: unique("lookup"),
    description: "Look up one order.",
    risk: "read",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: { order_id: { type: "string" } },
      required: ["order_id"],
    },
    request: { method: "GET", url: `${up.url}/orders/{order_id}` },
    idempotency: { mode: "none" },
  });
  const charge = manifest({
    url: up.url,
    name: unique("charge"),
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
        customer_id: { type: "string" },
      },
      required: ["amount", "currency", "customer_id"],
    },
    bind: { customer_id: "context.customer_id" },
    ...overrides.charge,
  });
  const refund = manifest({
    url: up.url,
    name: unique("refund"),
    description: "Refund the customer.",
    risk: "irreversible_write",
    request: { method: "POST", url: `${up.url}/refunds` },
  });
  for (const tool of [lookup, charge, refund])
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [lookup.name, charge.name, refund.name],
    context: { customer_id: "cus_1" },
  });
  expect(run.status).toBe(201);
  return {
    up,
    runId: run.body.run_id as string,
    token: run.body.run_token as string,
    lookup: lookup.name as string,
    charge: charge.name as string,
    refund: refund.name as string,
  };
}

export const usage = async (runId: string) => (await api("GET", `/v1/runs/${runId}`)).body.usage;
