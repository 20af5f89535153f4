// The provider formats toolgate speaks, by name. `adapters[format]` parses a posted turn, formats
// its results and exports tools; `exportFormats[format]` exports tools for every format including
// MCP. `toExportedTool` is the one place a tool definition becomes what the model sees: bound
// fields removed, a strict-mode schema when strict mode can express it, else the plain schema
// offered non-strict (a schema a provider rejects would fail the agent's whole request). Each
// format gets the schema its provider's strict mode accepts as it is (`schemaProfiles`).
import type { ToolDefinition } from "../tools/spec.ts";
import { anthropic } from "./anthropic.ts";
import { mcpTools } from "./mcp-tools.ts";
import { native } from "./native.ts";
import { openaiChat } from "./openai-chat.ts";
import { openaiResponses } from "./openai-responses.ts";
import { toStrictSchema, withoutBound, type SchemaProfile } from "./strict-schema.ts";
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

/** Whose strict mode each export is shaped for: native and MCP tools go to any model. */
export const schemaProfiles: Record<ExportFormat, SchemaProfile> = {
  anthropic: "anthropic",
  "openai-responses": "openai",
  "openai-chat": "openai",
  native: "portable",
  mcp: "portable",
};

export function toExportedTool(
  definition: ToolDefinition,
  profile: SchemaProfile = "portable",
): ExportedTool {
  const exported = toStrictSchema(definition.inputJsonSchema, definition.bound, profile);
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

/** Tool definitions as `format` lists them, each schema shaped for that format's provider. */
export function exportTools(definitions: ToolDefinition[], format: ExportFormat): unknown[] {
  const profile = schemaProfiles[format];
  return exportFormats[format](definitions.map((d) => toExportedTool(d, profile)));
}
