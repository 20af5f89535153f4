// npm run figure:retry-budget — the issue 11 figure: requests a 100%-503 upstream receives with
// and without the retry budget, through real `wrangler dev` (real alarms, real clock). For each
// mode: a fresh toolgate (TOOLGATE_RETRY_BUDGET_RATIO off, then the default), one tenant, a keyed
// write retried every ~1 s up to 4 attempts within 30 s, FIGURE_RATE new operations a second for
// FIGURE_LOAD_S seconds, and the upstream's request count after FIGURE_OBSERVE_S seconds.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import { call, createRun, DEV_VARS, startWrangler } from "./lib/dev-server.mjs";

const RATE = Number(process.env.FIGURE_RATE ?? 10);
const LOAD_S = Number(process.env.FIGURE_LOAD_S ?? 15);
const OBSERVE_S = Number(process.env.FIGURE_OBSERVE_S ?? 45);
const PORT = Number(process.env.FIGURE_PORT ?? 8991);
const ADMIN = DEV_VARS.TOOLGATE_ADMIN_TOKEN;
const log = (message) => process.stderr.write(`figure: ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const upstream = await startUpstream(PORT - 1);

async function outage(mode) {
  const state = mkdtempSync(join(tmpdir(), "toolgate-figure-"));
  const ns = `figure-${mode}-${Date.now()}`;
  const control = (path, init) => fetch(`${upstream.url}/_control/${path}?ns=${ns}`, init);
  log(`${mode}: starting wrangler dev`);
  const toolgate = await startWrangler({
    port: PORT,
    inspectorPort: PORT + 1,
    vars: { ...DEV_VARS, ...(mode === "without" ? { TOOLGATE_RETRY_BUDGET_RATIO: "off" } : {}) },
    persistTo: state,
    quiet: !process.env.FIGURE_VERBOSE,
  });
  try {
    const { tenant_id } = (
      await call(toolgate.url, "POST", "/v1/admin/tenants", ADMIN, { name: ns })
    ).body;
    const { key } = (
      await call(toolgate.url, "POST", `/v1/admin/tenants/${tenant_id}/keys`, ADMIN, {
        name: "figure",
        scopes: ["runs:write", "runs:read", "tools:write"],
      })
    ).body;
    await call(toolgate.url, "PUT", "/v1/tools/figure_charge", key, {
      name: "figure_charge",
      description: "Charge a card (figure tool).",
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { n: { type: "integer" } },
        required: ["n"],
      },
      risk: "write",
      request: { method: "POST", url: `${upstream.url}/ns/${ns}/charges` },
      idempotency: { mode: "header", header: "Idempotency-Key" },
      timeout_ms: 2_000,
      max_attempts: 4,
      retry: {
        min_delay_ms: 800,
        initial_delay_ms: 1_000,
        max_delay_ms: 1_200,
        max_elapsed_ms: 30_000,
      },
    });
    const run = await createRun(toolgate.url, key, ["figure_charge"]);
    // A 100%-failing upstream: more 503s queued than could ever be drawn.
    const faults = Array.from({ length: RATE * LOAD_S * 8 }, () => ({
      kind: "status",
      status: 503,
    }));
    await control("script", { method: "POST", body: JSON.stringify(faults) });
    const startedMs = Date.now();
    let n = 0;
    for (let second = 0; second < LOAD_S; second++) {
      // Not awaited for long: `Prefer: wait=0` answers as soon as the first attempt is under way.
      await Promise.all(
        Array.from({ length: RATE }, () =>
          fetch(`${toolgate.url}/v1/runs/${run.run_id}/turns?format=native`, {
            method: "POST",
            headers: {
              Authorization: `Bearer ${run.run_token}`,
              "Content-Type": "application/json",
              Prefer: "wait=0",
            },
            body: JSON.stringify({
              calls: [{ id: `c${n}`, name: "figure_charge", arguments: { n: n++ } }],
            }),
          }).then((res) => res.text()),
        ),
      );
      await sleep(Math.max(0, startedMs + (second + 1) * 1000 - Date.now()));
    }
    await sleep(Math.max(0, startedMs + OBSERVE_S * 1000 - Date.now()));
    const requests = (await (await control("state")).json()).requests.length;
    const elapsedS = Math.round((Date.now() - startedMs) / 1000);
    return { operations: n, requests, retries: requests - n, elapsedS };
  } finally {
    toolgate.stop();
    await sleep(1_000);
    rmSync(state, { recursive: true, force: true });
  }
}

try {
  const only = process.env.FIGURE_ONLY;
  const none = { operations: 0, requests: 0, retries: 0, elapsedS: 0 };
  const without = only === "with" ? none : await outage("without");
  const withBudget = only === "without" ? none : await outage("with");
  const rows = [
    ["", "operations", "requests upstream", "retries", "retries / first attempts", "counted after"],
    ...[
      ["without budget", without],
      ["with budget (default)", withBudget],
    ].map(([name, r]) => [
      name,
      r.operations,
      r.requests,
      r.retries,
      (r.retries / r.operations).toFixed(2),
      `${r.elapsedS} s`,
    ]),
  ];
  console.log(
    `100%-503 upstream, ${RATE} new keyed writes/s for ${LOAD_S} s, up to 4 attempts ~1 s apart within 30 s, counted after ${OBSERVE_S} s (the budget's bound: 10 + 10% of first attempts per 10 s window):`,
  );
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
} finally {
  await upstream.close();
}
