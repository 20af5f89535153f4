// What every provider adapter does: parse the provider's own response object into proposed calls
// (and model usage), format toolgate's envelopes as the next conversation items, and export tool
// definitions. Adapters are pure functions; they never see Durable Objects or HTTP.
import { z } from "zod";
import type { Envelope } from "../domain/envelope.ts";
import type { ProposedCall } from "../domain/gate.ts";
import type { ModelUsage } from "../domain/pricing.ts";
import { err, ok, type Result } from "../domain/result.ts";

export const TurnFormat = z.enum(["anthropic", "openai-responses", "openai-chat", "native"]);
export type TurnFormat = z.infer<typeof TurnFormat>;
export const ToolsFormat = z.enum(["anthropic", "openai-responses", "openai-chat", "mcp", "native"]);
export type ToolsFormat = z.infer<typeof ToolsFormat>;

export type ParsedTurn = { calls: ProposedCall[]; usage: ModelUsage | null };
export type ParseError = { code: "invalid_request"; detail: string };
export type ResultItem = { call: ProposedCall; envelope: Envelope };

export type TurnAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError>;
  format(results: ResultItem[]): unknown;
};

export const MAX_CALLS_PER_TURN = 64;

/** Shared rules for every format: 1..64 calls, non-empty unique ids. */
export function checkCalls(calls: ProposedCall[], usage: ModelUsage | null): Result<ParsedTurn, ParseError> {
  if (calls.length === 0) return err({ code: "invalid_request", detail: "no tool calls in this turn" });
  if (calls.length > MAX_CALLS_PER_TURN) return err({ code: "invalid_request", detail: `at most ${MAX_CALLS_PER_TURN} tool calls per turn` });
  const seen = new Set<string>();
  for (const call of calls) {
    if (seen.has(call.id)) return err({ code: "invalid_request", detail: `duplicate call id ${call.id} in one turn` });
    seen.add(call.id);
  }
  return ok({ calls, usage });
}

export function parseWith<S extends z.ZodType>(schema: S, body: unknown, what: string): Result<z.infer<S>, ParseError> {
  const parsed = schema.safeParse(body);
  return parsed.success ? ok(parsed.data) : err({ code: "invalid_request", detail: `not ${what}: ${z.prettifyError(parsed.error)}` });
}

/** The envelope as the tool result text every provider carries. */
export const resultText = (envelope: Envelope) => JSON.stringify(envelope);
