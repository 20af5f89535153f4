// npm run conformance -- --url https://toolgate.example.com --admin-token … : does this deployment
// keep toolgate's promise? A black-box suite through the public API only (scripts/lib/conformance/):
// it starts its own test upstream (demo/upstream.ts), creates a throw-away tenant with the admin
// token, checks each promise with evidence, cleans up, and exits non-zero if any promise is broken.
// The deployment must reach the upstream: on loopback for a local `wrangler dev`; for a deployed
// Worker, expose the upstream through a tunnel and pass its public URL as --upstream-url (and allow
// that host in TOOLGATE_UPSTREAM_ALLOWLIST).
import { startUpstream } from "../demo/upstream.ts";
import { formatResults, runConformance } from "./lib/conformance/suite.mjs";
import { CHECKS } from "./lib/conformance/checks.mjs";

const USAGE = `usage: npm run conformance -- --url <toolgate URL> --admin-token <token>
    [--upstream-url <public URL of the test upstream, e.g. a tunnel>] [--upstream-port <port>]
    [--only <check,check>] [--json]
  env: TOOLGATE_URL, TOOLGATE_ADMIN_TOKEN (instead of the flags)
  checks: ${CHECKS.map((c) => c.id).join(", ")}`;

function parse(argv) {
  const options = {
    url: process.env.TOOLGATE_URL ?? null,
    adminToken: process.env.TOOLGATE_ADMIN_TOKEN ?? null,
    upstreamUrl: null,
    upstreamPort: 0,
    only: null,
    json: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    if (arg === "--url") options.url = value();
    else if (arg === "--admin-token") options.adminToken = value();
    else if (arg === "--upstream-url") options.upstreamUrl = value().replace(/\/+$/, "");
    else if (arg === "--upstream-port") options.upstreamPort = Number(value());
    else if (arg === "--only") options.only = value().split(",");
    else if (arg === "--json") options.json = true;
    else if (arg === "--help" || arg === "-h") throw new Error("");
    else throw new Error(`unknown option ${arg}`);
  }
  if (!options.url || !options.adminToken) throw new Error("--url and --admin-token are required");
  const unknown = (options.only ?? []).filter((id) => !CHECKS.some((c) => c.id === id));
  if (unknown.length > 0) throw new Error(`unknown check: ${unknown.join(", ")}`);
  return options;
}

let options;
try {
  options = parse(process.argv.slice(2));
} catch (error) {
  console.error(`${error.message}\n${USAGE}`.trim());
  process.exit(2);
}

// Loopback unless a public URL is given: then listen on every interface for the tunnel.
const upstream = await startUpstream(
  options.upstreamPort,
  options.upstreamUrl ? "0.0.0.0" : "127.0.0.1",
);
const controlUrl = `http://127.0.0.1:${upstream.port}`;
let code = 1;
try {
  if (!options.json)
    console.log(
      `toolgate conformance: ${options.url} (test upstream ${options.upstreamUrl ?? upstream.url})\n`,
    );
  const { ok, results } = await runConformance({
    url: options.url,
    adminToken: options.adminToken,
    upstream: { controlUrl, publicUrl: options.upstreamUrl ?? upstream.url },
    only: options.only,
    onResult: options.json
      ? undefined
      : (r) => console.error(`${r.ok ? "pass" : "FAIL"} ${r.id} (${(r.ms / 1000).toFixed(1)} s)`),
  });
  if (options.json) console.log(JSON.stringify({ url: options.url, ok, results }, null, 2));
  else console.log(`\n${formatResults(results)}`);
  code = ok ? 0 : 1;
} catch (error) {
  console.error(`conformance could not run: ${error.message}`);
  code = 2;
} finally {
  await upstream.close();
}
process.exit(code);
