// Issue 36 over MCP: a tools/call of a tool acting as the user, whose user has not connected,
// toward a 2026-era client that declared URL-mode elicitation, asks the client to open the connect
// link (input_required, elicitation/create mode url); its retry after the user connected is the
// same call, sent once. A client without the capability reads the link in the result.
import { exports } from "cloudflare:workers";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { api, upstream } from "../support/api.ts";
import { envelope, mcpPost, MODERN } from "../support/mcp.ts";
import { authServer, completeConsent, registerProvider, userTool } from "../support/oauth.ts";

const args = { amount: 1, currency: "usd" };

function call(token: string, name: string, capabilities: object, extra: object = {}) {
  return mcpPost(
    token,
    {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name,
        arguments: args,
        ...extra,
        _meta: { ...envelope, "io.modelcontextprotocol/clientCapabilities": capabilities },
      },
    },
    { "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name },
  );
}

describe("MCP URL-mode elicitation of the connect link", { timeout: 30_000 }, () => {
  it("a client declaring it is asked to open the link; its retry after the connect sends once", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    const run = await api("POST", "/v1/runs", { user: { id: "olga", scopes: [] }, tools: [tool] });
    const token = run.body.run_token as string;

    // Without the capability: the readable result, with the link.
    const plain = await call(token, tool, {});
    expect(plain.body.result.structuredContent).toMatchObject({
      status: "pending",
      code: "credential_required",
    });
    const url = plain.body.result.structuredContent.connect_url as string;

    const asked = await call(token, tool, { elicitation: { url: {} } });
    expect(asked.body.result).toMatchObject({
      resultType: "input_required",
      inputRequests: {
        connect: { method: "elicitation/create", params: { mode: "url", url } },
      },
    });
    expect((await up.state()).requests).toHaveLength(0);

    await completeConsent(url, "olga");
    const retried = await call(
      token,
      tool,
      { elicitation: { url: {} } },
      { inputResponses: { connect: { action: "accept" } } },
    );
    expect(retried.body.result.structuredContent).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);
  });

  it("the official client (2026 era): its URL-mode handler gets the link, the user connects, the call completes once", async () => {
    const server = authServer();
    const provider = await registerProvider(server);
    const up = upstream();
    const tool = await userTool(provider, up.url);
    const run = await api("POST", "/v1/runs", { user: { id: "pia", scopes: [] }, tools: [tool] });
    const client = new Client(
      { name: "oauth-mcp", version: "1.0.0" },
      {
        capabilities: { elicitation: { url: {} } },
        versionNegotiation: { mode: { pin: MODERN } },
      },
    );
    const elicited: Array<{ mode?: string; url?: string }> = [];
    client.setRequestHandler("elicitation/create", async (request) => {
      elicited.push(request.params as { mode?: string; url?: string });
      // The user opens the link in their browser and consents.
      await completeConsent((request.params as { url: string }).url, "pia");
      return { action: "accept" };
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL("http://toolgate.test/mcp"), {
        requestInit: { headers: { Authorization: `Bearer ${run.body.run_token}` } },
        fetch: (url, init) =>
          (exports as unknown as { default: Fetcher }).default.fetch(
            new Request(url, init as RequestInit),
          ),
      }),
    );
    const result = await client.callTool({ name: tool, arguments: args });
    expect(elicited).toHaveLength(1);
    expect(elicited[0]).toMatchObject({ mode: "url" });
    expect(elicited[0]!.url).toContain(`${server.issuer}/authorize`);
    expect(result.structuredContent).toMatchObject({ status: "succeeded" });
    expect((await up.state()).effects).toHaveLength(1);
    await client.close();
  });
});
