// How one MCP `tools/call` becomes a one-call turn. MCP has no call ids (the JSON-RPC id is
// per connection: every client starts again at 0, and stateless HTTP has no session to scope it
// by), so toolgate names the call itself. Pure: the shell passes the run's gate inputs and a fresh
// nonce; no clock, no randomness here.
// - A write is named by its content: the same tool with the same arguments under the same gate
//   inputs (offered tools and scopes) is the same call id, hence the same turn, so a client that
//   repeats a tools/call gets the stored result without a second effect, a second turn or a
//   second tool-call reservation. Arguments that differ are another call (and, with a business
//   key, an idempotency_conflict). The gate inputs are part of the name so that after a PATCH of
//   the run's scopes or tools a repeat is judged again instead of replaying a stale refusal (its
//   operation id, derived from content alone, still deduplicates the effect).
// - A read (and toolgate_check_status, whose answer is a snapshot) is named by the nonce: reads are
//   safe to repeat (DESIGN: for reads the key is the call id) and a repeat must see fresh data.
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import type { Risk } from "./identity.ts";

export type McpCallNaming = {
  risk: Risk;
  name: string;
  arguments: Record<string, unknown>;
  /** The run's gate inputs: its offered tools' content hash and the user's scopes. */
  gate: { toolsHash: string; scopes: readonly string[] };
  /** A fresh unique id from the shell (a ulid), used for reads only. */
  nonce: string;
};

export async function mcpCallId(call: McpCallNaming): Promise<string> {
  if (call.risk === "read") return `mcp_r_${call.nonce}`;
  const digest = await sha256Hex(
    canonicalJson([call.gate.toolsHash, [...call.gate.scopes].sort(), call.name, call.arguments]),
  );
  return `mcp_w_${digest.slice(0, 40)}`;
}

/**
 * The key a client's cancellation names its request by: the JSON-RPC id as canonical JSON, so
 * the number 1 and the string "1" (both legal ids) stay distinct.
 */
export const mcpRequestKey = (requestId: string | number): string => canonicalJson(requestId);

/** One MCP call in flight at its run: its request, its caller's session (if any), its turn. */
export type McpInFlight = {
  /** The shell's fresh id for this very call (the same nonce that names a read). */
  nonce: string;
  requestKey: string;
  /** The caller's `Mcp-Session-Id`, when its transport has one; null: none. */
  session: string | null;
  turnId: string;
};

/**
 * What a cancellation names: the call whose request stream closed (its nonce: exact), or a
 * JSON-RPC request id a caller sent in `notifications/cancelled`, with that caller's session.
 */
export type McpCancelTarget = { nonce: string } | { requestKey: string; session: string | null };

/**
 * The call a cancellation closes, or null. JSON-RPC ids are per client (every client starts at 0
 * or 1), so a request id names a call only within its caller's session: the one call in flight
 * under that id and session. Two or more such calls (callers without a session, which cannot be
 * told apart) are ambiguous: none is closed, since closing another client's call is worse than
 * ignoring a cancellation, which MCP allows a server to do.
 */
export function cancelledCall(
  inFlight: Iterable<McpInFlight>,
  target: McpCancelTarget,
): McpInFlight | null {
  const matching = [...inFlight].filter((call) =>
    "nonce" in target
      ? call.nonce === target.nonce
      : call.requestKey === target.requestKey && call.session === target.session,
  );
  return matching.length === 1 ? matching[0]! : null;
}
