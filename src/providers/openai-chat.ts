// OpenAI Chat Completions. In: a ChatCompletion (its first choice; toolgate answers one choice per
// turn) or that choice's assistant message; each `tool_calls[]` entry of type "function" is a call
// (id, function.name, JSON-string function.arguments), in order. Custom tool calls are the agent's
// own and are ignored, as are unknown fields. Out: one `role: "tool"` message per call, in order.
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

const ToolCallKind = z.looseObject({ type: z.string().optional() });
const FunctionToolCall = z.looseObject({
  id: CallId,
  type: z.literal("function").optional(),
  function: z.looseObject({ name: ToolName, arguments: z.string() }),
});
const AssistantMessage = z.looseObject({
  role: z
    .literal(
      "assistant",
      "must be \"assistant\" (post the model's response, not the user's message)",
    )
    .optional(),
  tool_calls: z.array(ToolCallKind).nullish(),
});
const ChatUsage = z.looseObject({ prompt_tokens: TokenCount, completion_tokens: TokenCount });
const Completion = z.looseObject({
  choices: z
    .array(z.looseObject({ message: AssistantMessage }))
    .min(1, "a completion needs at least one choice"),
  model: z.string().nullish(),
  usage: ChatUsage.nullish(),
});
const WHAT_COMPLETION = "an OpenAI chat completion";
const WHAT_MESSAGE = "an OpenAI chat completion or its assistant message";

export type ToolMessage = { role: "tool"; tool_call_id: string; content: string };
export type ChatFunctionTool = {
  type: "function";
  function: {
    name: string;
    description: string;
    parameters: Record<string, unknown>;
    strict: boolean;
  };
};

function parse(body: unknown): Result<ParsedTurn, ParseError> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return invalid(`expected ${WHAT_MESSAGE}`);
  let message: z.infer<typeof AssistantMessage>;
  let usage: Usage | null = null;
  let at = "";
  if ("choices" in body) {
    const completion = parseWith(Completion, body, WHAT_COMPLETION);
    if (!completion.ok) return completion;
    message = completion.value.choices[0]!.message;
    at = "choices[0].message.";
    const u = completion.value.usage;
    usage = u
      ? {
          model: completion.value.model ?? null,
          input_tokens: u.prompt_tokens,
          output_tokens: u.completion_tokens,
        }
      : null;
  } else {
    const parsed = parseWith(AssistantMessage, body, WHAT_MESSAGE);
    if (!parsed.ok) return parsed;
    message = parsed.value;
  }
  const calls = [];
  for (const [index, toolCall] of (message.tool_calls ?? []).entries()) {
    if (toolCall.type !== undefined && toolCall.type !== "function") continue;
    const call = parseWith(
      FunctionToolCall,
      toolCall,
      "a function tool call with id, function.name and string function.arguments",
      `${at}tool_calls[${index}]`,
    );
    if (!call.ok) return call;
    calls.push({
      id: call.value.id,
      name: call.value.function.name,
      arguments: call.value.function.arguments,
    });
  }
  return checkCalls(calls, usage);
}

function format(results: ResultItem[]): ToolMessage[] {
  return results.map(({ call, envelope }) => ({
    role: "tool",
    tool_call_id: call.id,
    content: resultText(envelope),
  }));
}

function exportTools(tools: ExportedTool[]): ChatFunctionTool[] {
  return tools.map((tool) => ({
    type: "function",
    function: {
      name: tool.name,
      description: tool.description,
      parameters: tool.input_schema,
      strict: tool.strict ?? true,
    },
  }));
}

export const openaiChat = { parse, format, exportTools } satisfies ProviderAdapter;
