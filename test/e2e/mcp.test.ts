// /mcp end to end with the official MCP client (@modelcontextprotocol/client) against the shared
// `wrangler dev` and demo upstream (test/support/e2e-setup.ts; this file's own tenant and upstream
// namespace), on loopback: the README's MCP example runs as written (twice: one charge upstream); a
// 2025-era and a 2026-era client list the run's tools and the same charge from both is one effect;
// each era's own cancellation (notifications/cancelled, or closing the call's stream) closes a call
// in flight. Every wait is on a response, never on time.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { beforeAll, describe, expect, it } from "vitest";
import { registerDemo, ROOT } from "../../scripts/lib/dev-server.mjs";
import {
  conformanceRun,
  runConformance,
  startMcpProxy,
} from "../../scripts/lib/mcp-conformance.mjs";
import { e2eServer, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl } = e2eServer();
const shop = shopNamespace("e2e-mcp");

let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  demo = await registerDemo(toolgateUrl, shop.url);
}, 240_000);

async function connect(era: "legacy" | "modern", runToken = demo.run.run_token as string) {
  const client = new Client(
    { name: `e2e-${era}`, version: "1.0.0" },
    era === "modern" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${toolgateUrl}/mcp`), {
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
      `${imports}\nconst TG = ${JSON.stringify(toolgateUrl)};\nconst runToken = ${JSON.stringify(demo.run.run_token)};\n${body.join("\n\n")}`,
    );
    // Asynchronously: never block this worker while the example runs.
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
    expect((await shop.state()).effects.filter((e) => e.body.amount === 500)).toHaveLength(1);
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
      "refund_charge",
      "refund_order",
      "send_email",
      "toolgate_check_status",
    ]);
    const charge = listed.tools.find((t) => t.name === "charge_card")!;
    expect(charge.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: true });
    expect(Object.keys(charge.inputSchema.properties ?? {})).not.toContain("customer_id");
    expect((await modern.listTools()).tools).toEqual(listed.tools);

    const before = (await shop.state()).effects.length;
    const args = { amount: 725, currency: "usd" };
    const first = await legacy.callTool({ name: "charge_card", arguments: args });
    const again = await modern.callTool({ name: "charge_card", arguments: args });
    const third = await legacy.callTool({ name: "charge_card", arguments: args });
    expect(first.isError).toBe(false);
    expect(first.structuredContent).toMatchObject({ status: "succeeded" });
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(third.structuredContent).toEqual(first.structuredContent);
    expect((await shop.state()).effects.length).toBe(before + 1);

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
    const seen = (await shop.state()).requests.length;
    await shop.script({ kind: "slow", delayMs: 2000 });
    const args = { subject: "cancel me", body: "hello" };
    const controller = new AbortController();
    const call = client.callTool(
      { name: "send_email", arguments: args },
      { signal: controller.signal },
    );
    await shop.waitForRequests(seen + 1);
    controller.abort("the user pressed stop");
    await expect(call).rejects.toThrow();
    const again = await client.callTool({ name: "send_email", arguments: args });
    expect(again.isError).toBe(true);
    expect(again.structuredContent).toMatchObject({ status: "cancelled" });
    await client.close();
  });

  it("passes the official conformance suite's server scenarios, but for the baseline of what /mcp does not serve", async () => {
    const run = await conformanceRun(toolgateUrl, demo.key, shop.url);
    const proxy = await startMcpProxy(toolgateUrl, run.run_token);
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
