// What JSON.parse lets through and toolgate must not: a body is hashed, frozen, shown to an
// approver and sent upstream, so every reader of it must see the same value.
// - Duplicate keys: JSON.parse keeps the last, other parsers the first (RFC 8259 §4: "names
//   SHOULD be unique"); `{"amount":1,"amount":900}` would mean 900 here and 1 elsewhere.
// - Lone surrogates (`"\ud800"`): not Unicode text; UTF-8 encoding replaces them with U+FFFD, so
//   two different inputs would hash alike (RFC 8259 §8.2, I-JSON RFC 7493 §2.1).
// - `__proto__` as a key: an own property after JSON.parse, the object's prototype after any
//   assignment `target[key] = value` — refused at the door rather than audited in every copy.
// - Nesting deeper than MAX_JSON_DEPTH: every recursive walk (schema validation, canonical JSON,
//   redaction) would otherwise be a stack-overflow away from a 500.
// The text is scanned once after JSON.parse accepted it, so it is known to be well-formed JSON.

export const MAX_JSON_DEPTH = 64;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The first reason this (syntactically valid) JSON text is refused, or null. */
export function jsonTextProblem(text: string): string | null {
  // One frame per open container: the keys seen so far (objects) or null (arrays).
  const stack: Array<Set<string> | null> = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x7b /* { */ || ch === 0x5b /* [ */) {
      if (stack.length >= MAX_JSON_DEPTH) return `nested deeper than ${MAX_JSON_DEPTH} levels`;
      stack.push(ch === 0x7b ? new Set() : null);
      expectKey = ch === 0x7b;
    } else if (ch === 0x7d /* } */ || ch === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (ch === 0x2c /* , */) {
      expectKey = stack.at(-1) instanceof Set;
    } else if (ch === 0x22 /* " */) {
      const end = stringEnd(text, i);
      const raw = text.slice(i, end + 1);
      const escaped = raw.includes("\\");
      const value = escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
      if (escaped && LONE_SURROGATE.test(value))
        return `a string holds a lone surrogate (${raw.length > 40 ? `${raw.slice(0, 40)}…` : raw})`;
      if (expectKey) {
        const keys = stack.at(-1) as Set<string>;
        if (value === "__proto__") return `the key "__proto__" is not accepted`;
        if (keys.has(value)) return `duplicate key ${JSON.stringify(value)} in one object`;
        keys.add(value);
        expectKey = false;
      }
      i = end;
    }
  }
  return null;
}

/** Index of the closing quote of the string that opens at `start`. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x5c /* \ */) i++;
    else if (ch === 0x22) return i;
  }
  return text.length - 1;
}
