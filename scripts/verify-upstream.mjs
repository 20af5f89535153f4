// npm run verify-upstream -- <manifest.json> --arguments '{…}': does this API really deduplicate
// by its idempotency header? Against a running toolgate (TOOLGATE_URL, TOOLGATE_API_KEY): registers
// the manifest (a verdict belongs to a registered tool's settings; an identical re-PUT keeps it),
// calls POST /v1/tools/{name}/verify and prints the checks as a table. Exit 0 when every check
// passed (verified, or verified_sandbox_only with --base-url), 1 failed, 2 when toolgate refused
// the request (the problem+json is printed; nothing was verified).
import { readFileSync } from "node:fs";
import { formatTable, parseArgs } from "./lib/verify-table.mjs";

const options = parseArgs(process.argv.slice(2));
if (options.error) {
  console.error(options.error);
  process.exit(2);
}
const base = (process.env.TOOLGATE_URL ?? "http://127.0.0.1:8787").replace(/\/$/, "");
const key = process.env.TOOLGATE_API_KEY;
if (!key) {
  console.error("TOOLGATE_API_KEY is not set (a tenant API key with tools:write)");
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(options.manifest, "utf8"));

async function call(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    console.error(`${method} ${path} → HTTP ${res.status}\n${text}`);
    process.exit(2);
  }
  return JSON.parse(text);
}

const name = encodeURIComponent(manifest.name ?? "");
await call("PUT", `/v1/tools/${name}`, manifest);
const verified = await call("POST", `/v1/tools/${name}/verify`, {
  arguments: options.arguments,
  context: options.context,
  ...(options.baseUrl ? { base_url: options.baseUrl } : {}),
});
console.log(formatTable(verified.name, verified.verification, process.stdout.columns ?? 100));
console.log(`\nevidence (every request sent and answer received): GET ${base}/v1/tools/${name}`);
// Every check passed: 0, also against a sandbox (the summary line says runs do not count that one).
process.exit(["verified", "verified_sandbox_only"].includes(verified.verification.status) ? 0 : 1);
