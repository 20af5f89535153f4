// Anthropic Messages: a Message response, its assistant message, or its content array in;
// the next `user` message with one `tool_result` block per `tool_use`, in order, out. Unknown
// fields and block types (e.g. `caller`, server tools, thinking) are tolerated and ignored.
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import { checkCalls, parseWith, resultText, type ParsedTurn, type ParseError, type ResultItem, type TurnAdapter } from "./types.ts";

const Block = z.looseObject({ type: z.string() });
const ToolUse = z.looseObject({ type: z.literal("tool_use"), id: z.string().min(1).max(128), name: z.string().min(1).max(128), input: z.unknown() });
const Usage = z.looseObject({
  input_tokens: z.number().default(0),
  output_tokens: z.number().default(0),
  cache_creation_input_tokens: z.number().nullish(),
  cache_read_input_tokens: z.number().nullish(),
});
const Body = z.union([
  z.array(Block),
  z.looseObject({ content: z.array(Block), model: z.string().optional(), usage: Usage.optional() }),
]);

export const anthropic: TurnAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError> {
    const parsed = parseWith(Body, body, "an Anthropic message or content array");
    if (!parsed.ok) return parsed;
    const message = Array.isArray(parsed.value) ? { content: parsed.value } : parsed.value;
    const calls = [];
    for (const block of message.content) {
      if (block.type !== "tool_use") continue;
      const use = ToolUse.safeParse(block);
      if (!use.success) return { ok: false, error: { code: "invalid_request", detail: "a tool_use block needs id, name and input" } };
      calls.push({ id: use.data.id, name: use.data.name, arguments: use.data.input ?? {} });
    }
    const u = "usage" in message ? message.usage : undefined;
    const usage = u
      ? { model: ("model" in message ? message.model : undefined) ?? null, input_tokens: u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0), output_tokens: u.output_tokens }
      : null;
    return checkCalls(calls, usage);
  },
  format: (results: ResultItem[]) => ({
    role: "user",
    content: results.map(({ call, envelope }) => ({
      type: "tool_result",
      tool_use_id: call.id,
      content: resultText(envelope),
      is_error: envelope.status !== "succeeded",
    })),
  }),
};
