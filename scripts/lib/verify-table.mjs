// The verify-upstream CLI's pure half: its command line, and a verdict (POST /v1/tools/{name}/verify)
// as a plain-text table, one row per check. No I/O, so it is unit-tested in Node.

const USAGE = `usage: npm run verify-upstream -- <manifest.json> --arguments '{…}' [--context '{…}'] [--base-url https://sandbox.example.com]
    [--tool <name>] [--upstream-url <url>]
  env: TOOLGATE_URL (default http://127.0.0.1:8787), TOOLGATE_API_KEY (a key with tools:write)
  Registers (or re-registers) the manifest with PUT /v1/tools/{name}, then verifies it.
  A file holding an array of manifests (demo/tools.json) needs --tool; {{UPSTREAM}} placeholders
  become --upstream-url (default http://127.0.0.1:8788, npm start's demo shop).
  exit: 0 every check passed; 1 a check failed; 2 could not run (nothing verified)`;

/** `argv` without node and the script. Returns the options or `{ error }` (with the usage). */
export function parseArgs(argv) {
  const options = {
    manifest: null,
    arguments: null,
    context: {},
    baseUrl: null,
    tool: null,
    upstreamUrl: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    const json = (name) => {
      const text = value();
      try {
        const parsed = JSON.parse(text);
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
          throw new Error();
        return parsed;
      } catch {
        throw new Error(`${name} must be a JSON object`);
      }
    };
    try {
      if (arg === "--arguments") options.arguments = json("--arguments");
      else if (arg === "--context") options.context = json("--context");
      else if (arg === "--base-url") options.baseUrl = value();
      else if (arg === "--tool") options.tool = value();
      else if (arg === "--upstream-url") options.upstreamUrl = value();
      else if (arg.startsWith("--")) throw new Error(`unknown option ${arg}`);
      else if (options.manifest === null) options.manifest = arg;
      else throw new Error(`unexpected argument ${arg}`);
    } catch (error) {
      return { error: `${error.message}\n${USAGE}` };
    }
  }
  if (options.manifest === null) return { error: `a manifest file is required\n${USAGE}` };
  if (options.arguments === null) return { error: `--arguments is required\n${USAGE}` };
  return options;
}

/** The demo's placeholders (demo/tools.json): the shop's URL and its origin (for the sandbox namespace). */
export function fillUpstream(text, upstreamUrl) {
  return text
    .replaceAll("{{UPSTREAM_ORIGIN}}", new URL(upstreamUrl).origin)
    .replaceAll("{{UPSTREAM}}", upstreamUrl);
}

/**
 * The manifest to verify from a file's `text`: one manifest, or the one named `tool` of an array
 * (demo/tools.json), placeholders filled with `upstreamUrl`. Throws a one-line Error otherwise.
 */
export function pickManifest(
  text,
  file,
  { tool = null, upstreamUrl = "http://127.0.0.1:8788" } = {},
) {
  let parsed;
  try {
    parsed = JSON.parse(fillUpstream(text, upstreamUrl));
  } catch (error) {
    throw new Error(`${file} is not JSON (${error.message.split("\n")[0]})`);
  }
  const named = (m) => m !== null && typeof m === "object" && typeof m.name === "string";
  if (Array.isArray(parsed)) {
    const names = parsed.filter(named).map((m) => m.name);
    if (tool === null)
      throw new Error(
        `${file} holds ${names.length} manifests: pick one with --tool (${names.join(", ")})`,
      );
    const found = parsed.find((m) => named(m) && m.name === tool);
    if (!found) throw new Error(`${file} has no tool ${tool} (it has ${names.join(", ")})`);
    return found;
  }
  if (!named(parsed)) throw new Error(`${file} is not a tool manifest (an object with a "name")`);
  if (tool !== null && parsed.name !== tool)
    throw new Error(`${file} is the manifest of ${parsed.name}, not ${tool}`);
  return parsed;
}

const MARK = { passed: "pass", failed: "FAIL", skipped: "skip" };

/**
 * The verdict as lines: a header, toolgate's summary of what it means for runs (when the answer
 * has one), then check | result | observed (wrapped to `width`).
 */
export function formatTable(name, verification, width = 100) {
  const rows = verification.checks.map((check) => [
    check.name,
    MARK[check.status] ?? check.status,
    check.observed,
  ]);
  const head = ["check", "result", "observed"];
  const w0 = Math.max(head[0].length, ...rows.map((r) => r[0].length));
  const w1 = Math.max(head[1].length, ...rows.map((r) => r[1].length));
  const w2 = Math.max(20, width - w0 - w1 - 6);
  const line = (cells) => {
    const wrapped = wrap(cells[2], w2);
    return wrapped.map(
      (text, i) =>
        `${(i === 0 ? cells[0] : "").padEnd(w0)} | ${(i === 0 ? cells[1] : "").padEnd(w1)} | ${text}`,
    );
  };
  const where = verification.base_url ? ` against ${verification.base_url}` : "";
  return [
    `${name}: ${verification.status}${where} (checked ${verification.checked_at ?? "never"})`,
    // toolgate's one answer to "is this tool verified?" (e.g. a sandbox verdict runs do not count).
    ...(verification.summary ? [verification.summary] : []),
    ...line(head),
    `${"-".repeat(w0)}-+-${"-".repeat(w1)}-+-${"-".repeat(w2)}`,
    ...rows.flatMap(line),
  ].join("\n");
}

function wrap(text, width) {
  const lines = [];
  let current = "";
  for (const word of text.split(" ")) {
    if (current && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else current = current ? `${current} ${word}` : word;
  }
  lines.push(current);
  return lines;
}
