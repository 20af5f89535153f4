// The native format: `{ calls: [{ id, name, arguments }], turn_key?, model?, usage? }` in
// (arguments an object or a JSON string; absent means {}), or the Vercel AI SDK's own shape: a
// model call or step (`{ content: [...parts], usage?, modelId? | response.modelId? }`) or its parts
// array, where each `tool-call` part (toolCallId, toolName, input) not executed by the provider is
// a call. `turn_key` groups calls of one model response posted separately (one model turn, usage
// charged once; see durable/run/admit.ts). Out: the envelopes in call order. Tools export as
// provider-neutral `{ name, description, input_schema }`. NativeTurnBody is the OpenAPI body.
import { z } from "zod";
import type { Envelope } from "../domain/envelope.ts";
import type { Result } from "../domain/result.ts";
import {
  CallId,
  checkCalls,
  invalid,
  parseWith,
  tokenUsage,
  TokenUsage,
  tokensOf,
  ToolName,
} from "./turn-rules.ts";
import type { ExportedTool, ParsedTurn, ParseError, ProviderAdapter, ResultItem } from "./types.ts";

export { MAX_CALLS_PER_TURN } from "./types.ts";
export const MAX_TURN_KEY_LENGTH = 128;

const Arguments = z.union([z.record(z.string(), z.unknown()), z.string()]).default({});
const TurnKey = z
  .string()
  .min(1, "must be a non-empty string")
  .max(MAX_TURN_KEY_LENGTH, `must be at most ${MAX_TURN_KEY_LENGTH} characters`);

export const NativeCall = z.looseObject({ id: CallId, name: ToolName, arguments: Arguments });
export const NativeTurn = z.looseObject({
  calls: z.array(NativeCall),
  turn_key: TurnKey.optional(),
  model: z.string().nullish(),
  usage: TokenUsage.nullish(),
});
export type NativeTurn = z.infer<typeof NativeTurn>;

const Part = z.looseObject({ type: z.string() });
const AiSdkToolCall = z.looseObject({
  type: z.literal("tool-call"),
  toolCallId: CallId,
  toolName: ToolName,
  input: Arguments,
  providerExecuted: z.boolean().nullish(),
});
/** An AI SDK model call (onLanguageModelCallEnd) or step result: its content parts, usage and model. */
export const AiSdkTurn = z.looseObject({
  content: z.array(Part),
  turn_key: TurnKey.optional(),
  modelId: z.string().nullish(),
  response: z.looseObject({ modelId: z.string().nullish() }).nullish(),
  usage: tokenUsage({ partial: true }).nullish(),
});
/** What POST /turns?format=native accepts, as the OpenAPI document shows it. */
export const NativeTurnBody = z.union([NativeTurn, AiSdkTurn, z.array(Part)]);

const WHAT = "a native turn { calls: [{ id, name, arguments }] }";
const WHAT_AI_SDK = "an AI SDK model call or step { content: [...parts] }, or its parts array";

export function parseNativeTurn(body: unknown): Result<ParsedTurn, ParseError> {
  if (Array.isArray(body) || (typeof body === "object" && body !== null && "content" in body))
    return parseAiSdk(body);
  const parsed = parseWith(NativeTurn, body, WHAT);
  if (!parsed.ok) return parsed;
  const { calls, turn_key, model, usage } = parsed.value;
  const checked = checkCalls(
    calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments })),
    tokensOf(usage, model ?? null),
  );
  return checked.ok && turn_key
    ? { ...checked, value: { ...checked.value, turnKey: turn_key } }
    : checked;
}

function parseAiSdk(body: unknown): Result<ParsedTurn, ParseError> {
  const parsed = Array.isArray(body)
    ? parseWith(z.array(Part), body, WHAT_AI_SDK, "content")
    : parseWith(AiSdkTurn, body, WHAT_AI_SDK);
  if (!parsed.ok) return parsed;
  const turn = Array.isArray(parsed.value) ? { content: parsed.value } : parsed.value;
  const calls = [];
  for (const [index, part] of turn.content.entries()) {
    if (part.type !== "tool-call") continue;
    const call = parseWith(
      AiSdkToolCall,
      part,
      "a tool-call part with toolCallId, toolName and input",
      `content[${index}]`,
    );
    if (!call.ok) return call;
    // A provider-executed tool (a hosted web search) already ran at the provider: not toolgate's.
    if (call.value.providerExecuted) continue;
    calls.push({
      id: call.value.toolCallId,
      name: call.value.toolName,
      arguments: call.value.input,
    });
  }
  if (calls.length === 0) return invalid("no tool calls in this turn");
  const meta = Array.isArray(parsed.value) ? null : parsed.value;
  const model = meta?.modelId ?? meta?.response?.modelId ?? null;
  const checked = checkCalls(calls, tokensOf(meta?.usage, model));
  return checked.ok && meta?.turn_key
    ? { ...checked, value: { ...checked.value, turnKey: meta.turn_key } }
    : checked;
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
