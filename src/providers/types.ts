// What every provider adapter speaks: the formats by name, the turn a parse yields (proposed calls
// plus model usage), the (call, envelope) pairs a format turns into conversation items, and the
// provider-neutral tool definition an export wraps. Plain data only; adapters are pure functions
// and never see Durable Objects or HTTP.
import { z } from "zod";
import type { Envelope } from "../domain/envelope.ts";
import type { ProposedCall } from "../domain/turn/gate.ts";
import type { Risk } from "../domain/identity.ts";
import type { ModelUsage } from "../domain/pricing.ts";
import type { Result } from "../domain/result.ts";

/** Formats a turn can be posted and answered in. */
export const ProviderFormat = z.enum(["anthropic", "openai-responses", "openai-chat", "native"]);
export type ProviderFormat = z.infer<typeof ProviderFormat>;
/** Formats tools can be exported in: every provider format, plus MCP `tools/list`. */
export const ExportFormat = z.enum([...ProviderFormat.options, "mcp"]);
export type ExportFormat = z.infer<typeof ExportFormat>;

/** @deprecated older names, kept for src/http until it moves to ProviderFormat/ExportFormat. */
export const TurnFormat = ProviderFormat;
export type TurnFormat = ProviderFormat;
/** @deprecated see TurnFormat. */
export const ToolsFormat = ExportFormat;
export type ToolsFormat = ExportFormat;

export type Usage = ModelUsage; // { model: string | null; input_tokens: number; output_tokens: number }
/** `turnKey`: native only; calls of one model response posted separately share it (one model turn). */
export type ParsedTurn = { calls: ProposedCall[]; usage: Usage | null; turnKey?: string };
export type ParseError = { code: "invalid_request"; detail: string };
export type ResultItem = { call: ProposedCall; envelope: Envelope };

/**
 * A tool as the model is shown it, before a provider wraps it. `input_schema` is already the
 * exported schema (bound fields removed). `strict: false` marks a schema that strict mode cannot
 * express without changing its meaning (open maps, untyped values, tuples, recursion); exporters
 * then offer it non-strict instead of sending a schema the provider rejects. Absent means strict.
 */
export type ExportedTool = {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  strict?: boolean;
  /** What calling it does, for formats that describe behaviour (MCP annotations). */
  behavior?: { risk: Risk; builtIn: boolean };
};

export type ProviderAdapter = {
  parse(body: unknown): Result<ParsedTurn, ParseError>;
  format(results: ResultItem[]): unknown;
  exportTools(tools: ExportedTool[]): unknown[];
};

export const MAX_CALLS_PER_TURN = 64;
/** The JSON text of one call's arguments, in UTF-8 bytes. */
export const MAX_ARGUMENT_BYTES = 32 * 1024;
export const MAX_CALL_ID_LENGTH = 128;
export const MAX_TOOL_NAME_LENGTH = 128;
