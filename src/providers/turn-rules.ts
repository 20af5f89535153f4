// Rules every turn format shares, so no adapter can drift from them: 1..MAX_CALLS_PER_TURN calls,
// non-empty unique ids (a duplicate id would make "one result per call" ambiguous), token counts
// that are non-negative integers (usage is priced into max_cost, so a negative count would buy
// budget back), and one-line parse errors that name the offending path.
import { z } from "zod";
import type { Envelope } from "../domain/envelope.ts";
import type { ProposedCall } from "../domain/turn/gate.ts";
import { err, ok, type Result } from "../domain/result.ts";
import {
  MAX_ARGUMENT_BYTES,
  MAX_CALL_ID_LENGTH,
  MAX_CALLS_PER_TURN,
  MAX_TOOL_NAME_LENGTH,
  type ParsedTurn,
  type ParseError,
  type Usage,
} from "./types.ts";

export const CallId = z
  .string()
  .min(1, "must be a non-empty string")
  .max(MAX_CALL_ID_LENGTH, `must be at most ${MAX_CALL_ID_LENGTH} characters`);
export const ToolName = z
  .string()
  .min(1, "must be a non-empty string")
  .max(MAX_TOOL_NAME_LENGTH, `must be at most ${MAX_TOOL_NAME_LENGTH} characters`);
export const TokenCount = z.number().int().nonnegative();
const UTF8 = new TextEncoder();

/**
 * Token usage as the wire spells it (`input_tokens`/`output_tokens`) or as the agent SDKs spell it
 * (`inputTokens`/`outputTokens`: @openai/agents' Usage, the AI SDK's LanguageModelUsage). Both
 * spellings at once must agree. `partial`: a count may be missing (the AI SDK leaves a count the
 * provider did not report `undefined`); otherwise both counts are required, in either spelling.
 */
export const tokenUsage = ({ partial }: { partial: boolean }) =>
  z
    .looseObject({
      input_tokens: TokenCount.optional(),
      output_tokens: TokenCount.optional(),
      inputTokens: TokenCount.nullish(),
      outputTokens: TokenCount.nullish(),
    })
    .superRefine((usage, ctx) => {
      for (const [snake, camel] of [
        ["input_tokens", "inputTokens"],
        ["output_tokens", "outputTokens"],
      ] as const) {
        const a = usage[snake];
        const b = usage[camel] ?? undefined;
        if (a !== undefined && b !== undefined && a !== b)
          ctx.addIssue({ code: "custom", path: [camel], message: `disagrees with ${snake}` });
        if (!partial && a === undefined && b === undefined)
          ctx.addIssue({ code: "custom", path: [snake], message: "a token count is required" });
      }
    });
export const TokenUsage = tokenUsage({ partial: false });

/** Counts from either spelling; null when the body reports no token counts at all. */
export function tokensOf(
  usage: z.infer<ReturnType<typeof tokenUsage>> | null | undefined,
  model: string | null,
): Usage | null {
  if (!usage) return null;
  const input = usage.input_tokens ?? usage.inputTokens ?? null;
  const output = usage.output_tokens ?? usage.outputTokens ?? null;
  if (input === null && output === null) return null;
  return { model, input_tokens: input ?? 0, output_tokens: output ?? 0 };
}

export const invalid = (detail: string): Result<never, ParseError> =>
  err({ code: "invalid_request", detail });

/** Parses `body` with `schema`; on failure, one line naming `what` was expected and where it broke. */
export function parseWith<S extends z.ZodType>(
  schema: S,
  body: unknown,
  what: string,
  at = "",
): Result<z.infer<S>, ParseError> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return ok(parsed.data);
  const problems = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${pathText(at, issue.path) || "body"}: ${issue.message}`);
  const more =
    parsed.error.issues.length > 3 ? ` (and ${parsed.error.issues.length - 3} more)` : "";
  return invalid(`expected ${what}; ${problems.join("; ")}${more}`);
}

/** `content[2].id` from a base and a zod path. */
export function pathText(base: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (text, key) =>
      typeof key === "number" ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key),
    base,
  );
}

export function checkCalls(
  calls: ProposedCall[],
  usage: Usage | null,
): Result<ParsedTurn, ParseError> {
  if (calls.length === 0) return invalid("no tool calls in this turn");
  if (calls.length > MAX_CALLS_PER_TURN)
    return invalid(
      `${calls.length} tool calls in one turn; at most ${MAX_CALLS_PER_TURN} are accepted`,
    );
  const seen = new Set<string>();
  for (const call of calls) {
    if (seen.has(call.id))
      return invalid(
        `duplicate call id ${JSON.stringify(call.id)} in one turn; every call needs its own id`,
      );
    seen.add(call.id);
    if (UTF8.encode(JSON.stringify(call.arguments) ?? "").byteLength > MAX_ARGUMENT_BYTES)
      return invalid(`the arguments of call ${call.id} exceed ${MAX_ARGUMENT_BYTES} bytes`);
  }
  return ok({ calls, usage });
}

/** The envelope as the tool-result text every provider carries. */
export const resultText = (envelope: Envelope): string => JSON.stringify(envelope);
