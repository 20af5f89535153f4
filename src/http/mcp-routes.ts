// /mcp: the run's tools over MCP Streamable HTTP, with the official SDK's web-standard entry
// (`createMcpHandler`: 2026-07-28 per-request envelopes, and 2025-era clients up to 2025-11-25
// served statelessly). In front: Host/Origin validation, then the run token, before any JSON-RPC
// is read. `tools/list` is the run's export in the MCP format; `tools/call` is a one-call turn
// posted to the RunObject (identity, dedup, policy, budgets and approvals are the turn engine's).
// A client's cancellation — `notifications/cancelled` (2025 era; stateless, so it arrives as its
// own POST) or the request's stream closing (2026 era) — closes that call like POST /cancel.
// Waiting for a person is a readable, non-error result pointing at toolgate_check_status, never
// a 2026 `input_required`: that asks the client's own user, while an approval must come from a
// person holding approvals:decide (by default not the run's user), and nothing a client answers
// may count as one. The one input_required: a call waiting for its user to connect (issue 36), toward
// a 2026-era client declaring URL-mode elicitation, asks that client to open the link. Tasks: SDK 2.x removed the 2025-11-25 experimental tasks (SEP-2663), so no
// tasks capability is declared and every call is answered as a plain call.
import {
  CLIENT_CAPABILITIES_META_KEY,
  createMcpHandler,
  inputRequired,
  ProtocolError,
  ProtocolErrorCode,
  Server,
} from "@modelcontextprotocol/server";
import { Hono, type Context } from "hono";
import { ulid } from "ulid";
import { mcpRequestKey, type McpCancelTarget } from "../domain/mcp-call.ts";
import type { RunError } from "../durable/run/contracts.ts";
import type { Result } from "../domain/result.ts";
import { exportTools } from "../providers/index.ts";
import { callResult } from "../providers/mcp-tools.ts";
import { checkCalls } from "../providers/turn-rules.ts";
import { jsonTextProblem } from "../domain/strict-json.ts";
import { authenticateRun, type AppEnv } from "./auth.ts";
import { mcpGuard } from "./mcp-guard.ts";
import { ApiProblem, jsonRpcCodeOf, toApiError } from "./problem.ts";
import { DEFAULT_TURN_WAIT_MS, MAX_BODY_BYTES, runStub } from "./request.ts";

const SERVER_INFO = { name: "toolgate", version: "0.1.0" };
const INSTRUCTIONS =
  "Every tool runs through toolgate: a repeated call with the same arguments gets the stored result and never acts twice. A result that says it is waiting (for a person, or for the tool) is not an error: do not call it again; toolgate_check_status with its operation_id shows the current result.";

export const mcpRoutes = new Hono<AppEnv>().all("/", async (c) => {
  const refused = mcpGuard(
    c.env,
    c.req.header("Host") ?? new URL(c.req.url).host,
    c.req.header("Origin") ?? null,
  );
  if (refused) throw new ApiProblem(refused);
  const { tenantId, runId } = await authenticateRun(c);
  const refusedBody = await strictBodyProblem(c.req.raw);
  if (refusedBody) return refusedBody;
  const handler = createMcpHandler(() => mcpServer(c, tenantId, runId), {
    maxRequestBodySize: MAX_BODY_BYTES,
    onerror: (error) => console.error("mcp", error),
  });
  return handler.fetch(c.req.raw);
});

/**
 * The same door as every other JSON body (domain/strict-json.ts): duplicate keys, lone surrogates,
 * `__proto__` and deep nesting are refused, here as a JSON-RPC parse error before the SDK reads
 * the body. Text JSON.parse itself rejects is left to the SDK's own -32700.
 */
async function strictBodyProblem(request: Request): Promise<Response | null> {
  if (request.method !== "POST") return null;
  const text = await request.clone().text();
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  const problem = jsonTextProblem(text);
  if (!problem) return null;
  return Response.json(
    {
      jsonrpc: "2.0",
      id: null,
      error: { code: ProtocolErrorCode.ParseError, message: `the body is refused: ${problem}` },
    },
    { status: 400 },
  );
}

/** A fresh low-level server per request (the SDK's factory model): the tool set is the run's, computed per request. */
function mcpServer(c: Context<AppEnv>, tenantId: string, runId: string): Server {
  const run = runStub(c, runId);
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {} },
    instructions: INSTRUCTIONS,
  });
  // Cancelling needs the run after the response is sent (a notification is answered 202 at once).
  // A request id names a call only within its caller's session (every client numbers from 0 or
  // 1): a closed stream names its own call exactly, by its nonce (domain/mcp-call.ts).
  const session = c.req.header("Mcp-Session-Id") ?? null;
  const cancel = (target: McpCancelTarget) =>
    c.executionCtx.waitUntil(
      run.mcpCancel(tenantId, target, `mcp:${runId}`).catch((error) => {
        console.error("mcp cancel", error);
      }),
    );

  server.setRequestHandler("tools/list", async (request) => {
    // One page, no cursors: any cursor is one toolgate never issued.
    if (request.params?.cursor !== undefined)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        "tools/list has one page; send no cursor",
      );
    const tools = rpc(await run.toolDefinitions(tenantId));
    return { tools: exportTools(tools, "mcp") as never };
  });

  server.setRequestHandler("tools/call", async (request, ctx) => {
    const { name } = request.params;
    const args = request.params.arguments ?? {};
    const requestId = ctx.mcpReq.id;
    // The rules every turn format shares (the argument size cap among them).
    const checked = checkCalls([{ id: String(requestId), name, arguments: args }], null);
    if (!checked.ok) throw new ProtocolError(ProtocolErrorCode.InvalidParams, checked.error.detail);
    const nonce = ulid();
    const onAbort = () => cancel({ nonce });
    ctx.mcpReq.signal.addEventListener("abort", onAbort, { once: true });
    try {
      const reply = await run.mcpCall(
        tenantId,
        { requestKey: mcpRequestKey(requestId), session, name, arguments: args, nonce },
        DEFAULT_TURN_WAIT_MS,
      );
      const { envelope, checkStatus } = rpc(reply);
      const connect = connectElicitation(envelope, ctx.mcpReq);
      return connect ?? callResult(envelope, checkStatus);
    } finally {
      ctx.mcpReq.signal.removeEventListener("abort", onAbort);
    }
  });

  server.setNotificationHandler("notifications/cancelled", (notification) => {
    const { requestId } = notification.params;
    if (requestId !== undefined) cancel({ requestKey: mcpRequestKey(requestId), session });
  });
  return server;
}

/**
 * Acting as the user (issue 36): a call waiting for its user to connect, toward a 2026-era client
 * that declared URL-mode elicitation, asks that client to open the connect link (the user's own
 * browser: no token or code passes through the client). Its retry is the same call, deduplicated,
 * answered as it then stands; a retry carrying the client's answer is never asked again. A
 * 2025-era client is served statelessly, so its capabilities are unknown at tools/call: it reads
 * the link in the result, as every other client does.
 */
function connectElicitation(
  envelope: Parameters<typeof callResult>[0],
  req: { envelope?: object; inputResponses?: Record<string, unknown> },
) {
  if (envelope.status !== "pending" || envelope.code !== "credential_required") return null;
  if (!envelope.connect_url || req.inputResponses?.connect !== undefined) return null;
  const capabilities = (req.envelope as Record<string, unknown> | undefined)?.[
    CLIENT_CAPABILITIES_META_KEY
  ] as { elicitation?: { url?: unknown } } | undefined;
  if (typeof capabilities?.elicitation?.url !== "object") return null;
  return inputRequired({
    inputRequests: {
      connect: inputRequired.elicitUrl({ message: envelope.message, url: envelope.connect_url }),
    },
  });
}

/** A RunObject error as a JSON-RPC error, through the one error map. */
function rpc<T>(result: Result<T, RunError>): T {
  if (result.ok) return result.value;
  const error = toApiError(result.error);
  throw new ProtocolError(jsonRpcCodeOf(error), error.detail);
}
