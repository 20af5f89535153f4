// MCP's pure parts as tables: how a tools/call is named (writes by content and gate inputs, reads
// by nonce), tool annotations from risk, envelopes as call results (waiting is not failing), the
// Host/Origin guard, and which API errors are JSON-RPC invalid params.
import { describe, expect, it } from "vitest";
import { refusal, type Envelope } from "../../src/domain/envelope.ts";
import {
  cancelledCall,
  mcpCallId,
  mcpRequestKey,
  type McpCallNaming,
  type McpCancelTarget,
  type McpInFlight,
} from "../../src/domain/mcp-call.ts";
import { mcpGuard } from "../../src/http/mcp-guard.ts";
import { jsonRpcCodeOf } from "../../src/http/problem.ts";
import { annotationsFor, callResult } from "../../src/providers/mcp-tools.ts";
import type { Env } from "../../src/durable/env.ts";

const write: McpCallNaming = {
  risk: "write",
  name: "charge",
  arguments: { amount: 5, currency: "usd" },
  gate: { toolsHash: "h1", scopes: ["a", "b"] },
  nonce: "01N0NCE",
};

describe("mcpCallId", () => {
  it("names a write by tool, arguments and gate inputs; a read by the nonce", async () => {
    const id = await mcpCallId(write);
    expect(id).toMatch(/^mcp_w_[0-9a-f]{40}$/);
    const same = [
      { ...write, nonce: "other" },
      { ...write, arguments: { currency: "usd", amount: 5 } },
      { ...write, gate: { toolsHash: "h1", scopes: ["b", "a"] } },
      { ...write, risk: "irreversible_write" as const },
    ];
    for (const call of same) expect(await mcpCallId(call)).toBe(id);
    const other = [
      { ...write, arguments: { amount: 6, currency: "usd" } },
      { ...write, name: "refund" },
      { ...write, gate: { toolsHash: "h2", scopes: ["a", "b"] } },
      { ...write, gate: { toolsHash: "h1", scopes: ["a"] } },
    ];
    for (const call of other) expect(await mcpCallId(call)).not.toBe(id);
    expect(await mcpCallId({ ...write, risk: "read" })).toBe("mcp_r_01N0NCE");
  });

  it('keeps the number 1 and the string "1" apart as request keys', () => {
    expect(mcpRequestKey(1)).not.toBe(mcpRequestKey("1"));
  });
});

describe("cancelledCall", () => {
  const one = mcpRequestKey(1);
  const call = (nonce: string, session: string | null, requestKey = one): McpInFlight => ({
    nonce,
    requestKey,
    session,
    turnId: `turn_${nonce}`,
  });
  // In flight: two clients without a session both at id 1, two with sessions at id 1, one at id 2.
  const inFlight = [
    call("n1", null),
    call("n2", null),
    call("n3", "s-a"),
    call("n4", "s-b"),
    call("n5", null, mcpRequestKey(2)),
  ];
  const table: Array<[string, McpCancelTarget, string | null]> = [
    ["a closed stream names its own call", { nonce: "n2" }, "n2"],
    ["an unknown nonce names none", { nonce: "n9" }, null],
    ["id 1 in session s-a: that session's call", { requestKey: one, session: "s-a" }, "n3"],
    ["id 1 in session s-b: that session's call", { requestKey: one, session: "s-b" }, "n4"],
    ["id 1 without a session: two callers, ambiguous", { requestKey: one, session: null }, null],
    ["id 2 without a session: the one call", { requestKey: mcpRequestKey(2), session: null }, "n5"],
    ["id 1 in an unknown session: none", { requestKey: one, session: "s-z" }, null],
    ['"1" is not 1', { requestKey: mcpRequestKey("1"), session: "s-a" }, null],
  ];
  it.each(table)("%s", (_why, target, nonce) => {
    expect(cancelledCall(inFlight, target)?.nonce ?? null).toBe(nonce);
  });
});

describe("annotationsFor", () => {
  it.each([
    ["read", false, { readOnlyHint: true, openWorldHint: true }],
    ["read", true, { readOnlyHint: true, openWorldHint: false }],
    [
      "write",
      false,
      { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    ],
    [
      "irreversible_write",
      false,
      { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    ],
  ] as const)("%s (built in: %s)", (risk, builtIn, expected) => {
    expect(annotationsFor(risk, builtIn)).toEqual(expected);
  });
});

describe("callResult", () => {
  const op = "op_0123456789abcdef0123456789abcdef";
  const cases: Array<[Envelope, boolean]> = [
    [{ status: "succeeded", operation_id: op, result: { id: "x" } }, false],
    [refusal("pending", op, "executing", "Running."), false],
    [refusal("awaiting_approval", op, "approval_required", "A person decides."), false],
    [refusal("rejected", op, "invalid_arguments", "Fix it."), true],
    [refusal("failed", op, "permanent_failure", "No."), true],
    [refusal("budget_exhausted", op, "max_turns", "Out."), true],
    [refusal("cancelled", op, "cancelled", "Stopped."), true],
    [refusal("outcome_unknown", op, "timeout_unknown", "Unknown."), true],
  ];
  it.each(cases)(
    "%o → isError %s, the envelope as structuredContent and last text",
    (envelope, isError) => {
      const result = callResult(envelope, true);
      expect(result.isError).toBe(isError);
      expect(result.structuredContent).toEqual(envelope);
      expect(JSON.parse(result.content.at(-1)!.text)).toEqual(envelope);
      if ("message" in envelope) expect(result.content[0]!.text).toContain(envelope.message);
    },
  );

  it("points a waiting or unknown call at toolgate_check_status only when the run offers it", () => {
    const waiting = refusal("awaiting_approval", op, "approval_required", "A person decides.");
    expect(callResult(waiting, true).content[0]!.text).toContain(
      `call toolgate_check_status with {"operation_id": "${op}"}`,
    );
    expect(callResult(waiting, false).content[0]!.text).toBe("A person decides.");
    expect(callResult(refusal("pending", op, "executing", "Running."), true).content[0]!.text).toBe(
      "Running.",
    );
  });
});

describe("mcpGuard", () => {
  const dev = { TOOLGATE_ENV: "development" } as unknown as Env;
  const prod = {} as unknown as Env;
  const listed = { TOOLGATE_MCP_ALLOWED_HOSTS: "mcp.example.com" } as unknown as Env;
  const origins = { TOOLGATE_MCP_ALLOWED_ORIGINS: "app.example.com" } as unknown as Env;
  it.each([
    [dev, "127.0.0.1:8787", null, null],
    [dev, "localhost:8787", "http://localhost:3000", null],
    [dev, "attacker.example:8787", null, "host_not_allowed"],
    [dev, "attacker.example:8787", "http://attacker.example:8787", "host_not_allowed"],
    [dev, "127.0.0.1:8787", "https://evil.example", "origin_not_allowed"],
    [dev, "127.0.0.1:8787", "null", "origin_not_allowed"],
    [prod, "toolgate.example.com", null, null],
    [prod, "toolgate.example.com", "https://toolgate.example.com", null],
    [prod, "toolgate.example.com", "https://evil.example", "origin_not_allowed"],
    [origins, "toolgate.example.com", "https://app.example.com", null],
    [listed, "mcp.example.com", null, null],
    [listed, "other.example.com", null, "host_not_allowed"],
  ] as const)("%o Host %s Origin %s → %s", (env, host, origin, refused) => {
    expect(mcpGuard(env, host, origin)?.code ?? null).toBe(refused);
  });
});

describe("jsonRpcCodeOf", () => {
  it("what the request named or sent is invalid params; the rest is an internal error", () => {
    expect(jsonRpcCodeOf({ code: "unknown_tool", detail: "" })).toBe(-32602);
    expect(jsonRpcCodeOf({ code: "invalid_request", detail: "" })).toBe(-32602);
    expect(jsonRpcCodeOf({ code: "misconfigured", detail: "" })).toBe(-32603);
  });
});
