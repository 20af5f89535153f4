// OpenAI Responses: a Response object or its `output` items in (`function_call` items carry
// call_id, name and JSON-string arguments); `function_call_output` items, in order, out.
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import { checkCalls, parseWith, resultText, type ParsedTurn, type ParseError, type ResultItem, type TurnAdapter } from "./types.ts";

const Item = z.looseObject({ type: z.string() });
const FunctionCall = z.looseObject({ type: z.literal("function_call"), call_id: z.string().min(1).max(128), name: z.string().min(1).max(128), arguments: z.string() });
const Usage = z.looseObject({ input_tokens: z.number().default(0), output_tokens: z.number().default(0) });
const Body = z.union([z.array(Item), z.looseObject({ output: z.array(Item), model: z.string().optional(), usage: Usage.nullish() })]);

export const openaiResponses: TurnAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError> {
    const parsed = parseWith(Body, body, "an OpenAI Responses response or output array");
    if (!parsed.ok) return parsed;
    const response = Array.isArray(parsed.value) ? { output: parsed.value } : parsed.value;
    const calls = [];
    for (const item of response.output) {
      if (item.type !== "function_call") continue;
      const call = FunctionCall.safeParse(item);
      if (!call.success) return { ok: false, error: { code: "invalid_request", detail: "a function_call item needs call_id, name and arguments" } };
      calls.push({ id: call.data.call_id, name: call.data.name, arguments: call.data.arguments });
    }
    const u = "usage" in response ? response.usage : undefined;
    const usage = u ? { model: ("model" in response ? response.model : undefined) ?? null, input_tokens: u.input_tokens, output_tokens: u.output_tokens } : null;
    return checkCalls(calls, usage);
  },
  format: (results: ResultItem[]) => results.map(({ call, envelope }) => ({ type: "function_call_output", call_id: call.id, output: resultText(envelope) })),
};
