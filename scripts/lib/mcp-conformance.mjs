// The official MCP conformance suite (@modelcontextprotocol/conformance, server scenarios) against
// a running toolgate: a run offering the demo tools plus the two fixture tools of the suite that an
// HTTP tool can honestly be (`test_simple_text`: a read; `test_error_handling`: a read whose
// upstream answers 404), and a loopback pass-through that adds that run's token (the suite sends
// none, and /mcp refuses a request without one). Host, Origin, body and streams pass unchanged,
// so the suite's DNS-rebinding probes meet toolgate's own guard. The pass-through binds 127.0.0.1
// on a port the OS picks. Scenarios toolgate cannot serve are listed, with reasons, in
// test/e2e/mcp-conformance-baseline.yaml; the suite's exit code checks against that baseline.
import { spawn } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import { call, createRun, demoTools, ROOT } from "./dev-server.mjs";

export const BASELINE = join(ROOT, "test", "e2e", "mcp-conformance-baseline.yaml");

const fixture = (name, description, url) => ({
  name,
  description,
  input_schema: { type: "object", additionalProperties: false, properties: {}, required: [] },
  risk: "read",
  request: { method: "GET", url },
  timeout_ms: 3000,
  max_attempts: 1,
});

/** Registers the fixture tools for the tenant of `key` and opens a run offering them with the demo tools. */
export async function conformanceRun(url, key, upstreamUrl) {
  const fixtures = [
    fixture("test_simple_text", "Returns a simple text result.", `${upstreamUrl}/conformance/text`),
    // The demo shop's status lookup answers 404 for an unknown key: a definite failure.
    fixture(
      "test_error_handling",
      "Always fails (the upstream answers 404).",
      `${upstreamUrl}/effects?idempotency_key=never-issued`,
    ),
  ];
  for (const tool of fixtures) await call(url, "PUT", `/v1/tools/${tool.name}`, key, tool);
  const names = [...demoTools(upstreamUrl).map((t) => t.name), ...fixtures.map((t) => t.name)];
  return createRun(url, key, names);
}

export async function startMcpProxy(targetUrl, runToken) {
  const target = new URL(targetUrl);
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${runToken}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Runs every active server scenario against `mcpUrl`; resolves with the exit code (0: every
 * failure is in the baseline and no baseline entry passes) and the suite's printed report.
 */
export function runConformance(mcpUrl, outputDir, extraArgs = [], print = false) {
  const cli = join(
    ROOT,
    "node_modules",
    "@modelcontextprotocol",
    "conformance",
    "dist",
    "index.js",
  );
  const args = ["server", "--url", mcpUrl, "-o", outputDir, "--expected-failures", BASELINE];
  const child = spawn(process.execPath, [cli, ...args, ...extraArgs], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let report = "";
  for (const stream of [child.stdout, child.stderr])
    stream.on("data", (chunk) => {
      report += chunk;
      if (print) process.stdout.write(chunk);
    });
  return new Promise((resolve) =>
    child.once("exit", (code) => resolve({ code: code ?? 1, report })),
  );
}
