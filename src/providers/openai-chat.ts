// OpenAI Chat Completions: a ChatCompletion (first choice) or its assistant message in
// (`tool_calls[].function`); one `role: "tool"` message per call, in order, out.
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import { checkCalls, parseWith, resultText, type ParsedTurn, type ParseError, type ResultItem, type TurnAdapter } from "./types.ts";

const ToolCall = z.looseObject({ id: z.string().min(1).max(128), type: z.string().optional(), function: z.looseObject({ name: z.string().min(1).max(128), arguments: z.string() }) });
const Message = z.looseObject({ role: z.string().optional(), tool_calls: z.array(ToolCall).nullish() });
const Usage = z.looseObject({ prompt_tokens: z.number().default(0), completion_tokens: z.number().default(0) });
const Completion = z.looseObject({ choices: z.array(z.looseObject({ message: Message })).min(1), model: z.string().optional(), usage: Usage.nullish() });

export const openaiChat: TurnAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError> {
    const isCompletion = typeof body === "object" && body !== null && "choices" in body;
    const parsed = isCompletion ? parseWith(Completion, body, "an OpenAI chat completion") : parseWith(Message, body, "an OpenAI chat assistant message");
    if (!parsed.ok) return parsed;
    const completion = isCompletion ? (parsed.value as z.infer<typeof Completion>) : null;
    const message = completion ? completion.choices[0]!.message : (parsed.value as z.infer<typeof Message>);
    const calls = (message.tool_calls ?? []).map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
    const usage = completion?.usage ? { model: completion.model ?? null, input_tokens: completion.usage.prompt_tokens, output_tokens: completion.usage.completion_tokens } : null;
    return checkCalls(calls, usage);
  },
  format: (results: ResultItem[]) => results.map(({ call, envelope }) => ({ role: "tool", tool_call_id: call.id, content: resultText(envelope) })),
};
