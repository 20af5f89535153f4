// MCP `tools/list` export: `{ name, description, inputSchema }` per tool (MCP has no strict flag;
// the schema is the same exported one, so every client sees the same contract). Export only:
// MCP calls arrive one at a time through /mcp `tools/call`, not as posted turns.
import type { ExportedTool } from "./types.ts";

export type McpTool = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown> & { type: "object" };
};

export function exportTools(tools: ExportedTool[]): McpTool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: { ...tool.input_schema, type: "object" },
  }));
}

export const mcpTools = { exportTools };
