// The provider formats toolgate speaks, by name: turn parsing/formatting and tool export.
import type { ToolDefinition } from "../tools/spec.ts";
import { anthropic } from "./anthropic.ts";
import { native } from "./native.ts";
import { openaiChat } from "./openai-chat.ts";
import { openaiResponses } from "./openai-responses.ts";
import { exportSchema } from "./strict-schema.ts";
import type { ToolsFormat, TurnAdapter, TurnFormat } from "./types.ts";

export const adapters: Record<TurnFormat, TurnAdapter> = {
  anthropic,
  "openai-responses": openaiResponses,
  "openai-chat": openaiChat,
  native,
};

/** Tool definitions for the model: bound arguments removed, strict-mode schemas. */
export function exportTools(tools: ToolDefinition[], format: ToolsFormat): unknown[] {
  return tools.map((spec) => {
    const parameters = exportSchema(spec.inputJsonSchema, spec.bound);
    switch (format) {
      case "anthropic":
        return { name: spec.name, description: spec.description, input_schema: parameters, strict: true };
      case "openai-responses":
        return { type: "function", name: spec.name, description: spec.description, parameters, strict: true };
      case "openai-chat":
        return { type: "function", function: { name: spec.name, description: spec.description, parameters, strict: true } };
      case "mcp":
        return { name: spec.name, description: spec.description, inputSchema: parameters };
      case "native":
        return { name: spec.name, description: spec.description, input_schema: parameters };
    }
  });
}
