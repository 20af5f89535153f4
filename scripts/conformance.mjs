// TOOLGATE_ADMIN_TOKEN=… npm run conformance -- --url https://toolgate.example.com : does this
// deployment keep toolgate's promise? A black-box suite through the public API only
// (scripts/lib/conformance/): it starts its own test upstream (demo/upstream.ts), creates a
// throw-away tenant with the admin token, checks each promise with evidence, cleans up (reporting
// every step that failed and what stays behind), and exits non-zero if any promise is broken or
// the cleanup failed. The admin token is read from the environment only (on the command line it
// would be in `ps` and the shell's history), and goes only over https, or plain http to loopback.
// The deployment must reach the upstream: on loopback for a local `wrangler dev`; for a deployed
// Worker, expose the upstream through a tunnel and pass its public URL as --upstream-url (and allow
// that host in TOOLGATE_UPSTREAM_ALLOWLIST, for the run only).
import { startUpstream } from "../demo/upstream.ts";
import {
  exitCodeOf,
  formatCleanup,
  formatResults,
  runConformance,
} from "./lib/conformance/suite.mjs";
import { CHECKS } from "./lib/conformance/checks.mjs";
import { targetProblem } from "./lib/conformance/client.mjs";

const USAGE = `usage: TOOLGATE_ADMIN_TOKEN=… npm run conformance -- --url <toolgate URL>
    [--upstream-url <public URL of the test upstream, e.g. a tunnel>] [--upstream-port <port>]
    [--only <check,check>] [--json]
  env: TOOLGATE_ADMIN_TOKEN (required: never on the command line), TOOLGATE_URL (instead of --url)
  --url: https, or plain http to a loopback host only (the admin token must not cross a network in clear)
  exit: 0 every promise kept and cleaned up; 1 a promise broken; 2 could not run; 3 kept, but cleanup failed
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
    else if (arg === "--admin-token" || arg.startsWith("--admin-token="))
      throw new Error(
        "--admin-token is not accepted: set TOOLGATE_ADMIN_TOKEN in the environment instead (a token on the command line is visible in ps and kept in the shell's history; if you just typed it, consider rotating it)",
      );
    else if (arg === "--upstream-url") options.upstreamUrl = value().replace(/\/+$/, "");
    else if (arg === "--upstream-port") {
      const port = value();
      if (!/^\d+$/.test(port) || Number(port) > 65535)
        throw new Error(
          `--upstream-port must be a port number (0-65535), not ${JSON.stringify(port)}`,
        );
      options.upstreamPort = Number(port);
    } else if (arg === "--only") options.only = value().split(",");
    else if (arg === "--json") options.json = true;
    else if (arg === "--help" || arg === "-h") throw new Error("");
    else throw new Error(`unknown option ${arg}`);
  }
  if (!options.url || !options.adminToken)
    throw new Error("--url (or TOOLGATE_URL) and TOOLGATE_ADMIN_TOKEN are required");
  const refused = targetProblem(options.url);
  if (refused) throw new Error(refused);
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
let upstream;
try {
  upstream = await startUpstream(
    options.upstreamPort,
    options.upstreamUrl ? "0.0.0.0" : "127.0.0.1",
  );
} catch (error) {
  // e.g. --upstream-port already in use: one line, like every other refusal.
  console.error(
    `conformance could not run: the test upstream did not start (${error.code ?? error.message})`,
  );
  process.exit(2);
}
const controlUrl = `http://127.0.0.1:${upstream.port}`;
let code = 1;
try {
  if (!options.json)
    console.log(
      `toolgate conformance: ${options.url} (test upstream ${options.upstreamUrl ?? upstream.url})\n`,
    );
  const report = await runConformance({
    url: options.url,
    adminToken: options.adminToken,
    upstream: { controlUrl, publicUrl: options.upstreamUrl ?? upstream.url },
    only: options.only,
    onResult: options.json
      ? undefined
      : (r) => console.error(`${r.ok ? "pass" : "FAIL"} ${r.id} (${(r.ms / 1000).toFixed(1)} s)`),
  });
  const { ok, results, cleanup } = report;
  const leftovers = formatCleanup(cleanup, { upstreamUrl: options.upstreamUrl });
  if (options.json) {
    console.log(JSON.stringify({ url: options.url, ok, results, cleanup }, null, 2));
    // Said on stderr too: a CI job that keeps only the JSON still shows a person what is left.
    if (cleanup.failures.length > 0) console.error(leftovers);
  } else console.log(`\n${formatResults(results)}\n\n${leftovers}`);
  code = exitCodeOf(report);
} catch (error) {
  console.error(`conformance could not run: ${error.message}`);
  code = 2;
} finally {
  await upstream.close();
}
process.exit(code);
