// npm run demo: the demo shop and toolgate on their own ports (DEMO_PORT, default 8790; the shop on
// DEMO_PORT + 1), a fresh demo tenant, and a scripted support agent (demo/agent.ts) through the
// incidents toolgate exists for, ending with each operation's timeline. No model key needed.
// With ANTHROPIC_API_KEY (or OPENAI_API_KEY) set, a real model drives the same run (demo/live.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDemo } from "../demo/agent.ts";
import { startUpstream } from "../demo/upstream.ts";
import { DEV_VARS, registerDemo, startWrangler } from "./lib/dev-server.mjs";

const port = Number(process.env.DEMO_PORT ?? 8790);
const state = mkdtempSync(join(tmpdir(), "toolgate-demo-"));
const upstream = await startUpstream(port + 1);
console.log(`starting toolgate (wrangler dev) on :${port} and the demo shop on :${port + 1}…`);
const toolgate = await startWrangler({
  port,
  inspectorPort: port + 1000,
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: state,
  quiet: true,
  readyTimeoutMs: 120_000,
});
let code = 0;
try {
  const demo = await registerDemo(toolgate.url, upstream.url, { budgets: { max_tool_calls: 5 } });
  const consoleUrl = `http://localhost:${port}/console`;
  // A real model only when asked: a model key in the environment alone does not spend on it.
  const live =
    process.env.DEMO_LIVE === "1" && (process.env.ANTHROPIC_API_KEY || process.env.OPENAI_API_KEY);
  if (process.env.DEMO_LIVE === "1" && !live)
    throw new Error("DEMO_LIVE=1 needs ANTHROPIC_API_KEY or OPENAI_API_KEY");
  if (live) {
    const { runLive } = await import("../demo/live.ts");
    await runLive({ toolgateUrl: toolgate.url, key: demo.key, run: demo.run });
  } else {
    await runDemo({
      toolgateUrl: toolgate.url,
      upstreamUrl: upstream.url,
      key: demo.key,
      run: demo.run,
      consoleUrl,
    });
  }
  if (process.env.DEMO_KEEP) {
    console.log(
      `\nThe run is in the console: ${consoleUrl}/runs/${demo.run.run_id} (key: ${demo.key}).`,
    );
    console.log("DEMO_KEEP is set: Ctrl-C stops toolgate and the shop.");
    await new Promise((resolve) => process.once("SIGINT", resolve));
  } else
    console.log(
      "\nDEMO_KEEP=1 npm run demo keeps toolgate running to open this run in the console.",
    );
} catch (error) {
  console.error(error);
  code = 1;
} finally {
  toolgate.stop();
  await upstream.close();
  try {
    rmSync(state, { recursive: true, force: true, maxRetries: 3 });
  } catch {}
}
process.exit(code);
