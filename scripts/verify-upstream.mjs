// npm run verify-upstream -- <manifest.json> --arguments '{…}': does this API really deduplicate
// by its idempotency header? Against a running toolgate (TOOLGATE_URL, TOOLGATE_API_KEY): registers
// the manifest (a verdict belongs to a registered tool's settings; an identical re-PUT keeps it),
// calls POST /v1/tools/{name}/verify and prints the checks as a table. Exit 0 when every check
// passed (verified, or verified_sandbox_only with --base-url), 1 failed, 2 could not run (bad
// input, a missing file, toolgate unreachable or refusing: one line says why; nothing verified).
import { readFileSync } from "node:fs";
import { baseUrl, CliError, EXIT, runCli, toolgateCall } from "./lib/cli.mjs";
import { formatTable, parseArgs, pickManifest } from "./lib/verify-table.mjs";

await runCli("verify-upstream", async () => {
  const options = parseArgs(process.argv.slice(2));
  if (options.error) {
    // The reason, then the usage: the only multi-line refusal.
    console.error(`verify-upstream: ${options.error}`);
    return EXIT.couldNotRun;
  }
  const base = baseUrl(process.env.TOOLGATE_URL || "http://127.0.0.1:8787", "TOOLGATE_URL");
  const key = process.env.TOOLGATE_API_KEY;
  if (!key) throw new CliError("TOOLGATE_API_KEY is not set (a tenant API key with tools:write)");
  let text;
  try {
    text = readFileSync(options.manifest, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${options.manifest} (${error.code ?? error.message})`);
  }
  const upstreamUrl = baseUrl(
    options.upstreamUrl ?? `http://127.0.0.1:${process.env.UPSTREAM_PORT || 8788}`,
    "--upstream-url",
  );
  const manifest = pickManifest(text, options.manifest, { tool: options.tool, upstreamUrl });

  const name = encodeURIComponent(manifest.name);
  await toolgateCall(base, "PUT", `/v1/tools/${name}`, key, manifest);
  const verified = await toolgateCall(base, "POST", `/v1/tools/${name}/verify`, key, {
    arguments: options.arguments,
    context: options.context,
    ...(options.baseUrl ? { base_url: options.baseUrl } : {}),
  });
  console.log(formatTable(verified.name, verified.verification, process.stdout.columns ?? 100));
  console.log(`\nevidence (every request sent and answer received): GET ${base}/v1/tools/${name}`);
  // Every check passed: 0, also against a sandbox (the summary line says runs do not count that one).
  return ["verified", "verified_sandbox_only"].includes(verified.verification.status)
    ? EXIT.ok
    : EXIT.broken;
});
