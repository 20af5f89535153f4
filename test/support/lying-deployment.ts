// A fake "toolgate deployment" that answers the public API's shapes and keeps none of its
// promises, for proving the conformance suite (scripts/conformance.mjs) catches a broken
// deployment. It sends every posted call straight upstream under a fresh idempotency key (so
// duplicates and re-proposals each charge again), retries nothing and tells the model an attempt
// that timed out "did not take effect", ignores approvals and budgets, returns what the upstream
// echoed (credentials included), lists secrets with their values, and serves any tenant's ids.
// Test-only: nothing in src/ knows about it.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

type Manifest = {
  name: string;
  request: { method: string; url: string; headers?: Record<string, string> };
  timeout_ms?: number;
};
type Envelope = Record<string, unknown> & { status: string; operation_id: string };

export type LyingDeployment = { url: string; close(): Promise<void> };

export async function startLyingDeployment(port = 0): Promise<LyingDeployment> {
  const tools = new Map<string, Manifest>();
  const secrets = new Map<string, string>();
  const turns = new Map<string, { results: Envelope[] }>();
  const operations = new Map<string, Envelope>();

  async function execute(call: { id: string; name: string; arguments: unknown }) {
    const operation_id = `op_${randomUUID().replaceAll("-", "")}`;
    const tool = tools.get(call.name);
    if (!tool) return { status: "rejected", code: "unknown_tool", operation_id, message: "?" };
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      "Idempotency-Key": randomUUID(),
    };
    for (const [name, value] of Object.entries(tool.request.headers ?? {}))
      headers[name] = value.replace(/\{secret:([A-Za-z0-9_]+)\}/g, (_, s) => secrets.get(s) ?? "");
    try {
      const response = await fetch(tool.request.url, {
        method: tool.request.method,
        headers,
        body: JSON.stringify(call.arguments),
        signal: AbortSignal.timeout(tool.timeout_ms ?? 2000),
      });
      const body = await response.json().catch(() => null);
      const envelope = response.ok
        ? { status: "succeeded", operation_id, result: body }
        : {
            status: "rejected",
            code: "upstream_error",
            operation_id,
            message: JSON.stringify(body),
          };
      operations.set(operation_id, envelope);
      return envelope;
    } catch {
      const envelope = {
        status: "rejected",
        code: "timeout",
        operation_id,
        message: "The call did not take effect. You may try again.",
      };
      operations.set(operation_id, envelope);
      return envelope;
    }
  }

  async function route(method: string, path: string, body: any): Promise<[number, unknown]> {
    let m: RegExpExecArray | null;
    if (path === "/healthz") return [200, { ok: true }];
    if (method === "POST" && path === "/v1/admin/tenants")
      return [201, { tenant_id: `ten_${randomUUID()}`, name: body?.name }];
    if (method === "POST" && /^\/v1\/admin\/tenants\/[^/]+\/keys$/.test(path))
      return [201, { key_id: randomUUID(), key: `tgk_${randomUUID()}` }];
    if (method === "DELETE") return [204, null];
    if ((m = /^\/v1\/tools\/([^/]+)$/.exec(path)) && method === "PUT") {
      tools.set(m[1]!, body as Manifest);
      return [201, { name: m[1] }];
    }
    if (/^\/v1\/tools\/[^/]+\/verify$/.test(path)) return [200, { verification: { ok: true } }];
    if ((m = /^\/v1\/secrets\/([^/]+)$/.exec(path)) && method === "PUT") {
      secrets.set(m[1]!, body.value);
      return [201, { name: m[1] }];
    }
    if (path === "/v1/secrets")
      return [200, { secrets: [...secrets].map(([name, value]) => ({ name, value })) }];
    if (method === "POST" && path === "/v1/runs")
      return [201, { run_id: `run_${randomUUID()}`, run_token: `tgr_${randomUUID()}` }];
    if ((m = /^\/v1\/runs\/([^/]+)\/turns$/.exec(path)) && method === "POST") {
      const results = [];
      for (const call of body.calls) results.push(await execute(call));
      const turn_id = `turn_${randomUUID()}`;
      turns.set(turn_id, { results });
      return [200, { turn_id, results }];
    }
    if ((m = /^\/v1\/runs\/[^/]+\/turns\/([^/]+)$/.exec(path)))
      return [200, { turn_id: m[1], ...turns.get(m[1]!) }];
    if ((m = /^\/v1\/operations\/([^/]+)$/.exec(path))) {
      const result = operations.get(m[1]!);
      return [200, { operation_id: m[1], phase: "recorded", input_hash: "h", result }];
    }
    if (/^\/v1\/operations\/[^/]+\/(approve|reject)$/.test(path)) return [200, { ok: true }];
    if (/^\/v1\/runs\/[^/]+(\/trace|\/cancel)?$/.test(path)) return [200, { events: [] }];
    return [404, { code: "not_found" }];
  }

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url ?? "/", "http://liar.local");
    const [status, body] = await route(
      req.method ?? "GET",
      url.pathname,
      raw ? JSON.parse(raw) : null,
    );
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(status === 204 ? undefined : JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
