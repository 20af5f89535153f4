// The provider formats toolgate speaks, by name. `adapters[format]` parses a posted turn, formats
// its results and exports tools; `exportFormats[format]` exports tools for every format including
// MCP. `toExportedTool` is the one place a tool definition becomes what the model sees: bound
// fields removed, a strict-mode schema when strict mode can express it, else the plain schema
// offered non-strict (a schema a provider rejects would fail the agent's whole request).
import type { ToolDefinition } from "../tools/spec.ts";
import { anthropic } from "./anthropic.ts";
import { mcpTools } from "./mcp-tools.ts";
import { native } from "./native.ts";
import { openaiChat } from "./openai-chat.ts";
import { openaiResponses } from "./openai-responses.ts";
import { toStrictSchema, withoutBound } from "./strict-schema.ts";
import type { ExportedTool, ExportFormat, ProviderAdapter, ProviderFormat } from "./types.ts";

export type {
  ExportedTool,
  ExportFormat,
  ParsedTurn,
  ParseError,
  ProviderAdapter,
  ProviderFormat,
  ResultItem,
} from "./types.ts";

export const adapters: Record<ProviderFormat, ProviderAdapter> = {
  anthropic,
  "openai-responses": openaiResponses,
  "openai-chat": openaiChat,
  native,
};

export const exportFormats: Record<ExportFormat, (tools: ExportedTool[]) => unknown[]> = {
  anthropic: anthropic.exportTools,
  "openai-responses": openaiResponses.exportTools,
  "openai-chat": openaiChat.exportTools,
  native: native.exportTools,
  mcp: mcpTools.exportTools,
};

export function toExportedTool(definition: ToolDefinition): ExportedTool {
  const exported = toStrictSchema(definition.inputJsonSchema, definition.bound);
  const input_schema = exported.strict
    ? exported.schema
    : withoutBound(definition.inputJsonSchema, definition.bound);
  return {
    name: definition.name,
    description: definition.description,
    input_schema,
    strict: exported.strict,
    behavior: { risk: definition.risk, builtIn: definition.builtIn },
  };
}

/** Tool definitions as `format` lists them: `exportFormats[format](definitions.map(toExportedTool))`. */
export function exportTools(definitions: ToolDefinition[], format: ExportFormat): unknown[] {
  return exportFormats[format](definitions.map(toExportedTool));
}
