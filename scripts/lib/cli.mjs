// What every toolgate CLI (verify-upstream, conformance, reindex, soak) shares: one exit-code
// contract — 0 ok, 1 a promise broken (a check failed), 2 could not run (bad input, a missing file,
// toolgate unreachable or refusing) — and one line on stderr for a failure, never a stack trace.
// `main` throws `CliError` (or anything: a bug still ends as one line and exit 2).

export const EXIT = { ok: 0, broken: 1, couldNotRun: 2 };

/** A reason the command could not run, said in one line. */
export class CliError extends Error {}

/** Runs `main` (resolving to an exit code); any throw is one line on stderr and exit 2. */
export async function runCli(name, main) {
  let code;
  try {
    code = await main();
  } catch (error) {
    console.error(`${name}: ${oneLine(error)}`);
    code = EXIT.couldNotRun;
  }
  process.exit(code);
}

/**
 * For a script written as top-level statements (soak-kill): an uncaught error or rejection is
 * one line on stderr and exit 2, like `runCli`.
 */
export function oneLineErrors(name) {
  const fail = (error) => {
    console.error(`${name}: could not run: ${oneLine(error)}`);
    process.exit(EXIT.couldNotRun);
  };
  process.on("uncaughtException", fail);
  process.on("unhandledRejection", fail);
}

function oneLine(error) {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] || "failed";
}

/** A network failure in words: `fetch failed` hides the reason in `cause`. */
export function networkReason(error) {
  const cause = error?.cause;
  return cause?.code ?? cause?.message ?? error?.message ?? String(error);
}

/** A problem+json answer in one line: `code: detail`, or the body's first 200 characters. */
export function problemLine(status, text) {
  try {
    const problem = JSON.parse(text);
    if (problem?.code) return `${status} ${problem.code}: ${problem.detail ?? problem.title ?? ""}`;
  } catch {}
  return `${status} ${text.replace(/\s+/g, " ").slice(0, 200)}`;
}

/**
 * A JSON call to toolgate at `base` with a bearer `token`. Unreachable, or an answer that is not
 * 2xx: a `CliError` naming the request and toolgate's problem. Never follows a redirect (it
 * would carry the token elsewhere).
 */
export async function toolgateCall(base, method, path, token, body) {
  let res;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: "manual",
    });
  } catch (error) {
    throw new CliError(`toolgate at ${base} did not answer (${networkReason(error)})`);
  }
  const text = await res.text();
  if (!res.ok) throw new CliError(`${method} ${path} → ${problemLine(res.status, text)}`);
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    throw new CliError(`${method} ${path} → ${res.status} with a body that is not JSON`);
  }
}

/** A base URL from the environment or a flag: http(s), no trailing slash; else a CliError. */
export function baseUrl(value, name) {
  let parsed;
  try {
    parsed = new URL(value);
  } catch {
    throw new CliError(`${name} ${JSON.stringify(value)} is not a URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new CliError(`${name} must be an http or https URL, not ${parsed.protocol}`);
  return value.replace(/\/+$/, "");
}

/** A non-negative integer from the environment (`fallback` when unset or empty); else a CliError. */
export function envInteger(name, fallback) {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  if (!/^\d+$/.test(text))
    throw new CliError(`${name} must be a whole number, not ${JSON.stringify(text)}`);
  return Number(text);
}
