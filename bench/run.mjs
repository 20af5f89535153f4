// npm run bench: one table from one run. Starts the local upstream, toolgate and the baseline
// worker under `wrangler dev` (fresh local storage), then runs each scenario from a separate load
// process on loopback: (a) direct fetch, (b) minimal durable floor, (c) toolgate new write op,
// (d) toolgate replay of a settled op, (e) a new write under an uncontended resource lock, (f) all
// writes on one hot resource (serialized by its lock); at concurrency 1 and 16.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import {
  call,
  createRun,
  DEV_VARS,
  registerDemo,
  ROOT,
  startWrangler,
} from "../scripts/lib/dev-server.mjs";

const COUNTS = {
  1: Number(process.env.BENCH_N1 ?? 300),
  16: Number(process.env.BENCH_N16 ?? 1500),
};
const MAX_MS = Number(process.env.BENCH_MAX_MS ?? 15_000);
const state = mkdtempSync(join(tmpdir(), "toolgate-bench-"));

const upstream = await startUpstream(Number(process.env.BENCH_UPSTREAM_PORT ?? 8798));
process.stderr.write("bench: starting wrangler dev (toolgate and the baseline worker)\n");
const toolgate = await startWrangler({
  port: Number(process.env.BENCH_PORT ?? 8797),
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: join(state, "toolgate"),
  quiet: true,
});
const baseline = await startWrangler({
  config: join(ROOT, "bench", "worker", "wrangler.toml"),
  port: Number(process.env.BENCH_BASELINE_PORT ?? 8796),
  vars: { UPSTREAM_URL: upstream.url },
  persistTo: join(state, "baseline"),
  quiet: true,
});

const stopAll = async () => {
  toolgate.stop();
  baseline.stop();
  await upstream.close();
  rmSync(state, { recursive: true, force: true });
};

/** Runs one scenario in its own process (async: this process serves the upstream meanwhile). */
function load(scenario) {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(ROOT, "bench", "load.mjs"), JSON.stringify(scenario)],
      { encoding: "utf8", maxBuffer: 1 << 20, timeout: MAX_MS * 3 + 30_000 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`${error.message} ${stderr}`.trim()));
        resolve(JSON.parse(stdout.trim().split("\n").pop()));
      },
    );
  });
}
const log = (message) => process.stderr.write(`bench: ${message}\n`);

const charge = (id) => `{"amount":${id},"currency":"usd"}`;
/** A keyed write that takes a resource lock per account: uncontended in (e), one hot account in (f). */
const LOCKED = {
  name: "bench_locked_write",
  description: "Charge one account (benchmark tool: takes the account's resource lock).",
  input_schema: {
    type: "object",
    additionalProperties: false,
    properties: { account: { type: "string" }, amount: { type: "integer" } },
    required: ["account", "amount"],
  },
  risk: "write",
  idempotency: { mode: "header", header: "Idempotency-Key" },
  resource: "account:{account}",
  timeout_ms: 5000,
};
const json = { "Content-Type": "application/json" };
const rows = [];

try {
  const demo = await registerDemo(toolgate.url, upstream.url, {
    runContext: { charge_limit: 10_000_000 },
  });
  await call(toolgate.url, "PUT", `/v1/tools/${LOCKED.name}`, demo.key, {
    ...LOCKED,
    request: { method: "POST", url: `${upstream.url}/accounts/{account}/charges` },
  });
  // One run per concurrent client: a real deployment has one run per conversation.
  const runs = [];
  for (let i = 0; i < 16; i++)
    runs.push(
      await createRun(toolgate.url, demo.key, ["charge_card", LOCKED.name], {
        charge_limit: 10_000_000,
      }),
    );
  const turnLane = (run, body) => ({
    url: `${toolgate.url}/v1/runs/${run.run_id}/turns?format=native`,
    headers: { ...json, Authorization: `Bearer ${run.run_token}` },
    body,
  });
  // Settle one operation per run for the replay scenario (amount = 1 + lane index).
  for (const [lane, run] of runs.entries()) {
    await call(toolgate.url, "POST", `/v1/runs/${run.run_id}/turns`, run.run_token, {
      calls: [
        { id: "settle", name: "charge_card", arguments: { amount: 1 + lane, currency: "usd" } },
      ],
    });
  }

  let offset = 1_000;
  for (const concurrency of [1, 16]) {
    const common = { count: COUNTS[concurrency], concurrency, maxMs: MAX_MS, warmup: 30 };
    const scenarios = [
      [
        "(a) direct fetch",
        {
          ...common,
          rowsHeader: "X-Rows-Written",
          lanes: [{ url: `${baseline.url}/direct`, headers: json, body: charge("{{n}}") }],
        },
      ],
      [
        "(b) durable floor",
        {
          ...common,
          rowsHeader: "X-Rows-Written",
          lanes: [{ url: `${baseline.url}/durable`, headers: json, body: charge("{{n}}") }],
        },
      ],
      [
        "(c) toolgate new write",
        {
          ...common,
          rowsHeader: "Toolgate-Rows-Written",
          expectSucceeded: true,
          offset,
          lanes: runs.map((run) =>
            turnLane(
              run,
              `{"calls":[{"id":"b{{n}}","name":"charge_card","arguments":${charge("{{n}}")}}]}`,
            ),
          ),
        },
      ],
      [
        "(d) toolgate replay",
        {
          ...common,
          rowsHeader: "Toolgate-Rows-Written",
          expectSucceeded: true,
          offset,
          lanes: runs.map((run, lane) =>
            turnLane(
              run,
              `{"calls":[{"id":"r{{n}}","name":"charge_card","arguments":${charge(1 + lane)}}]}`,
            ),
          ),
        },
      ],
      [
        "(e) write under a lock",
        {
          ...common,
          rowsHeader: "Toolgate-Rows-Written",
          expectSucceeded: true,
          offset,
          lanes: runs.map((run) =>
            turnLane(
              run,
              `{"calls":[{"id":"l{{n}}","name":"${LOCKED.name}","arguments":{"account":"acct_{{n}}","amount":{{n}}}}]}`,
            ),
          ),
        },
      ],
      [
        "(f) one hot resource",
        {
          ...common,
          rowsHeader: "Toolgate-Rows-Written",
          expectSucceeded: true,
          offset,
          lanes: runs.map((run) =>
            turnLane(
              run,
              `{"calls":[{"id":"h{{n}}","name":"${LOCKED.name}","arguments":{"account":"hot_${concurrency}","amount":{{n}}}}]}`,
            ),
          ),
        },
      ],
    ];
    offset += 40_000; // charge_card allows amounts up to 100000: stay inside the schema
    for (const [name, scenario] of scenarios) {
      try {
        log(`${name} at concurrency ${concurrency}`);
        rows.push({ name, concurrency, ...(await load(scenario)) });
      } catch (error) {
        rows.push({ name, concurrency, error: String(error.message ?? error).slice(0, 200) });
      }
    }
  }
} finally {
  await stopAll();
}

const fmt = (v, digits = 2) =>
  v === null || v === undefined || Number.isNaN(v) ? "n/a" : v.toFixed(digits);
const find = (name, c) => rows.find((r) => r.name.startsWith(name) && r.concurrency === c);
console.log(
  `\ntoolgate benchmark — ${new Date().toISOString()} — node ${process.version}, wrangler dev (local workerd), loopback`,
);
console.log(
  "scenario                  conc     n   p50 ms   p99 ms     req/s  p50/(a)  thr/(a)  p50/(b)  thr/(b)  rows/op",
);
for (const r of rows) {
  if (r.error) {
    console.log(`${r.name.padEnd(25)} ${String(r.concurrency).padStart(4)}  error: ${r.error}`);
    continue;
  }
  const a = find("(a)", r.concurrency);
  const b = find("(b)", r.concurrency);
  const vsB = !r.name.startsWith("(a)") && !r.name.startsWith("(b)");
  console.log(
    `${r.name.padEnd(25)} ${String(r.concurrency).padStart(4)} ${String(r.n).padStart(5)} ${fmt(r.p50).padStart(8)} ${fmt(r.p99).padStart(8)} ${fmt(r.throughput, 0).padStart(9)}` +
      ` ${fmt(r.p50 / a?.p50).padStart(8)} ${fmt(r.throughput / a?.throughput).padStart(8)} ${(vsB ? fmt(r.p50 / b?.p50) : "").padStart(8)} ${(vsB ? fmt(r.throughput / b?.throughput) : "").padStart(8)} ${fmt(r.rowsPerOp, 1).padStart(8)}`,
  );
}
console.log(
  "\ntargets: (c) p50 ≤ 1.3x (b) · (c) throughput ≥ 0.8x (b) · (d) throughput ≥ 0.8x (a) · ≤ 6 rows written per happy-path op",
);
for (const c of [1, 16]) {
  const [b, cc, d, a] = [find("(b)", c), find("(c)", c), find("(d)", c), find("(a)", c)];
  if (!b || !cc || !d || !a || b.error || cc.error || d.error || a.error) continue;
  const verdict = (ok) => (ok ? "met" : "MISSED");
  console.log(
    `  c=${c}: (c)/(b) p50 ${fmt(cc.p50 / b.p50)} ${verdict(cc.p50 / b.p50 <= 1.3)} · (c)/(b) thr ${fmt(cc.throughput / b.throughput)} ${verdict(cc.throughput / b.throughput >= 0.8)} · (d)/(a) thr ${fmt(d.throughput / a.throughput)} ${verdict(d.throughput / a.throughput >= 0.8)} · rows (c) ${fmt(cc.rowsPerOp, 1)} ${verdict(cc.rowsPerOp <= 6)}`,
  );
}
