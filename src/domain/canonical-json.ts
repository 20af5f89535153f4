// RFC 8785 (JSON Canonicalization Scheme) for the JSON values toolgate freezes, and the SHA-256
// input hash over it. ECMAScript's number and string serialization *is* the JCS serialization;
// the only extra rule is sorting object keys by UTF-16 code units (the default JS sort order).
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string")
    return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value))
      throw new TypeError("canonical JSON cannot hold a non-finite number");
    return JSON.stringify(value);
  }
  if (Array.isArray(value))
    return `[${value.map((item) => canonicalJson(item ?? null)).join(",")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
}

/** Deterministic (same bytes → same digest), so it belongs to the pure core despite being async. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", ENCODER.encode(text)));
  let hex = "";
  for (const byte of digest) hex += HEX[byte];
  return hex;
}

// Hoisted: a turn hashes four times; a new encoder and a spread-map-join per hash showed in the profile.
const ENCODER = new TextEncoder();
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));
