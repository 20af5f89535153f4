// Redaction by a tool's declared JSON Pointer paths (RFC 6901, manifest `redact`). Applied to every
// copy of arguments, results and upstream text that leaves the operation's frozen input: the trace,
// the console, the approvals inbox, logs and exports. The frozen input and its hash stay unredacted
// (identity and idempotency are computed on what the model really asked for). A pointer applies to
// arguments and results alike (`/customer_id` hides it in both); the string values it hides in the
// arguments are also scrubbed from any free text (an upstream error that echoes the input).
import { err, ok, type Result } from "./result.ts";

export const REDACTED = "[redacted]";
/** Shorter values are hidden by path only: scrubbing "1" or "usd" from free text would mangle it. */
export const MIN_SCRUB_LENGTH = 4;

export type PointerError = { code: "invalid_pointer"; pointer: string; detail: string };
/** Parsed once per tool; `values`: the argument strings the pointers hide, for scrubbing free text. */
export type Redaction = { paths: string[][]; values: string[] };
export const NO_REDACTION: Redaction = { paths: [], values: [] };

/** RFC 6901: "" is the whole document (refused: redact fields, not everything), else "/"-separated tokens. */
export function parsePointer(pointer: string): Result<string[], PointerError> {
  const fail = (detail: string) => err({ code: "invalid_pointer" as const, pointer, detail });
  if (pointer === "") return fail("the empty pointer names the whole document; name a field");
  if (!pointer.startsWith("/")) return fail('a JSON Pointer starts with "/"');
  const tokens = pointer.slice(1).split("/");
  for (const token of tokens)
    if (/~(?![01])/.test(token))
      return fail('"~" must be followed by 0 or 1 (~0 is "~", ~1 is "/")');
  return ok(tokens.map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~")));
}

export function parsePointers(pointers: readonly string[]): Result<string[][], PointerError> {
  const paths: string[][] = [];
  for (const pointer of pointers) {
    const parsed = parsePointer(pointer);
    if (!parsed.ok) return parsed;
    paths.push(parsed.value);
  }
  return ok(paths);
}

/** The redaction for one operation: its tool's pointers and the argument strings they hide. */
export function redactionFor(pointers: readonly string[], input: unknown): Redaction {
  const parsed = parsePointers(pointers);
  // Pointers are validated when the tool is registered; one that no longer parses hides nothing less.
  const paths = parsed.ok ? parsed.value : [];
  const values = new Set<string>();
  for (const path of paths) collect(input, path, values);
  return { paths, values: [...values].filter((value) => value.length >= MIN_SCRUB_LENGTH) };
}

/** A copy of `doc` with every value a path names replaced by "[redacted]" (missing paths are ignored). */
export function redactDocument(doc: unknown, redaction: Redaction): unknown {
  let out = scrub(doc, redaction);
  for (const path of redaction.paths) out = replaceAt(out, path);
  return out;
}

/** Replaces every hidden argument string inside any string of `value`, deeply. */
export function scrub<T>(value: T, redaction: Redaction): T {
  if (redaction.values.length === 0) return value;
  const walk = (node: unknown): unknown => {
    if (typeof node === "string")
      return redaction.values.reduce((text, hidden) => text.replaceAll(hidden, REDACTED), node);
    if (Array.isArray(node)) return node.map(walk);
    if (node && typeof node === "object")
      return Object.fromEntries(Object.entries(node).map(([key, inner]) => [key, walk(inner)]));
    return node;
  };
  return walk(value) as T;
}

/**
 * `text` cut to at most `max` characters without leaving a fragment of any `hidden` value at the
 * end: the cut moves back before a value it would split, and before a tail that begins one
 * (MIN_SCRUB_LENGTH characters or more). Scrub whole values first, then cut with this: cutting
 * first leaves the prefix of a value straddling the cut that no whole-value scrub can find.
 */
export function cutClear(text: string, max: number, hidden: readonly string[]): string {
  if (text.length <= max) return text;
  let end = max;
  for (let moved = true; moved && end > 0;) {
    moved = false;
    for (const value of hidden) {
      for (let k = Math.min(value.length - 1, end); k >= 1; k--) {
        const start = end - k;
        const fragment = text.startsWith(value.slice(0, k), start);
        if (fragment && (k >= MIN_SCRUB_LENGTH || text.startsWith(value, start))) {
          end = start;
          moved = true;
          break;
        }
      }
    }
  }
  return text.slice(0, end);
}

function replaceAt(node: unknown, path: readonly string[]): unknown {
  if (path.length === 0) return REDACTED;
  const [head, ...rest] = path as [string, ...string[]];
  if (Array.isArray(node)) {
    const index = arrayIndex(head, node.length);
    if (index === null) return node;
    return node.map((item, i) => (i === index ? replaceAt(item, rest) : item));
  }
  if (node && typeof node === "object" && Object.hasOwn(node, head))
    return { ...node, [head]: replaceAt((node as Record<string, unknown>)[head], rest) };
  return node;
}

function collect(node: unknown, path: readonly string[], into: Set<string>): void {
  if (path.length === 0) {
    const walk = (inner: unknown): void => {
      if (typeof inner === "string") into.add(inner);
      else if (typeof inner === "number") into.add(String(inner));
      else if (inner && typeof inner === "object") Object.values(inner).forEach(walk);
    };
    walk(node);
    return;
  }
  const [head, ...rest] = path as [string, ...string[]];
  if (Array.isArray(node)) {
    const index = arrayIndex(head, node.length);
    if (index !== null) collect(node[index], rest, into);
  } else if (node && typeof node === "object" && Object.hasOwn(node, head))
    collect((node as Record<string, unknown>)[head], rest, into);
}

const arrayIndex = (token: string, length: number): number | null =>
  /^(0|[1-9][0-9]*)$/.test(token) && Number(token) < length ? Number(token) : null;

/**
 * Context fields a run binds into redacted arguments (tool `bind` + `redact`): the run's own view
 * (the console's run page, GET /v1/runs/{id}) hides them too, or the value would show there.
 */
export function redactContext(
  context: Record<string, unknown>,
  tools: ReadonlyArray<{ bind: Record<string, string>; redact: readonly string[] }>,
): Record<string, unknown> {
  const hidden = new Set<string>();
  for (const tool of tools) {
    const parsed = parsePointers(tool.redact);
    if (!parsed.ok) continue;
    for (const [argument, source] of Object.entries(tool.bind))
      if (parsed.value.some((path) => path[0] === argument))
        hidden.add(source.replace(/^context\./, ""));
  }
  return Object.fromEntries(
    Object.entries(context).map(([key, value]) => [key, hidden.has(key) ? REDACTED : value]),
  );
}

/** The pointers that name a value present in `doc`: the fields a redacted copy of it hides. */
export function presentPointers(pointers: readonly string[], doc: unknown): string[] {
  return pointers.filter((pointer) => {
    const parsed = parsePointer(pointer);
    if (!parsed.ok) return false;
    let node: unknown = doc;
    for (const token of parsed.value) {
      if (Array.isArray(node)) {
        const index = arrayIndex(token, node.length);
        if (index === null) return false;
        node = node[index];
      } else if (node && typeof node === "object" && Object.hasOwn(node, token))
        node = (node as Record<string, unknown>)[token];
      else return false;
    }
    return true;
  });
}
