// OpenAI Responses. In: a Response object or its `output` items array; each `function_call` item
// (call_id, name, JSON-string arguments) is a call, in output order. The @openai/agents SDK's own
// shapes are accepted too: its ModelResponse (`rawResponses[i]`: `output` items with camelCase
// `callId`, `usage.inputTokens`/`outputTokens`) and those items alone. Reasoning, messages, hosted
// tool calls and unknown items or fields are ignored. Arguments stay the model's JSON string: the
// gate parses them, so bad JSON is one call's `invalid_arguments`, not a refused turn. Out: one
// `function_call_output` item per call, in call order.
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import {
  CallId,
  checkCalls,
  invalid,
  parseWith,
  resultText,
  TokenUsage,
  tokensOf,
  ToolName,
} from "./turn-rules.ts";
import type { ExportedTool, ParsedTurn, ParseError, ProviderAdapter, ResultItem } from "./types.ts";

const Item = z.looseObject({ type: z.string() });
const FunctionCall = z.looseObject({
  type: z.literal("function_call"),
  call_id: CallId,
  name: ToolName,
  arguments: z.string(),
});
const ResponseBody = z.looseObject({
  output: z.array(Item),
  model: z.string().nullish(),
  usage: TokenUsage.nullish(),
});
const WHAT = "an OpenAI Responses response or its output items array";

export type FunctionCallOutputItem = {
  type: "function_call_output";
  call_id: string;
  output: string;
};
export type ResponsesFunctionTool = {
  type: "function";
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  strict: boolean;
};

function parse(body: unknown): Result<ParsedTurn, ParseError> {
  if (typeof body !== "object" || body === null) return invalid(`expected ${WHAT}`);
  const parsed = Array.isArray(body)
    ? parseWith(z.array(Item), body, WHAT, "output")
    : parseWith(ResponseBody, body, WHAT);
  if (!parsed.ok) return parsed;
  const response = Array.isArray(parsed.value)
    ? { output: parsed.value, model: null, usage: null }
    : parsed.value;
  const calls = [];
  for (const [index, item] of response.output.entries()) {
    if (item.type !== "function_call") continue;
    // @openai/agents spells it callId; a body carrying both must agree (else call_id is refused).
    const spelled =
      "callId" in item && !("call_id" in item) ? { ...item, call_id: item.callId } : item;
    if ("callId" in item && "call_id" in item && item.callId !== item.call_id)
      return invalid(`output[${index}].callId: disagrees with call_id`);
    const call = parseWith(
      FunctionCall,
      spelled,
      "a function_call item with call_id, name and string arguments",
      `output[${index}]`,
    );
    if (!call.ok) return call;
    calls.push({ id: call.value.call_id, name: call.value.name, arguments: call.value.arguments });
  }
  // input_tokens already include cached tokens (input_tokens_details.cached_tokens is a subset).
  return checkCalls(calls, tokensOf(response.usage, response.model ?? null));
}

function format(results: ResultItem[]): FunctionCallOutputItem[] {
  return results.map(({ call, envelope }) => ({
    type: "function_call_output",
    call_id: call.id,
    output: resultText(envelope),
  }));
}

function exportTools(tools: ExportedTool[]): ResponsesFunctionTool[] {
  return tools.map((tool) => ({
    type: "function",
    name: tool.name,
    description: tool.description,
    parameters: tool.input_schema,
    strict: tool.strict ?? true,
  }));
}

export const openaiResponses = { parse, format, exportTools } satisfies ProviderAdapter;
