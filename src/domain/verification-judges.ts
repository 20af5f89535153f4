// The verification judges: each turns the requests POST /v1/tools/{name}/verify sent (and what came
// back) into one named check with what it expected and what it observed, and verdictOf turns the
// checks into one verdict: verified only when every check ran and passed. changeOneArgument picks
// the argument the "changed body" check alters. Pure: the shell sends, scrubs and digests.
import type { Check, CheckName, Exchange, Received, Verification } from "./verification.ts";

const EXPECTED: Record<CheckName, string> = {
  first_send: "a fresh key K is accepted with a 2xx",
  same_key_replay: "K with the same body replays the first response (same status, same body)",
  changed_body_refused: "K with one argument changed is refused with a 4xx",
  concurrent_duplicate:
    "two concurrent sends with a fresh key make one effect (the other 409 or an identical replay)",
  lookup_finds_effect: "the status lookup for K answers 200 with a valid result",
  lookup_unknown_key: "the status lookup for a never-used key answers 404",
};

const is2xx = (r: Received) => r.kind === "response" && r.status >= 200 && r.status < 300;
const describe = (r: Received): string =>
  r.kind === "no_response" ? `no response (${r.detail})` : `HTTP ${r.status}`;
/** The `id` of a JSON object body, for evidence that names the effect ("eff_1"). */
const idOf = (r: Received): string | null =>
  r.kind === "response" &&
  typeof r.body === "object" &&
  r.body !== null &&
  typeof (r.body as { id?: unknown }).id === "string"
    ? ((r.body as { id: string }).id as string)
    : null;
const named = (r: Received) => (idOf(r) ? ` (id ${idOf(r)})` : "");
const sameResponse = (a: Received, b: Received) =>
  a.kind === "response" && b.kind === "response" && a.status === b.status && a.digest === b.digest;

function check(
  name: CheckName,
  passed: boolean | "skipped",
  observed: string,
  exchanges: Exchange[],
): Check {
  const status = passed === "skipped" ? "skipped" : passed ? "passed" : "failed";
  return { name, status, expected: EXPECTED[name], observed, exchanges };
}

/** The first send with K did not succeed: nothing else is sent, and nothing is proven. */
export const skippedCheck = (name: Exclude<CheckName, "first_send">): Check =>
  check(name, "skipped", "not tested: the first send with K did not succeed", []);

export function judgeFirstSend(first: Exchange): Check {
  return check(
    "first_send",
    is2xx(first.received),
    `${describe(first.received)}${named(first.received)}`,
    [first],
  );
}

export function judgeReplay(first: Exchange, again: Exchange): Check {
  if (sameResponse(first.received, again.received))
    return check(
      "same_key_replay",
      true,
      `${describe(again.received)}, identical body${named(again.received)}`,
      [again],
    );
  const sameStatus =
    again.received.kind === "response" &&
    first.received.kind === "response" &&
    again.received.status === first.received.status;
  const observed = sameStatus
    ? `${describe(again.received)} with a different body${named(again.received)} than the first${named(first.received)}: the key was not honoured, a second effect`
    : `${describe(again.received)} instead of the stored ${describe(first.received)}`;
  return check("same_key_replay", false, observed, [again]);
}

export function judgeChangedBody(field: string, changed: Exchange): Check {
  const r = changed.received;
  if (r.kind === "response" && r.status >= 400 && r.status < 500)
    return check("changed_body_refused", true, `${field} changed: refused, HTTP ${r.status}`, [
      changed,
    ]);
  const observed = is2xx(r)
    ? `${field} changed: accepted, ${describe(r)}${named(r)}; another request under a used key was answered with a success`
    : `${field} changed: ${describe(r)}, not a clear refusal`;
  return check("changed_body_refused", false, observed, [changed]);
}

export function judgeConcurrent(a: Exchange, b: Exchange): Check {
  const statuses = `${describe(a.received)} and ${describe(b.received)}`;
  const is409 = (r: Received) => r.kind === "response" && r.status === 409;
  if (is2xx(a.received) && is2xx(b.received)) {
    return sameResponse(a.received, b.received)
      ? check("concurrent_duplicate", true, `${statuses}, identical bodies${named(a.received)}`, [
          a,
          b,
        ])
      : check(
          "concurrent_duplicate",
          false,
          `${statuses} with different bodies${named(a.received)}${named(b.received)}: two effects for one key`,
          [a, b],
        );
  }
  if ((is2xx(a.received) && is409(b.received)) || (is409(a.received) && is2xx(b.received)))
    return check(
      "concurrent_duplicate",
      true,
      `${statuses}: one effect, one refused as in progress`,
      [a, b],
    );
  return check(
    "concurrent_duplicate",
    false,
    `${statuses}: expected one success and a 409 or an identical replay`,
    [a, b],
  );
}

export function judgeLookupFound(lookup: Exchange): Check {
  const r = lookup.received;
  if (r.kind === "response" && r.status === 200 && r.valid_output)
    return check("lookup_finds_effect", true, `HTTP 200${named(r)}`, [lookup]);
  const observed =
    r.kind === "response" && r.status === 200
      ? "HTTP 200, but the body is not a valid result for this tool"
      : r.kind === "response" && r.status === 404
        ? "HTTP 404: the lookup does not find an effect that happened"
        : describe(r);
  return check("lookup_finds_effect", false, observed, [lookup]);
}

export function judgeLookupMissing(lookup: Exchange): Check {
  const r = lookup.received;
  if (r.kind === "response" && r.status === 404)
    return check("lookup_unknown_key", true, "HTTP 404", [lookup]);
  return check(
    "lookup_unknown_key",
    false,
    `${describe(r)}${named(r)}: a key never used must answer 404`,
    [lookup],
  );
}

/** Verified only when every check ran and passed; a skipped check proves nothing. */
export function verdictOf(
  checks: Check[],
  checkedAt: string,
  settingsHash: string,
  baseUrl: string | null,
): Verification {
  const status = checks.every((c) => c.status === "passed") ? "verified" : "failed";
  return { status, checked_at: checkedAt, settings_hash: settingsHash, base_url: baseUrl, checks };
}

/**
 * One argument changed for the "changed body" check: the first field (sorted, not bound, not in a
 * URL, so the request goes to the same place) with a candidate value the tool's schema accepts.
 * `accepts` is the tool's own validation; null when no single change is valid.
 */
export function changeOneArgument(
  input: Record<string, unknown>,
  properties: Record<string, { enum?: unknown[] } | undefined>,
  skip: ReadonlySet<string>,
  accepts: (candidate: Record<string, unknown>) => boolean,
): { field: string; input: Record<string, unknown> } | null {
  for (const field of Object.keys(input).sort()) {
    if (skip.has(field)) continue;
    for (const value of candidates(input[field], properties[field]?.enum)) {
      const candidate = { ...input, [field]: value };
      if (accepts(candidate)) return { field, input: candidate };
    }
  }
  return null;
}

function candidates(value: unknown, options: unknown[] | undefined): unknown[] {
  const others = (options ?? []).filter((option) => option !== value);
  if (typeof value === "number") return [...others, value + 1, value - 1, value * 2, value / 2];
  if (typeof value === "string") return [...others, `${value}_changed`, "changed"];
  if (typeof value === "boolean") return [...others, !value];
  return others;
}
