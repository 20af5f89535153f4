// Decoding helpers every row codec uses: a row that does not decode is corrupt storage (a thrown
// error naming the row, never a guess), and decoded values shared through a cache are deep-frozen.
import { z } from "zod";

export function decodeWith<T>(codec: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = codec.safeParse(value);
  if (!parsed.success) throw new Error(`corrupt ${what} row: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`corrupt ${what} row: not JSON`);
  }
}

/** For rows whose undecodable form must fail closed (a key's scopes, a verdict): null, never a guess. */
export function decodeOrNull<T>(codec: z.ZodType<T>, text: string): T | null {
  try {
    const parsed = codec.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
