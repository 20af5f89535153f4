// npm run verify-receipts -- <bundle.json> --jwks <jwks.json>: checks toolgate receipts offline,
// with public data only (scripts/lib/receipts.mjs): each signature by a key of the tenant's JWKS
// within its window, each hash, each operation's chain. Exit 0 every receipt verifies, 1 one is
// broken (one line per problem), 2 could not run (a missing or unreadable file, a bad JWKS).
import { readFileSync } from "node:fs";
import { CliError, EXIT, runCli } from "./lib/cli.mjs";
import { receiptsOf, verifyReceipts } from "./lib/receipts.mjs";

const USAGE = "usage: npm run verify-receipts -- <bundle.json> --jwks <jwks.json>";

/** The command line: one bundle file and --jwks; anything else is a CliError naming it. */
function parseArgs(argv) {
  let bundle = null;
  let jwks = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--jwks") {
      jwks = argv[++i] ?? null;
      if (!jwks) throw new CliError(`--jwks needs a file; ${USAGE}`);
    } else if (arg.startsWith("--")) throw new CliError(`unknown option ${arg}; ${USAGE}`);
    else if (bundle) throw new CliError(`one bundle file at a time; ${USAGE}`);
    else bundle = arg;
  }
  if (!bundle || !jwks) throw new CliError(`a bundle file and --jwks are required; ${USAGE}`);
  return { bundle, jwks };
}

function readJson(path) {
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${path} (${error.code ?? error.message})`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(`${path} is not JSON`);
  }
}

await runCli("verify-receipts", async () => {
  const options = parseArgs(process.argv.slice(2));
  const document = readJson(options.bundle);
  const jwks = readJson(options.jwks);
  const { receipts } = receiptsOf(document);
  const problems = await verifyReceipts(document, jwks);
  for (const p of problems)
    console.log(`✗ receipt ${p.index} (${p.operation_id ?? "no operation"}): ${p.reason}`);
  if (problems.length > 0) return EXIT.broken;
  const operations = new Set(receipts.map((r) => r.payload.operation_id)).size;
  const count = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
  console.log(`✓ ${count(receipts.length, "receipt")} (${count(operations, "operation")}) verify`);
  return EXIT.ok;
});
