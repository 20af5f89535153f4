// npm run bench: one table from one run (`npm run bench -- --write` also stores it in
// bench/RESULTS.md). Starts the local upstream, toolgate and the baseline worker under `wrangler dev`
// (fresh local storage), then runs each scenario from a separate load process on loopback at
// concurrency 1, 16 and 64: (a) direct fetch, (b) the minimal durable floor, (w) the same durable
// call as a one-step Cloudflare Workflow, (c) a toolgate new write, (d) a replay of a settled write,
// (e) a write under an uncontended resource lock, (f) all writes on one hot resource, (g) writes
// spread over 1,000 resources, (h) a write that needs approval (timed from the approve POST to the
// upstream receiving the request), (l) a new write whose tool has one limit across runs (issue 21),
// (v) the new write of (c) with no webhook endpoint, then one subscribed to every event (twice),
// then none again, in one run (issue 18: delivery is off the path),
// (t) the new write of (c), each client alternating between
// toolgate A (t0) and a second toolgate B whose every TenantObject RPC waits BENCH_TENANT_DELAY_MS
// (t1; 150 by default: TOOLGATE_DEV_RPC_DELAY, the latency model of a tenant object on another
// continent), then again after restarting B without the delay (t2, t3: an A/A control that
// measures how A and B differ on this machine anyway). Paired, so both sides share the moment's
// load; issue 19 wants the delay's p50 ratio, net of the A/A ratio, within 10%.
// Rows read/written per op come from the isolate's SQLite counters
// (GET /v1/admin/stats, development only) over the whole scenario, background work included.
// Bounds: BENCH_N1/BENCH_N16/BENCH_N64 (requests per scenario), BENCH_MAX_MS (per scenario),
// BENCH_ONLY=a,b,c (scenarios), BENCH_CONC=1,16 (concurrencies), BENCH_WEBHOOK=1 (one webhook
// endpoint subscribed to every event), BENCH_FREEZE=1 (after (c), the same new write again with one
// hold freeze in force on another tool, lifted after: issue 34's pair, "(c) + 1 freeze elsewhere"). Ports 8980–8986 by default (BENCH_UPSTREAM_PORT, BENCH_PORT,
// BENCH_BASELINE_PORT, BENCH_DELAYED_PORT; each toolgate also uses its port + 1).
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
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

const env = process.env;
const COUNTS = {
  1: Number(env.BENCH_N1 ?? 150),
  16: Number(env.BENCH_N16 ?? 600),
  64: Number(env.BENCH_N64 ?? 1200),
};
const CONCURRENCY = (env.BENCH_CONC ?? "1,16,64").split(",").map(Number);
const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(",")) : null;
const MAX_MS = Number(env.BENCH_MAX_MS ?? 6_000);
const PORTS = {
  upstream: Number(env.BENCH_UPSTREAM_PORT ?? 8980),
  toolgate: Number(env.BENCH_PORT ?? 8981),
  baseline: Number(env.BENCH_BASELINE_PORT ?? 8983),
  delayed: Number(env.BENCH_DELAYED_PORT ?? 8985),
};
const TENANT_DELAY_MS = Number(env.BENCH_TENANT_DELAY_MS ?? 150);
const WITH_DELAYED = !ONLY || ONLY.has("t");
const WRITE = process.argv.includes("--write");
const LANES = Math.max(...CONCURRENCY);
const startedAt = new Date();
const loadBefore = loadavg();
const state = mkdtempSync(join(tmpdir(), "toolgate-bench-"));
const log = (message) => process.stderr.write(`bench: ${message}\n`);

const upstream = await startUpstream(PORTS.upstream);
log("starting wrangler dev (toolgate and the baseline worker)");
const toolgate = await startWrangler({
  port: PORTS.toolgate,
  inspectorPort: PORTS.toolgate + 1,
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: join(state, "toolgate"),
  quiet: true,
});
const baseline = await startWrangler({
  config: join(ROOT, "bench", "worker", "wrangler.toml"),
  port: PORTS.baseline,
  inspectorPort: PORTS.baseline + 1,
  vars: { UPSTREAM_URL: upstream.url },
  persistTo: join(state, "baseline"),
  quiet: true,
});

// A second toolgate for (t), restarted (same storage) to switch the latency model between
// TENANT_DELAY_MS and 0 on every TenantObject RPC; `delayedMs`: its current setting.
const startDelayed = (delayMs) =>
  startWrangler({
    port: PORTS.delayed,
    inspectorPort: PORTS.delayed + 1,
    vars: {
      ...DEV_VARS,
      DEMO_UPSTREAM_URL: upstream.url,
      TOOLGATE_DEV_RPC_DELAY: `TenantObject=${delayMs}`,
    },
    persistTo: join(state, "delayed"),
    quiet: true,
  });
let delayedMs = TENANT_DELAY_MS;
let delayed = WITH_DELAYED ? await startDelayed(delayedMs) : null;

const stopAll = async () => {
  toolgate.stop();
  delayed?.stop();
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
        if (error)
          return reject(
            new Error(
              `${error.killed ? "timed out" : `exit ${error.code}`}: ${stderr.match(/^Error: .*$/m)?.[0] ?? stderr.trim().split("\n").pop()}`,
            ),
          );
        resolve(JSON.parse(stdout.trim().split("\n").pop()));
      },
    );
  });
}

/** The delayed toolgate's TenantObject RPCs so far, by method (development only: rpc-model.ts). */
async function tenantRpcs() {
  const calls = (await call(delayed.url, "GET", "/v1/admin/stats", DEV_VARS.TOOLGATE_ADMIN_TOKEN))
    .body.rpc_calls;
  return Object.fromEntries(
    Object.entries(calls)
      .filter(([key]) => key.startsWith("TenantObject."))
      .map(([key, n]) => [key.slice("TenantObject.".length), n]),
  );
}
const tenantNotes = [];

/**
 * (t): unmeasured new writes to both toolgates before each pass, so neither side is a cold isolate
 * (B has just been started; A has served every scenario before). Each pass and warm-up has amounts
 * of its own (`plus`): the same arguments in the same run are a replay, not a new write.
 */
async function warmPaired(spec, tag, plus) {
  const lanes = spec.lanes.map((lane) => ({
    ...lane,
    body: lane.body.replaceAll('"t', `"${tag}`),
  }));
  await load({
    ...spec,
    lanes,
    count: Math.max(100, 4 * spec.concurrency),
    offset: spec.offset + plus,
  });
}

/**
 * (t): `first` is the paired pass just run against the second toolgate as it stands; then it is
 * restarted with the other delay and the pass repeated (new call ids). The pass with both delays 0
 * is an A/A control: its ratio is what the two instances differ by on this machine with no delay.
 */
async function pairedRows(spec, first, tenantBefore, concurrency) {
  const passes = [{ delayMs: delayedMs, result: first, before: tenantBefore }];
  passes[0].after = await tenantRpcs();
  await delayed.kill();
  delayedMs = delayedMs === 0 ? TENANT_DELAY_MS : 0;
  delayed = await startDelayed(delayedMs);
  await warmPaired(spec, "x", 6000);
  const before = await tenantRpcs();
  const lanes = spec.lanes.map((lane) => ({ ...lane, body: lane.body.replaceAll('"t', '"u') }));
  passes.push({
    delayMs: delayedMs,
    result: await load({ ...spec, lanes, offset: spec.offset + 2000 }),
    before,
  });
  passes[1].after = await tenantRpcs();
  const each = (pass) => ({ concurrency, throughput: null, sent: pass.result.sent });
  const [slow, control] = passes.sort((a, b) => b.delayMs - a.delayMs);
  rows.push({ ...each(slow), ...slow.result.groups[0], name: "(t0) A, tenant +0" });
  rows.push({ ...each(slow), ...slow.result.groups[1], name: `(t1) B, tenant +${slow.delayMs}ms` });
  rows.push({ ...each(control), ...control.result.groups[0], name: "(t2) A, tenant +0 (A/A)" });
  rows.push({ ...each(control), ...control.result.groups[1], name: "(t3) B, tenant +0 (A/A)" });
  for (const pass of passes) {
    const perOp = Object.entries(pass.after)
      .map(([method, n]) => [method, (n - (pass.before[method] ?? 0)) / (pass.result.sent / 2)])
      .filter(([, n]) => n > 0);
    tenantNotes.push(
      `  c=${concurrency}: B's TenantObject RPCs per write at +${pass.delayMs} ms (warm-up included): ${perOp.length ? perOp.map(([m, n]) => `${m} ${n.toFixed(2)}`).join(", ") : "none"}`,
    );
  }
}

/**
 * (v): (c)'s new write four times: no webhook endpoint (v0), one endpoint subscribed to every
 * event (v1, v2), none again (v3), each pass with its own call ids, after the previous pass's
 * deliveries have drained. Issue 18 wants the endpoint's p50 within 10% of none, in the same run;
 * the two passes of each kind say how far identical passes differ on this machine anyway.
 */
async function webhookPasses(spec, concurrency, key) {
  // Off, on, on, off (ABBA): a drift in the machine's load over the four passes cancels out.
  const ON = [false, true, true, false];
  for (let pass = 0; pass < ON.length; pass++) {
    const on = ON[pass];
    // `call` throws on anything but a 2xx: the endpoint is put or deleted only when that changes.
    if (on && !ON[pass - 1])
      await call(toolgate.url, "PUT", "/v1/webhooks/bench-v", key, {
        url: `${upstream.url}/webhooks/bench-v`,
        events: ["*"],
        format: "standard",
      });
    else if (!on && ON[pass - 1]) await call(toolgate.url, "DELETE", "/v1/webhooks/bench-v", key);
    const lanes = spec.lanes.map((lane) => ({
      ...lane,
      body: lane.body.replaceAll('"v', `"v${pass}c${concurrency}_`),
    }));
    const before = await sqlRows();
    // Its own amounts too: the same arguments in the same run are a replay of (c)'s operation.
    const result = await load({ ...spec, lanes, offset: spec.offset + 2000 * (pass + 1) });
    // The queue's batches (max 1 s) drain before the next pass, so no pass pays for another's.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const after = await sqlRows();
    rows.push({
      ...result,
      rowsRead: (after.read - before.read) / result.sent,
      rowsWritten: (after.written - before.written) / result.sent,
      name: `(v${pass}) webhook ${on ? "on" : "off"}`,
      concurrency,
    });
  }
}

/** The isolate's SQLite row counters, once background work (lock releases, inbox) has settled. */
async function sqlRows() {
  let last = null;
  for (let i = 0; i < 20; i++) {
    const now = (await call(toolgate.url, "GET", "/v1/admin/stats", DEV_VARS.TOOLGATE_ADMIN_TOKEN))
      .body.sql_rows;
    if (last && now.read === last.read && now.written === last.written) return now;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  return last;
}

const charge = (id) => `{"amount":${id},"currency":"usd"}`;
/** A keyed write that takes a resource lock per account. */
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
/** A keyed write with one limit across runs per customer (issue 21), never reached in the bench. */
const LIMITED = {
  name: "bench_limited_write",
  description: "Refund one customer (benchmark tool: one windowed limit per customer).",
  input_schema: {
    type: "object",
    additionalProperties: false,
    properties: { customer_id: { type: "string" }, amount: { type: "integer" } },
    required: ["customer_id", "amount"],
  },
  risk: "write",
  idempotency: { mode: "header", header: "Idempotency-Key" },
  bind: { customer_id: "context.customer_id" },
  limits_across_runs: [
    {
      name: "bench_refunds_per_customer_day",
      subject: "context.customer_id",
      window: "24h",
      sum: "amount",
      max: 1e15,
    },
  ],
  timeout_ms: 5000,
};
/** A keyed write that always asks a person; each operation writes to its own upstream namespace. */
const APPROVED = {
  name: "bench_approved_write",
  description: "Pay one invoice (benchmark tool: always needs approval).",
  input_schema: {
    type: "object",
    additionalProperties: false,
    properties: { ns: { type: "string" }, amount: { type: "integer" } },
    required: ["ns", "amount"],
  },
  risk: "write",
  idempotency: { mode: "header", header: "Idempotency-Key" },
  approval: "always",
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
  await call(toolgate.url, "PUT", `/v1/tools/${LIMITED.name}`, demo.key, {
    ...LIMITED,
    request: { method: "POST", url: `${upstream.url}/refunds` },
  });
  await call(toolgate.url, "PUT", `/v1/tools/${APPROVED.name}`, demo.key, {
    ...APPROVED,
    request: { method: "POST", url: `${upstream.url}/ns/{ns}/payments` },
  });
  // BENCH_WEBHOOK=1: one endpoint subscribed to every event (issue 18: delivery is off the path).
  if (env.BENCH_WEBHOOK === "1") {
    const hook = await call(toolgate.url, "PUT", "/v1/webhooks/bench", demo.key, {
      url: `${upstream.url}/webhooks/bench`,
      events: ["*"],
      format: "standard",
    });
    if (hook.status !== 201) throw new Error(`webhook not created: ${JSON.stringify(hook.body)}`);
  }
  // One run per concurrent client: a real deployment has one run per conversation.
  const runs = [];
  for (let i = 0; i < LANES; i++)
    runs.push(
      await createRun(
        toolgate.url,
        demo.key,
        ["charge_card", LOCKED.name, APPROVED.name, LIMITED.name],
        { charge_limit: 10_000_000, customer_id: `cus_${i}` },
      ),
    );
  // The delayed toolgate's runs (its setup pays the delay; its turns should not).
  const delayedRuns = [];
  if (delayed) {
    const other = await registerDemo(delayed.url, upstream.url, {
      runContext: { charge_limit: 10_000_000 },
    });
    for (let i = 0; i < LANES; i++)
      delayedRuns.push(
        await createRun(delayed.url, other.key, ["charge_card"], { charge_limit: 10_000_000 }),
      );
  }
  const turnLane = (run, body, base = toolgate.url) => ({
    url: `${base}/v1/runs/${run.run_id}/turns?format=native`,
    headers: { ...json, Authorization: `Bearer ${run.run_token}` },
    body,
  });
  const turn = (id, name, args) =>
    `{"calls":[{"id":"${id}","name":"${name}","arguments":${args}}]}`;
  // Settle one operation per run for the replay scenario (amount = 1 + lane index).
  for (const [lane, run] of runs.entries())
    await call(toolgate.url, "POST", `/v1/runs/${run.run_id}/turns`, run.run_token, {
      calls: [
        { id: "settle", name: "charge_card", arguments: { amount: 1 + lane, currency: "usd" } },
      ],
    });

  let offset = 1_000;
  for (const concurrency of CONCURRENCY) {
    const common = {
      count: COUNTS[concurrency] ?? 600,
      concurrency,
      maxMs: MAX_MS,
      warmup: Math.max(10, 2 * concurrency),
    };
    const baselineRows = { rowsHeaders: ["X-Rows-Read", "X-Rows-Written"] };
    const toolgateLanes = (body) => ({
      expectSucceeded: true,
      offset,
      sqlRows: true,
      lanes: runs.map((run, lane) => turnLane(run, body(lane))),
    });
    // Each scenario its own call-id prefix: the same call ids with other content are a turn_conflict.
    const locked = (prefix, account) =>
      toolgateLanes(() =>
        turn(`${prefix}{{n}}`, LOCKED.name, `{"account":"${account}","amount":{{n}}}`),
      );
    const scenarios = [
      [
        "(a) direct fetch",
        {
          ...baselineRows,
          lanes: [{ url: `${baseline.url}/direct`, headers: json, body: charge("{{n}}") }],
        },
      ],
      [
        "(b) durable floor",
        {
          ...baselineRows,
          lanes: [{ url: `${baseline.url}/durable`, headers: json, body: charge("{{n}}") }],
        },
      ],
      [
        "(w) workflow step.do",
        { lanes: [{ url: `${baseline.url}/workflow`, headers: json, body: charge("{{n}}") }] },
      ],
      [
        "(c) toolgate new write",
        toolgateLanes(() => turn("b{{n}}", "charge_card", charge("{{n}}"))),
      ],
      ...(env.BENCH_FREEZE === "1"
        ? [
            [
              "(c) + 1 freeze elsewhere",
              {
                ...toolgateLanes(() => turn("z{{n}}", "charge_card", charge("{{n}}"))),
                // Amounts of its own: (c)'s again would be replays in the same runs.
                offset: offset + 20_000,
                freezeOther: LOCKED.name,
              },
            ],
          ]
        : []),
      [
        "(t) (c) paired: tenant +0 / +delay",
        {
          expectSucceeded: true,
          // Amounts of its own: (c)'s amounts again would be replays on A (the same arguments in
          // the same run), new writes on B — which is what (t) measured before this offset.
          offset: offset + 10_000,
          paired: true,
          // Client i alternates between its run on toolgate and its run on the delayed toolgate.
          lanes: runs.flatMap((run, lane) =>
            delayed
              ? [
                  turnLane(run, turn("t{{n}}", "charge_card", charge("{{n}}"))),
                  turnLane(
                    delayedRuns[lane],
                    turn("t{{n}}", "charge_card", charge("{{n}}")),
                    delayed.url,
                  ),
                ]
              : [],
          ),
        },
      ],
      [
        "(v) (c) webhook off / on",
        { ...toolgateLanes(() => turn("v{{n}}", "charge_card", charge("{{n}}"))), webhook: true },
      ],
      [
        "(l) new write + 1 windowed limit",
        toolgateLanes(() => turn("w{{n}}", LIMITED.name, `{"amount":{{n}}}`)),
      ],
      [
        "(d) toolgate replay",
        toolgateLanes((lane) => turn("r{{n}}", "charge_card", charge(1 + lane))),
      ],
      ["(e) write under a lock", locked("l", "acct_{{n}}")],
      ["(f) one hot resource", locked("h", `hot_${concurrency}`)],
      ["(g) 1,000 resources", locked("g", "pool_{{n%1000}}")],
      [
        "(h) approve → upstream",
        {
          ...toolgateLanes(() =>
            turn("a{{n}}", APPROVED.name, `{"ns":"apv_{{n}}","amount":{{n}}}`),
          ),
          expectSucceeded: false,
          approval: {
            approve: {
              url: toolgate.url,
              headers: { ...json, Authorization: `Bearer ${demo.key}` },
            },
            arrivedUrl: `${upstream.url}/_control/wait?ns=apv_{{n}}&requests=1`,
          },
        },
      ],
    ];
    offset += 30_000; // charge_card allows amounts up to 100000: stay inside the schema
    for (const [name, scenario] of scenarios) {
      if (ONLY && !ONLY.has(name[1])) continue;
      const spec = { ...common, ...scenario };
      try {
        log(`${name} at concurrency ${concurrency}`);
        // One hold freeze on another tool, in force for this scenario only (its runs are told).
        const freezeId = spec.freezeOther ? `bench-${concurrency}` : null;
        if (freezeId)
          await call(toolgate.url, "PUT", `/v1/freezes/${freezeId}`, demo.key, {
            scope: { tool: spec.freezeOther },
            mode: "hold",
            reason: "bench: a freeze on another tool",
          });
        const before = spec.sqlRows ? await sqlRows() : null;
        if (spec.paired) await warmPaired(spec, "w", 4000);
        const tenantBefore = spec.paired ? await tenantRpcs() : null;
        if (spec.webhook) {
          await webhookPasses(spec, concurrency, demo.key);
          continue;
        }
        const result = await load(spec);
        if (before) {
          // Counters that went down mean the isolate restarted mid-scenario: no figure, not a wrong one.
          const after = await sqlRows();
          const restarted = after.read < before.read || after.written < before.written;
          result.rowsRead = restarted ? null : (after.read - before.read) / result.sent;
          result.rowsWritten = restarted ? null : (after.written - before.written) / result.sent;
        }
        if (freezeId) await call(toolgate.url, "DELETE", `/v1/freezes/${freezeId}`, demo.key);
        if (result.groups) await pairedRows(spec, result, tenantBefore, concurrency);
        else rows.push({ name, concurrency, ...result });
      } catch (error) {
        rows.push({ name, concurrency, error: String(error.message ?? error).slice(0, 200) });
      }
    }
  }
} finally {
  await stopAll();
}

const fmt = (v, digits = 2) =>
  v === null || v === undefined || !Number.isFinite(v) ? "n/a" : v.toFixed(digits);
const find = (letter, c) =>
  rows.find((r) => r.name.startsWith(`(${letter})`) && r.concurrency === c && !r.error);
const lines = [];
const out = (line) => lines.push(line);
out(
  "scenario                  conc     n   p50 ms   p99 ms     req/s  p50/(a)  thr/(a)  p50/(b)  thr/(b)  rows r/op  rows w/op",
);
for (const r of rows) {
  if (r.error) {
    out(`${r.name.padEnd(25)} ${String(r.concurrency).padStart(4)}  error: ${r.error}`);
    continue;
  }
  const a = find("a", r.concurrency);
  const b = find("b", r.concurrency);
  const vsB = !r.name.startsWith("(a)") && !r.name.startsWith("(b)");
  out(
    `${r.name.padEnd(25)} ${String(r.concurrency).padStart(4)} ${String(r.n).padStart(5)} ${fmt(r.p50).padStart(8)} ${fmt(r.p99).padStart(8)} ${fmt(r.throughput, 0).padStart(9)}` +
      ` ${fmt(r.p50 / a?.p50).padStart(8)} ${fmt(r.throughput / a?.throughput).padStart(8)} ${(vsB ? fmt(r.p50 / b?.p50) : "").padStart(8)} ${(vsB ? fmt(r.throughput / b?.throughput) : "").padStart(8)}` +
      ` ${fmt(r.rowsRead, 1).padStart(10)} ${fmt(r.rowsWritten, 1).padStart(10)}`,
  );
}
const verdict = (ok) => (ok ? "met" : "MISSED");
out("");
// Issue 19's targets (ratios within this run); the earlier, stricter line stays as stretch goals.
out(
  "targets (issue 19): (c) p50 ≤ 1.5x (b), thr ≥ 0.65x (b) · ≤ 12 rows read and ≤ 6 written per (c) op · (d) thr ≥ 0.95x (b) · (t) p50 with the tenant +150 ms within 10% of +0 · (v) p50 with a webhook on every event within 10% of none (issue 18)",
);
for (const c of CONCURRENCY) {
  const [b, cc, d] = ["b", "c", "d"].map((l) => find(l, c));
  const parts = [];
  if (b && cc)
    parts.push(
      `(c)/(b) p50 ${fmt(cc.p50 / b.p50)} ${verdict(cc.p50 / b.p50 <= 1.5)}`,
      `(c)/(b) thr ${fmt(cc.throughput / b.throughput)} ${verdict(cc.throughput / b.throughput >= 0.65)}`,
    );
  if (cc)
    parts.push(
      `rows r (c) ${fmt(cc.rowsRead, 1)} ${verdict(cc.rowsRead <= 12)}`,
      `rows w (c) ${fmt(cc.rowsWritten, 1)} ${verdict(cc.rowsWritten <= 6)}`,
    );
  if (b && d)
    parts.push(
      `(d)/(b) thr ${fmt(d.throughput / b.throughput)} ${verdict(d.throughput / b.throughput >= 0.95)}`,
    );
  const v = ["v0", "v1", "v2", "v3"].map((l) => find(l, c));
  if (v.every(Boolean)) {
    const ratio = (v[1].p50 + v[2].p50) / (v[0].p50 + v[3].p50);
    parts.push(
      `(v) p50 webhook on / off ${fmt(ratio)} (${fmt(v[1].p50)}+${fmt(v[2].p50)} vs ${fmt(v[0].p50)}+${fmt(v[3].p50)} ms; same kind, pass to pass: off ${fmt(v[3].p50 / v[0].p50)}, on ${fmt(v[2].p50 / v[1].p50)}) ${verdict(ratio <= 1.1)}`,
    );
  }
  const [t0, t1, t2, t3] = ["t0", "t1", "t2", "t3"].map((l) => find(l, c));
  if (t0 && t1 && t2 && t3) {
    // B's own difference from A with no delay at all (A/A) is divided out.
    const ratio = t1.p50 / t0.p50 / (t3.p50 / t2.p50);
    parts.push(
      `(t1)/(t0) p50 ${fmt(t1.p50 / t0.p50)} ÷ A/A (t3)/(t2) ${fmt(t3.p50 / t2.p50)} = ${fmt(ratio)} (tenant +${TENANT_DELAY_MS} ms vs +0) ${verdict(Math.abs(ratio - 1) <= 0.1)}`,
    );
  }
  out(`  c=${c}: ${parts.join(" · ")}`);
}
out(
  "stretch: (c) p50 ≤ 1.3x (b), thr ≥ 0.8x (b) · (d) thr ≥ 0.8x (a) · (c) vs (w): thr ≥ 2x, p50 ≤ 0.5x · ≤ 6 rows written per (c) op (aim 4) · (f) ≥ 300 writes/s",
);
for (const c of CONCURRENCY) {
  const [a, b, cc, d, w, f] = ["a", "b", "c", "d", "w", "f"].map((l) => find(l, c));
  const parts = [];
  if (b && cc)
    parts.push(
      `(c)/(b) p50 ${fmt(cc.p50 / b.p50)} ${verdict(cc.p50 / b.p50 <= 1.3)}`,
      `(c)/(b) thr ${fmt(cc.throughput / b.throughput)} ${verdict(cc.throughput / b.throughput >= 0.8)}`,
    );
  if (a && d)
    parts.push(
      `(d)/(a) thr ${fmt(d.throughput / a.throughput)} ${verdict(d.throughput / a.throughput >= 0.8)}`,
    );
  if (w && cc)
    parts.push(
      `(c)/(w) thr ${fmt(cc.throughput / w.throughput)} ${verdict(cc.throughput / w.throughput >= 2)}`,
      `(c)/(w) p50 ${fmt(cc.p50 / w.p50)} ${verdict(cc.p50 / w.p50 <= 0.5)}`,
    );
  if (f && c > 1) parts.push(`(f) ${fmt(f.throughput, 0)}/s ${verdict(f.throughput >= 300)}`);
  if (parts.length > 0) out(`  c=${c}: ${parts.join(" · ")}`);
}
for (const note of tenantNotes) out(note);
for (const letter of ["c", "g"]) {
  const curve = CONCURRENCY.map((c) => [c, find(letter, c)]).filter(([, r]) => r);
  if (curve.length > 1)
    out(
      `  throughput curve (${letter}): ${curve.map(([c, r]) => `c=${c} ${fmt(r.throughput, 0)}/s`).join(" → ")}`,
    );
}
const table = lines.join("\n");
const version = (pkg) =>
  JSON.parse(readFileSync(join(ROOT, "node_modules", pkg, "package.json"), "utf8")).version;
const git = (...args) => {
  try {
    return execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
  } catch {
    return "?";
  }
};
const machine = `${cpus().length} × ${cpus()[0]?.model ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB; load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} at start, ${loadavg()
  .map((l) => l.toFixed(2))
  .join(" ")} at end`;
const header = `toolgate benchmark — ${startedAt.toISOString()} — commit ${git("rev-parse", "--short", "HEAD")}${git("status", "--porcelain", "src", "bench") ? " (+ local changes)" : ""} — node ${process.version}, wrangler ${version("wrangler")} dev (local workerd), loopback`;
console.log(`\n${header}\n${machine}\n${table}`);
if (WRITE) {
  // The notes under the table (measurements, analyses) are the record's history: kept as they are.
  const resultsPath = join(ROOT, "bench", "RESULTS.md");
  let previous = "";
  try {
    previous = readFileSync(resultsPath, "utf8");
  } catch {}
  const notesAt = previous.indexOf("\n## Notes");
  const notes = notesAt === -1 ? "" : previous.slice(notesAt);
  const command = `BENCH_N1=${COUNTS[1]} BENCH_N16=${COUNTS[16]} BENCH_N64=${COUNTS[64]} BENCH_MAX_MS=${MAX_MS}${env.BENCH_ONLY ? ` BENCH_ONLY=${env.BENCH_ONLY}` : ""}${env.BENCH_CONC ? ` BENCH_CONC=${env.BENCH_CONC}` : ""} npm run bench -- --write`;
  writeFileSync(
    resultsPath,
    `# Benchmark results (latest run)

Written by \`npm run bench -- --write\`; ratios are within this one run. Legend below the table.

- **When / what**: ${header}
- **Machine**: ${machine}
- **Command**: \`${command}\`

\`\`\`
${table}
\`\`\`

Legend: (a) a Worker fetching the upstream; (b) the minimal durable floor (a new Durable Object per
operation: write intent, fetch, write result); (w) the same call as a one-step Workflow
(\`step.do\`), created by a Worker that answers once the instance is complete (status polled every
5 ms); (c) a toolgate turn creating a new keyed write (\`charge_card\`: tenant secret, output
schema, limits); (d) a re-proposal of a settled write (new call id, same arguments); (e) a write
under its own uncontended resource lock; (f) every write on one resource (serialized by its lock);
(g) writes spread over 1,000 resources; (h) a write that needs approval, timed from the approve POST
to the upstream receiving the request (throughput: whole propose-approve cycles per second). Rows
per op for toolgate: the growth of the isolate's SQLite counters over the scenario (warm-up
included) divided by its operations, background work included; for (b) the object's own cursors.
${notes}`,
  );
  log("wrote bench/RESULTS.md");
}
