// npm run mcp:conformance: the official MCP conformance suite's server scenarios against /mcp under
// `wrangler dev` on loopback (ports 8960/8961), checked against the baseline of scenarios toolgate
// cannot serve (test/e2e/mcp-conformance-baseline.yaml, with reasons). Per-scenario results go to
// test-results/mcp-conformance/. Extra arguments go to `conformance server` (e.g. --scenario ping).
// test/e2e/mcp.test.ts runs the same suite in `npm test`.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import { DEV_VARS, registerDemo, ROOT, startWrangler } from "./lib/dev-server.mjs";
import { conformanceRun, runConformance, startMcpProxy } from "./lib/mcp-conformance.mjs";

const state = mkdtempSync(join(tmpdir(), "toolgate-mcp-conformance-"));
const output = join(ROOT, "test-results", "mcp-conformance");
mkdirSync(output, { recursive: true });
const upstream = await startUpstream();
const toolgate = await startWrangler({
  port: 8960,
  inspectorPort: 8961,
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: state,
  quiet: true,
  readyTimeoutMs: 180_000,
});
let code = 1;
try {
  const demo = await registerDemo(toolgate.url, upstream.url);
  const run = await conformanceRun(toolgate.url, demo.key, upstream.url);
  const proxy = await startMcpProxy(toolgate.url, run.run_token);
  try {
    ({ code } = await runConformance(`${proxy.url}/mcp`, output, process.argv.slice(2), true));
  } finally {
    await proxy.close();
  }
} finally {
  toolgate.stop();
  await upstream.close();
  rmSync(state, { recursive: true, force: true });
}
process.exit(code);
