// One MCP tools/call as a one-call turn: a name the run does not offer is `unknown_tool` (a
// protocol error for MCP, nothing recorded); else the call gets its id (domain/mcp-call.ts: a read
// is named by its nonce, a write by its content and the gate's inputs) and the turn that id names.
// McpCalls: the bodies of RunObject.mcpCall/mcpCancel over the calls in flight (memory only).
import { CHECK_STATUS, offersCheckStatus } from "../../domain/check-status.ts";
import {
  cancelledCall,
  mcpCallId,
  type McpCancelTarget,
  type McpInFlight,
} from "../../domain/mcp-call.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ProposedCall } from "../../domain/turn/gate.ts";
import { openOperations, turnIdentity, type RunState } from "../../domain/turn/turn.ts";
import type { Wait } from "../../domain/wait.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import { close } from "./close.ts";
import type { McpCall, McpCallReply, RunError, TurnReply, RunParts } from "./contracts.ts";
import { compileTools } from "../../tools/catalog.ts";
import { hostPolicy } from "../../config.ts";

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

/** The RunObject RPC an MCP call goes through, as any turn does. */
export type TurnPort = {
  postTurn(
    tenantId: string,
    calls: ProposedCall[],
    modelCost: number,
    wait: Wait,
    group: null,
    format: string,
  ): Promise<Result<TurnReply, RunError>>;
};

/** The bodies of RunObject.mcpCall and RunObject.mcpCancel, with the calls in flight they share. */
export class McpCalls {
  /** MCP calls in flight, by nonce: memory is the truth (an evicted object has no live call left
   * to cancel; MCP lets a server ignore a cancellation of an unknown request). */
  private readonly inFlight = new Map<string, McpInFlight>();

  constructor(private readonly parts: RunParts) {}

  /** Admitted and dispatched without waiting; only a call still executing is waited for (up to `waitMs`). */
  async call(
    turns: TurnPort,
    tenantId: string,
    call: McpCall,
    waitMs: number,
  ): Promise<Result<McpCallReply, RunError>> {
    const run = this.parts.rows.loadFor(tenantId);
    if (!run) return this.parts.rows.missing(tenantId);
    const turn = await mcpTurn(run, compileTools(run.tools, hostPolicy(this.parts.env)), call);
    if (!turn.ok) return turn;
    const { proposed, turnId, checkStatus } = turn.value;
    this.inFlight.set(call.nonce, {
      nonce: call.nonce,
      requestKey: call.requestKey,
      session: call.session,
      turnId,
    });
    try {
      const wait = { ms: waitMs, holdForPeople: false };
      const reply = await turns.postTurn(tenantId, proposed, 0, wait, null, "mcp");
      if (!reply.ok) return reply;
      const envelope = reply.value.results[0]?.envelope;
      return envelope
        ? ok({ envelope, checkStatus })
        : err({ code: "invalid_request", detail: "the call has no result" });
    } finally {
      this.inFlight.delete(call.nonce);
    }
  }

  /**
   * Closes the open calls of the turn the named request started (domain/mcp-call.ts
   * `cancelledCall`: that caller's own call only); false when no call, or no single one, is named.
   */
  async cancel(
    tenantId: string,
    target: McpCancelTarget,
    by: string,
  ): Promise<Result<boolean, RunError>> {
    if (!this.parts.rows.loadFor(tenantId)) return this.parts.rows.missing(tenantId);
    const call = cancelledCall(this.inFlight.values(), target);
    const turn = call ? this.parts.rows.turn(call.turnId) : null;
    if (!turn) return ok(false);
    for (const operationId of openOperations(turn))
      await close(this.parts, tenantId, operationId, by);
    return ok(true);
  }
}
