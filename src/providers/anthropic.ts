// Anthropic Messages. In: a Message response, its assistant message, or its content array; each
// `tool_use` block (id, name, input) is a call, in content order. Text, thinking, server-tool and
// unknown blocks, and unknown fields such as `caller`, are ignored. Out: the next `user` message,
// whose content is only `tool_result` blocks in call order (the API requires them to come first);
// `is_error` marks refusals and failures, never a call that is still running or awaiting approval.
// Tools export with `strict: true` unless their schema cannot be expressed strictly.
import { z } from "zod";
import type { Result } from "../domain/result.ts";
import {
  CallId,
  checkCalls,
  invalid,
  parseWith,
  resultText,
  TokenCount,
  ToolName,
} from "./turn-rules.ts";
import type {
  ExportedTool,
  ParsedTurn,
  ParseError,
  ProviderAdapter,
  ResultItem,
  Usage,
} from "./types.ts";

const Block = z.looseObject({ type: z.string() });
const ToolUse = z.looseObject({
  type: z.literal("tool_use"),
  id: CallId,
  name: ToolName,
  input: z.record(z.string(), z.unknown()),
});
const AnthropicUsage = z.looseObject({
  input_tokens: TokenCount,
  output_tokens: TokenCount,
  cache_creation_input_tokens: TokenCount.nullish(),
  cache_read_input_tokens: TokenCount.nullish(),
});
const Message = z.looseObject({
  role: z
    .literal(
      "assistant",
      "must be \"assistant\" (post the model's response, not the user's message)",
    )
    .optional(),
  content: z.union([z.string(), z.array(Block)]),
  model: z.string().nullish(),
  usage: AnthropicUsage.nullish(),
});
const WHAT = "an Anthropic Messages response, its assistant message, or its content array";

export type AnthropicToolResultMessage = {
  role: "user";
  content: Array<{ type: "tool_result"; tool_use_id: string; content: string; is_error: boolean }>;
};
export type AnthropicTool = {
  name: string;
  description: string;
  input_schema: Record<string, unknown> & { type: "object" };
  strict: boolean;
};

function parse(body: unknown): Result<ParsedTurn, ParseError> {
  if (typeof body !== "object" || body === null) return invalid(`expected ${WHAT}`);
  const parsed = Array.isArray(body)
    ? parseWith(z.array(Block), body, WHAT, "content")
    : parseWith(Message, body, WHAT);
  if (!parsed.ok) return parsed;
  const message = Array.isArray(parsed.value)
    ? { content: parsed.value, model: null, usage: null }
    : parsed.value;
  const blocks = typeof message.content === "string" ? [] : message.content;
  const calls = [];
  for (const [index, block] of blocks.entries()) {
    if (block.type !== "tool_use") continue;
    const use = parseWith(
      ToolUse,
      block,
      "a tool_use block with id, name and an input object",
      `content[${index}]`,
    );
    if (!use.ok) return use;
    calls.push({ id: use.value.id, name: use.value.name, arguments: use.value.input });
  }
  return checkCalls(calls, usageOf(message.model ?? null, message.usage ?? null));
}

/** Cache writes and reads are input tokens too: Anthropic reports them apart from input_tokens. */
function usageOf(model: string | null, usage: z.infer<typeof AnthropicUsage> | null): Usage | null {
  if (!usage) return null;
  const input =
    usage.input_tokens +
    (usage.cache_creation_input_tokens ?? 0) +
    (usage.cache_read_input_tokens ?? 0);
  return { model, input_tokens: input, output_tokens: usage.output_tokens };
}

function format(results: ResultItem[]): AnthropicToolResultMessage {
  return {
    role: "user",
    content: results.map(({ call, envelope }) => ({
      type: "tool_result",
      tool_use_id: call.id,
      content: resultText(envelope),
      is_error: isError(envelope),
    })),
  };
}

/** Waiting is not failing: a call still running or waiting for a person is not an error. */
const isError = (envelope: ResultItem["envelope"]) =>
  envelope.status !== "succeeded" &&
  envelope.status !== "pending" &&
  envelope.status !== "awaiting_approval";

function exportTools(tools: ExportedTool[]): AnthropicTool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: { ...tool.input_schema, type: "object" },
    strict: tool.strict ?? true,
  }));
}

export const anthropic = { parse, format, exportTools } satisfies ProviderAdapter;
