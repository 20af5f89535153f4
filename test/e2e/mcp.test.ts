// /mcp end to end with the official MCP client (@modelcontextprotocol/client) against `wrangler
// dev` and the demo upstream, on loopback (ports 8960/8961): the README's MCP example runs as
// written (twice: one charge upstream); a 2025-era and a 2026-era client list the run's tools and
// the same charge from both is one effect; each era's own cancellation (notifications/cancelled,
// or closing the call's stream) closes a call in flight. Every wait is on a response, never on time.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startUpstream, type Upstream } from "../../demo/upstream.ts";
import { DEV_VARS, registerDemo, ROOT, startWrangler } from "../../scripts/lib/dev-server.mjs";
import {
  conformanceRun,
  runConformance,
  startMcpProxy,
} from "../../scripts/lib/mcp-conformance.mjs";

const PORT = 8960;
const INSPECTOR_PORT = 8961;

let upstream: Upstream;
let toolgate: { url: string; stop: () => void };
let state: string;
let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  state = mkdtempSync(join(tmpdir(), "toolgate-mcp-e2e-"));
  upstream = await startUpstream();
  toolgate = await startWrangler({
    port: PORT,
    inspectorPort: INSPECTOR_PORT,
    vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
    persistTo: state,
    quiet: process.env.MCP_E2E_QUIET !== "0",
    readyTimeoutMs: 180_000,
  });
  demo = await registerDemo(toolgate.url, upstream.url);
}, 240_000);

afterAll(async () => {
  toolgate?.stop();
  await upstream?.close();
  rmSync(state, { recursive: true, force: true });
});

const shop = async () =>
  (await (await fetch(`${upstream.url}/_control/state`)).json()) as {
    requests: unknown[];
    effects: Array<{ path: string; body: any }>;
  };

async function connect(era: "legacy" | "modern", runToken = demo.run.run_token as string) {
  const client = new Client(
    { name: `e2e-${era}`, version: "1.0.0" },
    era === "modern" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${toolgate.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${runToken}` } },
    }),
  );
  return client;
}

describe("MCP end to end", () => {
  it("the README's MCP example runs as written; run twice, it charges once", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const block = /<!-- mcp-example[^>]*-->\s*```js\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    expect(block!.trim().split("\n").length).toBeLessThanOrEqual(10);
    const dir = join(ROOT, "test-results", "mcp");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, "readme-example.mjs");
    const [imports, ...body] = block!.split("\n\n");
    writeFileSync(
      file,
      `${imports}\nconst TG = ${JSON.stringify(toolgate.url)};\nconst runToken = ${JSON.stringify(demo.run.run_token)};\n${body.join("\n\n")}`,
    );
    // Asynchronously: the demo upstream answers from this very process.
    const run = async () =>
      JSON.parse(
        (await promisify(execFile)(process.execPath, [file], { encoding: "utf8" })).stdout,
      );
    const first = await run();
    expect(first).toMatchObject({
      status: "succeeded",
      result: { amount: 500, currency: "usd", customer_id: "cus_demo" },
    });
    expect(await run()).toEqual(first);
    expect((await shop()).effects.filter((e) => e.body.amount === 500)).toHaveLength(1);
  });

  it("a 2025-11-25 and a 2026-07-28 client list the run's tools; the same charge from both is one effect", async () => {
    const legacy = await connect("legacy");
    const modern = await connect("modern");
    expect(legacy.getProtocolEra()).toBe("legacy");
    expect(modern.getProtocolEra()).toBe("modern");
    const listed = await legacy.listTools();
    expect(listed.tools.map((t) => t.name).sort()).toEqual([
      "charge_card",
      "lookup_order",
      "refund_order",
      "send_email",
      "toolgate_check_status",
    ]);
    const charge = listed.tools.find((t) => t.name === "charge_card")!;
    expect(charge.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: true });
    expect(Object.keys(charge.inputSchema.properties ?? {})).not.toContain("customer_id");
    expect((await modern.listTools()).tools).toEqual(listed.tools);

    const before = (await shop()).effects.length;
    const args = { amount: 725, currency: "usd" };
    const first = await legacy.callTool({ name: "charge_card", arguments: args });
    const again = await modern.callTool({ name: "charge_card", arguments: args });
    const third = await legacy.callTool({ name: "charge_card", arguments: args });
    expect(first.isError).toBe(false);
    expect(first.structuredContent).toMatchObject({ status: "succeeded" });
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(third.structuredContent).toEqual(first.structuredContent);
    expect((await shop()).effects.length).toBe(before + 1);

    const read = await modern.callTool({ name: "lookup_order", arguments: { order_id: "ord_7" } });
    expect(read.structuredContent).toMatchObject({ status: "succeeded", result: { id: "ord_7" } });
    await expect(legacy.callTool({ name: "transfer_all", arguments: {} })).rejects.toThrow(
      /offers no tool named/,
    );
    await legacy.close();
    await modern.close();
  });

  // The 2026-era client cancels by closing the call's stream instead; wrangler dev's local proxy
  // does not pass a client's disconnect on to the Worker, so that path is proven in workerd by
  // test/integration/mcp.test.ts ("closing the call's stream").
  it("a 2025-era client's cancellation (notifications/cancelled) closes its call in flight: the same call again says cancelled", async () => {
    const client = await connect("legacy");
    const seen = (await shop()).requests.length;
    await fetch(`${upstream.url}/_control/script`, {
      method: "POST",
      body: JSON.stringify([{ kind: "slow", delayMs: 2000 }]),
    });
    const args = { subject: "cancel me", body: "hello" };
    const controller = new AbortController();
    const call = client.callTool(
      { name: "send_email", arguments: args },
      { signal: controller.signal },
    );
    await fetch(`${upstream.url}/_control/wait?requests=${seen + 1}`);
    controller.abort("the user pressed stop");
    await expect(call).rejects.toThrow();
    const again = await client.callTool({ name: "send_email", arguments: args });
    expect(again.isError).toBe(true);
    expect(again.structuredContent).toMatchObject({ status: "cancelled" });
    await client.close();
  });

  it("passes the official conformance suite's server scenarios, but for the baseline of what /mcp does not serve", async () => {
    const run = await conformanceRun(toolgate.url, demo.key, upstream.url);
    const proxy = await startMcpProxy(toolgate.url, run.run_token);
    try {
      const output = join(ROOT, "test-results", "mcp-conformance");
      mkdirSync(output, { recursive: true });
      const { code, report } = await runConformance(`${proxy.url}/mcp`, output);
      for (const scenario of [
        "server-initialize: 1 passed, 0 failed",
        "ping: 1 passed, 0 failed",
        "tools-list: 1 passed, 0 failed",
        "tools-call-simple-text: 1 passed, 0 failed",
        "tools-call-error: 1 passed, 0 failed",
        "dns-rebinding-protection: 2 passed, 0 failed",
      ])
        expect(report).toContain(`✓ ${scenario}`);
      expect(report).toContain("Baseline check passed");
      expect(code).toBe(0);
    } finally {
      await proxy.close();
    }
  });
});
