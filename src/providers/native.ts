// The native format: `{ calls: [{ id, name, arguments }] }` in (arguments an object or a JSON
// string; absent means {}), the envelopes out in call order. Tools export as provider-neutral
// `{ name, description, input_schema }`. NativeTurn is also the OpenAPI request body.
import { z } from "zod";
import type { Envelope } from "../domain/envelope.ts";
import type { Result } from "../domain/result.ts";
import { CallId, checkCalls, parseWith, ToolName } from "./turn-rules.ts";
import type { ExportedTool, ParsedTurn, ParseError, ProviderAdapter, ResultItem } from "./types.ts";

export { MAX_CALLS_PER_TURN } from "./types.ts";

export const NativeCall = z.looseObject({
  id: CallId,
  name: ToolName,
  arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}),
});
export const NativeTurn = z.looseObject({ calls: z.array(NativeCall) });
export type NativeTurn = z.infer<typeof NativeTurn>;

export function parseNativeTurn(body: unknown): Result<ParsedTurn, ParseError> {
  const parsed = parseWith(NativeTurn, body, "a native turn { calls: [{ id, name, arguments }] }");
  if (!parsed.ok) return parsed;
  return checkCalls(
    parsed.value.calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments })),
    null,
  );
}

function format(results: ResultItem[]): Envelope[] {
  return results.map((item) => item.envelope);
}

function exportTools(tools: ExportedTool[]): ExportedTool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.input_schema,
  }));
}

export const native = { parse: parseNativeTurn, format, exportTools } satisfies ProviderAdapter;
