// The e2e project's one toolgate: `wrangler dev` (ports 8950/8951, state in a temp dir) and one
// demo upstream (demo/upstream.ts), started once for every test/e2e file and `provide`d to them
// (test/support/e2e.ts reads it). Each file keeps its own tenant(s) and its own upstream namespace,
// so files stay independent of each other and of their order.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startUpstream } from "../../demo/upstream.ts";
import { DEV_VARS, startWrangler } from "../../scripts/lib/dev-server.mjs";

export const E2E_PORT = 8950;

export default async function setup(project: TestProject) {
  const state = mkdtempSync(join(tmpdir(), "toolgate-e2e-"));
  const upstream = await startUpstream();
  let toolgate: { url: string; stop: () => void };
  try {
    toolgate = await startWrangler({
      port: E2E_PORT,
      inspectorPort: E2E_PORT + 1,
      vars: {
        ...DEV_VARS,
        DEMO_UPSTREAM_URL: upstream.url,
        // One cost unit per model token, so usage visibly reaches max_cost (sdk.test.ts; no other
        // e2e file reports model usage).
        TOOLGATE_MODEL_PRICES: JSON.stringify({
          "*": { input_per_mtok: 1_000_000, output_per_mtok: 1_000_000 },
        }),
      },
      persistTo: state,
      // E2E_QUIET=0 shows wrangler's log.
      quiet: process.env.E2E_QUIET !== "0",
      readyTimeoutMs: 180_000,
    });
  } catch (error) {
    await upstream.close();
    throw error;
  }
  project.provide("e2e", { toolgateUrl: toolgate.url, upstreamUrl: upstream.url, port: E2E_PORT });
  return async () => {
    toolgate.stop();
    await upstream.close();
    // wrangler may still be flushing as it exits; a leftover temp dir is harmless, a failed hook is not.
    try {
      rmSync(state, { recursive: true, force: true, maxRetries: 3 });
    } catch {}
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    e2e: { toolgateUrl: string; upstreamUrl: string; port: number };
  }
}
