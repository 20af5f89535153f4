// The native format: { calls: [{ id, name, arguments }] } in, envelopes out (call order).
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import { checkCalls, parseWith, type ParsedTurn, type ParseError, type ResultItem, type TurnAdapter } from "./types.ts";

export { MAX_CALLS_PER_TURN } from "./types.ts";
export const MAX_ARGUMENT_BYTES = 32 * 1024;

export const NativeTurn = z.object({
  calls: z.array(z.object({ id: z.string().min(1).max(128), name: z.string().min(1).max(128), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}) })),
});

export const native: TurnAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError> {
    const parsed = parseWith(NativeTurn, body, "a native turn ({ calls: [...] })");
    return parsed.ok ? checkCalls(parsed.value.calls, null) : parsed;
  },
  format: (results: ResultItem[]) => results.map((item) => item.envelope),
};
