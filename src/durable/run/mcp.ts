// One MCP tools/call as a one-call turn: a name the run does not offer is `unknown_tool` (a
// protocol error for MCP, nothing recorded); else the call gets its id (domain/mcp-call.ts: a read
// is named by its nonce, a write by its content and the gate's inputs) and the turn that id names.
import { CHECK_STATUS, offersCheckStatus } from "../../domain/check-status.ts";
import { mcpCallId } from "../../domain/mcp-call.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ProposedCall } from "../../domain/turn/gate.ts";
import { turnIdentity, type RunState } from "../../domain/turn/turn.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { McpCall, RunError } from "./contracts.ts";

/** `checkStatus`: the run offers toolgate_check_status (the result text may point at it). */
export async function mcpTurn(
  run: RunState,
  offered: ReadonlyMap<string, ToolSpec>,
  call: McpCall,
): Promise<Result<{ proposed: ProposedCall[]; turnId: string; checkStatus: boolean }, RunError>> {
  const checkStatus = offersCheckStatus(offered.values());
  const risk = call.name === CHECK_STATUS && checkStatus ? "read" : offered.get(call.name)?.risk;
  if (!risk)
    return err({
      code: "unknown_tool",
      detail: `this run offers no tool named ${JSON.stringify(call.name)}; tools/list shows the offered tools`,
    });
  const id = await mcpCallId({
    risk,
    name: call.name,
    arguments: call.arguments,
    gate: { toolsHash: run.toolsHash, scopes: run.user.scopes },
    nonce: call.nonce,
  });
  const proposed = [{ id, name: call.name, arguments: call.arguments }];
  return ok({ proposed, turnId: (await turnIdentity(proposed)).id, checkStatus });
}
