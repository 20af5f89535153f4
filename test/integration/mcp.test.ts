// /mcp through the public HTTP API, in both protocol eras (2025-11-25 stateless, 2026-07-28
// per-request envelopes): tools/list is the run's export with annotations; tools/call is a turn
// (counted at the upstream: a repeated write adds no effect); failures are isError results with the
// envelope; waiting is readable and not an error; protocol errors are JSON-RPC errors that change
// nothing; Host/Origin and the run token are checked before anything runs; cancellation closes
// the call like POST /cancel.
import { describe, expect, it } from "vitest";
import { hmac } from "../../src/crypto.ts";
import { ADMIN, api, trace } from "../support/api.ts";
import { callTool, envelope, LEGACY, mcpPost, mcpRun, MODERN, rpc, usage } from "../support/mcp.ts";

const CHECK = "toolgate_check_status";

describe("MCP tools/list", () => {
  it("lists the offered tools with bound arguments removed, annotations from risk, and toolgate_check_status; both eras, the same export as GET /tools?format=mcp", async () => {
    const { runId, token, lookup, charge, refund } = await mcpRun();
    const legacy = await rpc(token, "tools/list");
    expect(legacy.status).toBe(200);
    const tools = legacy.body.result.tools as any[];
    expect(tools.map((t) => t.name)).toEqual([lookup, charge, refund, CHECK]);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(byName[lookup].annotations).toEqual({ readOnlyHint: true, openWorldHint: true });
    expect(byName[charge].annotations).toEqual({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: true,
    });
    expect(byName[refund].annotations).toMatchObject({ destructiveHint: true });
    expect(byName[CHECK].annotations).toEqual({ readOnlyHint: true, openWorldHint: false });
    expect(Object.keys(byName[charge].inputSchema.properties)).toEqual(["amount", "currency"]);
    expect(JSON.stringify(tools)).not.toContain("customer_id");

    const exported = await api("GET", `/v1/runs/${runId}/tools?format=mcp`);
    expect(tools).toEqual(exported.body.tools);
    const modern = await rpc(token, "tools/list", {}, "modern");
    expect(modern.status).toBe(200);
    expect(modern.body.result.tools).toEqual(tools);
  });

  it("a cursor toolgate never issued is invalid params", async () => {
    const { token } = await mcpRun();
    const res = await rpc(token, "tools/list", { cursor: "page2" });
    expect(res.body.error.code).toBe(-32602);
  });
});

describe("MCP tools/call", () => {
  it("a read runs and returns its result; repeating it reads again (reads are safe to repeat)", async () => {
    const { up, token, lookup } = await mcpRun();
    const res = await callTool(token, lookup, { order_id: "ord_1" });
    expect(res.body.result).toMatchObject({
      isError: false,
      structuredContent: { status: "succeeded", result: { id: "ord_1", status: "ok" } },
    });
    expect(JSON.parse(res.body.result.content[0].text)).toEqual(res.body.result.structuredContent);
    await callTool(token, lookup, { order_id: "ord_1" });
    expect((await up.state()).requests.map((r) => r.path)).toEqual([
      expect.stringMatching(/\/orders\/ord_1$/),
      expect.stringMatching(/\/orders\/ord_1$/),
    ]);
  });

  it("a write runs once; the same call repeated (another request id, the other era) gets the stored result: one effect, one turn, one tool call", async () => {
    const { up, runId, token, charge } = await mcpRun();
    const first = await callTool(token, charge, { amount: 500, currency: "usd" });
    expect(first.body.result).toMatchObject({
      isError: false,
      structuredContent: {
        status: "succeeded",
        result: { amount: 500, customer_id: "cus_1" },
      },
    });
    const again = await callTool(token, charge, { amount: 500, currency: "usd" });
    const modern = await callTool(token, charge, { currency: "usd", amount: 500 }, "modern");
    expect(again.body.result.structuredContent).toEqual(first.body.result.structuredContent);
    expect(modern.body.result.structuredContent).toEqual(first.body.result.structuredContent);
    const state = await up.state();
    expect(state.effects.map((e) => e.id)).toEqual([first.body.result.structuredContent.result.id]);
    expect(state.requests).toHaveLength(1);
    expect(await usage(runId)).toMatchObject({ turns: 1, tool_calls: 1 });

    const other = await callTool(token, charge, { amount: 700, currency: "usd" });
    expect(other.body.result.structuredContent.result.amount).toBe(700);
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("a failing tool is an isError result: the honest message as text, the envelope as structuredContent", async () => {
    const { up, token, charge } = await mcpRun();
    await up.script({ kind: "status", status: 404 });
    const res = await callTool(token, charge, { amount: 5, currency: "usd" });
    const result = res.body.result;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      status: "failed",
      code: "permanent_failure",
      allowed_next_actions: ["tell_user"],
    });
    expect(result.content[0].text).toBe(result.structuredContent.message);
    expect(JSON.parse(result.content[1].text)).toEqual(result.structuredContent);
  });

  it("arguments the schema refuses are a tool result (isError, invalid_arguments), not a protocol error, and nothing is sent", async () => {
    const { up, token, charge } = await mcpRun();
    const res = await callTool(token, charge, { amount: -1, currency: "usd", customer_id: "x" });
    expect(res.body.result.isError).toBe(true);
    expect(res.body.result.structuredContent).toMatchObject({
      status: "rejected",
      code: "invalid_arguments",
    });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("awaiting approval is a readable, non-error result pointing at toolgate_check_status; after the approval the status tool shows the result and the repeated call gets it, one effect", async () => {
    const { up, token, refund } = await mcpRun();
    const waiting = await callTool(token, refund, { amount: 250, currency: "usd" });
    const result = waiting.body.result;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toMatchObject({
      status: "awaiting_approval",
      code: "approval_required",
    });
    const operationId = result.structuredContent.operation_id as string;
    expect(result.content[0].text).toMatch(/A person must approve this call/);
    expect(result.content[0].text).toContain(
      `call toolgate_check_status with {"operation_id": "${operationId}"}`,
    );
    expect((await up.state()).requests).toHaveLength(0);

    const stillWaiting = await callTool(token, CHECK, { operation_id: operationId });
    expect(stillWaiting.body.result.structuredContent.result.status).toBe("awaiting_approval");

    expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
    await api("GET", `/v1/operations/${operationId}?wait=5`);
    const status = await callTool(token, CHECK, { operation_id: operationId });
    expect(status.body.result).toMatchObject({
      isError: false,
      structuredContent: {
        status: "succeeded",
        result: { status: "succeeded", operation_id: operationId, result: { amount: 250 } },
      },
    });
    const repeated = await callTool(token, refund, { amount: 250, currency: "usd" }, "modern");
    expect(repeated.body.result.structuredContent).toMatchObject({
      status: "succeeded",
      operation_id: operationId,
    });
    expect((await up.state()).effects).toHaveLength(1);
  });
});

describe("MCP protocol errors change nothing", () => {
  it("malformed JSON, an unknown method, bad params and an unknown tool are JSON-RPC errors; no turn, no request upstream", async () => {
    const { up, runId, token, charge } = await mcpRun();
    const parse = await mcpPost(token, "{not json", { "MCP-Protocol-Version": LEGACY });
    expect(parse.body.error.code).toBe(-32700);
    const method = await rpc(token, "tools/destroy");
    expect(method.body.error.code).toBe(-32601);
    const noName = await rpc(token, "tools/call", { arguments: {} });
    expect(noName.body.error.code).toBe(-32602);
    const badArgs = await rpc(token, "tools/call", { name: charge, arguments: "amount=5" });
    expect(badArgs.body.error.code).toBe(-32602);
    const unknown = await callTool(token, "transfer_everything", {});
    expect(unknown.body.error).toMatchObject({ code: -32602 });
    expect(unknown.body.error.message).toMatch(/offers no tool named "transfer_everything"/);
    const duplicate = await mcpPost(
      token,
      `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"${charge}","arguments":{"amount":1,"amount":900,"currency":"usd"}}}`,
      { "MCP-Protocol-Version": LEGACY },
    );
    expect(duplicate.status).toBe(400);
    expect(duplicate.body.error).toMatchObject({ code: -32700 });
    expect(duplicate.body.error.message).toMatch(/refused: .*amount/);
    const huge = await callTool(token, charge, {
      amount: 1,
      currency: "usd",
      pad: "x".repeat(40_000),
    });
    expect(huge.body.error.code).toBe(-32602);
    expect(huge.body.error.message).toMatch(/exceed 32768 bytes/);
    const modernUnknown = await callTool(token, "transfer_everything", {}, "modern");
    expect(modernUnknown.body.error).toMatchObject({ code: -32602 });

    expect(await usage(runId)).toMatchObject({ turns: 0, tool_calls: 0 });
    expect((await trace(runId)).filter((e) => e.type === "turn_received")).toHaveLength(0);
    expect((await up.state()).requests).toHaveLength(0);
  });
});

describe("MCP in front of the engine", () => {
  it("no token, a forged or expired run token: 401; the admin token: 403 problem+json with WWW-Authenticate, nothing executed", async () => {
    const { up, runId, token, charge } = await mcpRun();
    const body = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: charge, arguments: { amount: 5, currency: "usd" } },
    };
    const none = await mcpPost(null, body);
    expect(none.status).toBe(401);
    expect(none.headers.get("Content-Type")).toBe("application/problem+json");
    expect(none.headers.get("WWW-Authenticate")).toMatch(/^Bearer /);
    expect(none.body.code).toBe("unauthorized");
    const forged = await mcpPost(`${token.slice(0, -4)}abcd`, body);
    expect(forged.status).toBe(401);
    expect(forged.body.code).toBe("unauthorized");
    const [, tenant] = token.split(".");
    const payload = `${tenant}.${runId}.${Date.now() - 1000}`;
    const expired = await mcpPost(`rt.${payload}.${await hmac("test-signing-key", payload)}`, body);
    expect(expired.status).toBe(401);
    const admin = await mcpPost(ADMIN, body);
    expect(admin.status).toBe(403);
    expect(admin.body.code).toBe("forbidden");
    expect((await up.state()).requests).toHaveLength(0);
    expect(await usage(runId)).toMatchObject({ turns: 0 });
  });

  it("a browser Origin that is not allowed, or a Host that is not, is 403 before anything runs; the own origin is fine", async () => {
    const { up, token, charge } = await mcpRun();
    const body = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: charge, arguments: { amount: 5, currency: "usd" } },
    };
    const evil = await mcpPost(token, body, { Origin: "https://evil.example" });
    expect(evil.status).toBe(403);
    expect(evil.body).toMatchObject({ code: "origin_not_allowed" });
    const opaque = await mcpPost(token, body, { Origin: "null" });
    expect(opaque.body).toMatchObject({ code: "origin_not_allowed" });
    const rebound = await mcpPost(token, body, { Host: "attacker.example" });
    expect(rebound.status).toBe(403);
    expect(rebound.body).toMatchObject({ code: "host_not_allowed" });
    expect((await up.state()).requests).toHaveLength(0);
    const own = await mcpPost(token, body, {
      Origin: "http://toolgate.test",
      "MCP-Protocol-Version": LEGACY,
    });
    expect(own.body.result.structuredContent.status).toBe("succeeded");
  });
});

describe("MCP cancellation", () => {
  it("notifications/cancelled for a call in flight closes it like POST /cancel: the call answers cancelled, the late result stays on the operation", async () => {
    const { up, token, charge } = await mcpRun({ charge: { timeout_ms: 5000 } });
    await up.script({ kind: "slow", delayMs: 1500 });
    const inFlight = callTool(token, charge, { amount: 9, currency: "usd" }, "legacy", "req-9");
    await up.waitForRequests(1);
    const cancelled = await mcpPost(
      token,
      {
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: "req-9", reason: "user pressed stop" },
      },
      { "MCP-Protocol-Version": LEGACY },
    );
    expect(cancelled.status).toBe(202);
    const result = (await inFlight).body.result;
    expect(result).toMatchObject({ isError: true, structuredContent: { status: "cancelled" } });
    expect(result.content[0].text).toMatch(/may still complete/);
    const op = await api("GET", `/v1/operations/${result.structuredContent.operation_id}?wait=5`);
    expect(op.body.result).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("a 2026-era client closing the call's stream cancels it the same way: the same call repeated says cancelled", async () => {
    const { up, token, charge } = await mcpRun({ charge: { timeout_ms: 5000 } });
    await up.script({ kind: "slow", delayMs: 1500 });
    const controller = new AbortController();
    const inFlight = mcpPost(
      token,
      {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: charge, arguments: { amount: 11, currency: "usd" }, _meta: envelope },
      },
      { "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": charge },
      controller.signal,
    );
    await up.waitForRequests(1);
    controller.abort();
    await expect(inFlight).rejects.toThrow();
    const repeated = await callTool(token, charge, { amount: 11, currency: "usd" });
    expect(repeated.body.result.structuredContent).toMatchObject({ status: "cancelled" });
  });

  it("two 2026-era clients on one run token, both with JSON-RPC id 1: one closing its stream cancels its own call only", async () => {
    const { up, token, charge } = await mcpRun({ charge: { timeout_ms: 5000 } });
    await up.script({ kind: "slow", delayMs: 1500 }, { kind: "slow", delayMs: 1500 });
    const modern = (amount: number, signal?: AbortSignal) =>
      mcpPost(
        token,
        {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: charge, arguments: { amount, currency: "usd" }, _meta: envelope },
        },
        { "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": charge },
        signal,
      );
    const controller = new AbortController();
    const mine = modern(21, controller.signal);
    await up.waitForRequests(1);
    const theirs = modern(22);
    await up.waitForRequests(2);
    controller.abort();
    await expect(mine).rejects.toThrow();
    // The other client's call with the same id ran to its end; the closed one says cancelled.
    expect((await theirs).body.result.structuredContent).toMatchObject({ status: "succeeded" });
    const repeated = await callTool(token, charge, { amount: 21, currency: "usd" });
    expect(repeated.body.result.structuredContent).toMatchObject({ status: "cancelled" });
    expect((await up.state()).effects).toHaveLength(2);
  });

  it("two 2025-era clients, both with JSON-RPC id 1: notifications/cancelled closes the call of the sender's own session only, and none when the senders cannot be told apart", async () => {
    const { up, token, charge } = await mcpRun({ charge: { timeout_ms: 5000 } });
    await up.script(...Array.from({ length: 4 }, () => ({ kind: "slow", delayMs: 1500 })));
    const legacy = (body: unknown, session: string | null) =>
      mcpPost(token, body, {
        "MCP-Protocol-Version": LEGACY,
        ...(session ? { "Mcp-Session-Id": session } : {}),
      });
    const call = (amount: number, session: string | null) =>
      legacy(
        {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: charge, arguments: { amount, currency: "usd" } },
        },
        session,
      );
    const cancel = (session: string | null) =>
      legacy(
        { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } },
        session,
      );
    const status = async (reply: ReturnType<typeof call>) =>
      (await reply).body.result.structuredContent.status;

    // No session on either: the cancellation of id 1 could be either's, so it closes neither.
    const a = call(31, null);
    await up.waitForRequests(1);
    const b = call(32, null);
    await up.waitForRequests(2);
    expect((await cancel(null)).status).toBe(202);
    expect([await status(a), await status(b)]).toEqual(["succeeded", "succeeded"]);

    // Each its own session: the sender's call is closed, the other's runs to its end.
    const c = call(33, "session-c");
    await up.waitForRequests(3);
    const d = call(34, "session-d");
    await up.waitForRequests(4);
    expect((await cancel("session-c")).status).toBe(202);
    expect([await status(c), await status(d)]).toEqual(["cancelled", "succeeded"]);
  });

  it("a cancellation for a request already answered changes nothing", async () => {
    const { token, refund } = await mcpRun();
    const waiting = await callTool(token, refund, { amount: 1, currency: "usd" }, "legacy", 77);
    const operationId = waiting.body.result.structuredContent.operation_id;
    await mcpPost(
      token,
      { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 77 } },
      { "MCP-Protocol-Version": LEGACY },
    );
    const op = await api("GET", `/v1/operations/${operationId}`);
    expect(op.body.phase).toBe("awaiting_approval");
  });
});
