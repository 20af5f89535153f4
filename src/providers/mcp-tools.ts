// The MCP format, as /mcp speaks it. Out: `tools/list` entries `{ name, description, inputSchema,
// annotations }` (the same exported schema every provider sees, so what is listed is what the gate
// enforces) and a `tools/call` result per envelope. In: nothing here — a tools/call is one call
// that /mcp posts as a one-call turn (domain/mcp-call.ts names it). Pure.
// Results (MCP 2025-11-25 and 2026-07-28, CallToolResult): the envelope is `structuredContent`
// and, serialized, the last text block (the spec's advice for clients that read only text);
// refusals and failures carry `isError: true` with their message as the first text block. Waiting
// is not failing: `pending` and `awaiting_approval` are never errors.
import { isWaitingOrSucceeded, type Envelope } from "../domain/envelope.ts";
import type { Risk } from "../domain/identity.ts";
import { resultText } from "./turn-rules.ts";
import type { ExportedTool } from "./types.ts";

/**
 * MCP ToolAnnotations. Through toolgate every write is idempotent in the spec's sense ("calling
 * the tool repeatedly with the same arguments will have no additional effect"): the same arguments
 * are the same logical operation and get its stored result, whatever the tool's own idempotency
 * mode (that mode decides only whether a lost answer can be resent, never whether a repeat runs
 * twice). Only an irreversible write is destructive; built-in tools are a closed world.
 */
export type McpAnnotations = {
  readOnlyHint: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint: boolean;
};

export type McpTool = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown> & { type: "object" };
  annotations?: McpAnnotations;
};

export type McpCallResult = {
  content: Array<{ type: "text"; text: string }>;
  structuredContent: Envelope;
  isError: boolean;
};

export function annotationsFor(risk: Risk, builtIn: boolean): McpAnnotations {
  if (risk === "read") return { readOnlyHint: true, openWorldHint: !builtIn };
  return {
    readOnlyHint: false,
    destructiveHint: risk === "irreversible_write",
    idempotentHint: true,
    openWorldHint: !builtIn,
  };
}

export function exportTools(tools: ExportedTool[]): McpTool[] {
  return tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: { ...tool.input_schema, type: "object" },
    ...(tool.behavior
      ? { annotations: annotationsFor(tool.behavior.risk, tool.behavior.builtIn) }
      : {}),
  }));
}

/**
 * One envelope as a tools/call result. `checkStatus`: the run offers toolgate_check_status, so a
 * waiting or unknown call's text says exactly how to look it up (an MCP client has no turn to poll).
 */
export function callResult(envelope: Envelope, checkStatus: boolean): McpCallResult {
  const json = { type: "text" as const, text: resultText(envelope) };
  if (envelope.status === "succeeded")
    return { content: [json], structuredContent: envelope, isError: false };
  const lookUp =
    checkStatus && envelope.allowed_next_actions.includes("check_status")
      ? ` To see its result later, call toolgate_check_status with {"operation_id": "${envelope.operation_id}"}.`
      : "";
  return {
    content: [{ type: "text", text: `${envelope.message}${lookUp}` }, json],
    structuredContent: envelope,
    isError: !isWaitingOrSucceeded(envelope),
  };
}

export const mcpTools = { exportTools };
