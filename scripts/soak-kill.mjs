// The soak with real crashes (issue 11, item 5): seeded conversations of keyed, lookup-only,
// neither and read tools (the plan and invariants of test/support/soak.ts) driven through the
// public API against `wrangler dev`, which is SIGKILLed every few seconds and restarted on the same
// local storage. The demo upstream (demo/upstream.ts, one namespace per operation) is the ledger.
// Retries and reconciliation run on real alarms (short delays), so they must survive the kills.
// Reports per-kind outcomes, kills and client retries, and the invariants: ≤ 1 effect per key and
// per operation, succeeded ⇒ exactly one, nothing stuck, no "did not take effect" for an operation
// with an effect. Bounded: SOAK_KILL_MS (default 120 s, plus ≤ 45 s following writes still reconciling) of driving. Ports 8985–8987.
// SOAK_SEED=… SOAK_KILL_OPS=… node scripts/soak-kill.mjs
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import {
  bump,
  faultName,
  NOT_APPLIED,
  pendingClaimIsLie,
  planSoak,
  SETTLE_MS,
  showTally,
  streamFor,
  TIMEOUT_MS,
  violations,
} from "../test/support/soak.ts";
import { envInteger, oneLineErrors } from "./lib/cli.mjs";
import { DEV_VARS, startWrangler } from "./lib/dev-server.mjs";

// Exit 0 invariants held, 1 a violation (listed), 2 could not run (one line: bad settings, a busy port).
oneLineErrors("soak-kill");
const SEED = envInteger("SOAK_SEED", Date.now() % 1_000_000) >>> 0;
const OPS = envInteger("SOAK_KILL_OPS", 160);
const DRIVE_MS = envInteger("SOAK_KILL_MS", 120_000);
const PORT = envInteger("SOAK_KILL_PORT", 8986);
const CONCURRENCY = 6;
/** Real alarms: retries within a second or two, so operations settle inside the soak. */
const RETRY = {
  min_delay_ms: 150,
  initial_delay_ms: 300,
  max_delay_ms: 1500,
  max_elapsed_ms: 60_000,
};

/** The late schedule, compressed: 1 s, 2 s, then every 5 s (the default is 1 min, 5 min, 30 min, 2 h, 6 h). */
const SETTLE_SCHEDULE = "1000,2000,5000";
const people = {};

const state = mkdtempSync(join(tmpdir(), "toolgate-soak-kill-"));
const up = await startUpstream(PORT - 1);
const events = {};
const kinds = {};
const finals = {};
const faults = {};
const start = () =>
  startWrangler({
    port: PORT,
    inspectorPort: PORT + 1,
    // Late settlement (issue 24) on real alarms: its schedule compressed from minutes to seconds.
    vars: { ...DEV_VARS, TOOLGATE_SETTLE_SCHEDULE_MS: SETTLE_SCHEDULE },
    persistTo: join(state, "toolgate"),
    quiet: true,
  });
let server = await start();
const base = server.url;
const log = (message) => process.stderr.write(`soak-kill: ${message}\n`);
log(`seed ${SEED}, ${OPS} operations, drive ≤ ${DRIVE_MS / 1000} s`);

// ── the killer: SIGKILL wrangler dev (and workerd with it) at seeded intervals, restart on the same storage
const killerRng = streamFor(SEED ^ 0xdead, 0);
let down = null; // a promise while the server is restarting
let driving = true;
const killer = (async () => {
  while (driving) {
    await sleep(1500 + Math.floor(killerRng() * 3500));
    if (!driving) break;
    let restarted;
    down = new Promise((resolve) => (restarted = resolve));
    await server.kill();
    bump(events, "SIGKILLs");
    await sleep(100 + Math.floor(killerRng() * 400));
    for (let tries = 0; ; tries++) {
      try {
        server = await start();
        break;
      } catch (error) {
        if (tries >= 5) throw error;
        await sleep(500);
      }
    }
    bump(events, "restarts");
    down = null;
    restarted();
  }
})();

/** The public API, retried across kills (every call here is safe to repeat: turns dedupe by call ids). */
async function api(method, path, token, body, headers = {}) {
  for (let attempt = 0; ; attempt++) {
    if (down) await down;
    try {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.text();
      // A 5xx from a dying or starting runtime is the crash itself, not an answer: ask again.
      if (res.status >= 500 && attempt < 50) {
        bump(events, "client retries (5xx)");
        await sleep(200);
        continue;
      }
      return { status: res.status, body: text ? JSON.parse(text) : null };
    } catch (error) {
      if (attempt >= 50) throw error;
      bump(events, "client retries (connection)");
      await sleep(200);
    }
  }
}
const ledger = async (ns) => (await fetch(`${up.url}/_control/state?ns=${ns}`)).json();

const admin = DEV_VARS.TOOLGATE_ADMIN_TOKEN;
const tenant = (await api("POST", "/v1/admin/tenants", admin, { name: "soak-kill" })).body;
const key = (
  await api("POST", `/v1/admin/tenants/${tenant.tenant_id}/keys`, admin, {
    name: "soak",
    scopes: ["runs:write", "runs:read", "tools:write", "operations:resolve", "traces:read"],
  })
).body.key;

function toolFor(op, name, url) {
  const base = {
    name,
    description: "Charge the customer's card (soak tool).",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", exclusiveMinimum: 0 },
        currency: { enum: ["usd", "eur"] },
      },
      required: ["amount", "currency"],
    },
    output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    risk: "write",
    request: { method: "POST", url: `${url}/charges` },
    idempotency: { mode: "header", header: "Idempotency-Key" },
    timeout_ms: TIMEOUT_MS,
    max_attempts: op.maxAttempts,
    retry: RETRY,
  };
  switch (op.kind) {
    case "keyed":
      return base;
    case "lookup":
      return {
        ...base,
        idempotency: { mode: "none" },
        request: { ...base.request, headers: { "X-Client-Reference": "{idempotency_key}" } },
        reconcile: {
          url: `${url}/effects?idempotency_key={idempotency_key}`,
          settle_ms: SETTLE_MS,
        },
      };
    case "neither":
      return { ...base, idempotency: { mode: "none" } };
    case "read":
      return {
        ...base,
        output_schema: undefined,
        risk: "read",
        idempotency: { mode: "none" },
        request: { method: "GET", url: `${url}/orders/{amount}` },
      };
  }
}

const problems = [];
const records = [];
const deadline = Date.now() + DRIVE_MS;

async function conversation(plan) {
  const problem = (what) => problems.push(`conversation ${plan.index}: ${what}`);
  const tools = [];
  for (const [i, op] of plan.ops.entries()) {
    const name = `soak_${op.kind}_${plan.index}_${i}`;
    const ns = `kill_${SEED}_${plan.index}_${i}`;
    const url = `${up.url}/ns/${ns}`;
    const put = await api("PUT", `/v1/tools/${name}`, key, toolFor(op, name, url));
    if (put.status !== 201 && put.status !== 200)
      throw new Error(`tool registration: ${JSON.stringify(put.body)}`);
    if (op.faults.length > 0)
      await fetch(`${up.url}/_control/script?ns=${ns}`, {
        method: "POST",
        body: JSON.stringify(op.faults),
      });
    tools.push({ name, ns });
  }
  const run = await api("POST", "/v1/runs", key, {
    user: { id: "soak", scopes: [] },
    tools: tools.map((t) => t.name),
  });
  if (run.status !== 201) throw new Error(`run creation: ${JSON.stringify(run.body)}`);
  const { run_id: runId, run_token: token } = run.body;
  const calls = plan.ops.map((op, i) => ({
    id: `call_${i}`,
    name: tools[i].name,
    arguments: op.args,
  }));
  const tracked = [];
  const byId = new Map();
  const claims = [];
  const see = (envelope) => {
    const op = byId.get(envelope?.operation_id);
    if (!op) return;
    const seen = { ...envelope };
    op.seen.push(seen);
    if (envelope.status === "pending" && NOT_APPLIED.test(envelope.message ?? ""))
      claims.push(ledger(op.ns).then((l) => void (seen.liedWhenSeen = pendingClaimIsLie(l))));
  };
  const post = async (body, wait) => {
    const res = await api(
      "POST",
      `/v1/runs/${runId}/turns`,
      token,
      { calls: body },
      {
        Prefer: `wait=${wait}`,
      },
    );
    bump(events, "turn posts");
    if (res.status !== 200 && res.status !== 202) {
      problem(`turn post answered HTTP ${res.status}: ${JSON.stringify(res.body)}`);
      return null;
    }
    if (res.body.results.length !== body.length) problem(`wrong number of results`);
    res.body.results.forEach(see);
    return res.body;
  };
  const first = await post(calls, plan.waitSeconds);
  if (!first) return;
  plan.ops.forEach((op, i) => {
    const entry = {
      label: `c${plan.index}.${i}`,
      kind: op.kind,
      plan: op,
      operationId: first.results[i].operation_id,
      ns: tools[i].ns,
      seen: [first.results[i]],
    };
    tracked.push(entry);
    byId.set(entry.operationId, entry);
  });
  if (plan.twice !== "no") {
    const again = await post(calls, 0);
    again?.results.forEach(
      (e, i) =>
        e.operation_id !== tracked[i].operationId &&
        problem(`posted twice, call ${i} got two operations`),
    );
  }
  const turns = [first.turn_id];
  for (const [i, op] of plan.ops.entries()) {
    if (!op.repropose || op.kind === "read") continue;
    bump(events, "re-proposals");
    const again = await post([{ id: `again_${i}`, name: calls[i].name, arguments: op.args }], 0);
    if (!again) continue;
    turns.push(again.turn_id);
    if (again.results[0].operation_id !== tracked[i].operationId)
      problem(`re-proposed write ${tracked[i].label} mapped to another operation`);
  }
  // Drive until every turn is settled: polls (a poll also recovers an orphaned attempt after a kill).
  for (;;) {
    const polled = await Promise.all(
      turns.map((id) => api("GET", `/v1/runs/${runId}/turns/${id}?wait=2`, token)),
    );
    polled.forEach((res) => res.body?.results?.forEach(see));
    if (polled.every((res) => res.body?.status === "settled")) break;
    if (Date.now() > deadline + 60_000) {
      problem(`not settled 60 s after the drive ended (stuck)`);
      break;
    }
    await Promise.all(
      tracked.map(async (op) =>
        see((await api("GET", `/v1/operations/${op.operationId}?wait=1`, key)).body?.result),
      ),
    );
  }
  // A settled turn may still hold writes toolgate is reconciling or resending by alarm (outcome_unknown):
  // follow those until recorded, or for up to 45 s (then a person would decide; that is not stuck).
  const follow = Date.now() + 45_000;
  for (const op of tracked.filter((t) => t.kind === "keyed" || t.kind === "lookup")) {
    while (Date.now() < follow) {
      const view = (await api("GET", `/v1/operations/${op.operationId}?wait=2`, key)).body;
      see(view?.result);
      if (view?.phase === "recorded") break;
      if (view?.phase === "outcome_unknown" && (view.settling ?? null) === null) break;
    }
  }
  await Promise.all(claims);
  for (const op of tracked) {
    const view = (await api("GET", `/v1/operations/${op.operationId}`, key)).body;
    const l = await ledger(op.ns);
    bump(kinds, op.kind);
    bump(
      finals,
      `${op.kind}:${view.result.status}${view.result.code ? `/${view.result.code}` : ""}`,
    );
    if (view.phase === "outcome_unknown" && (view.settling ?? null) === null) bump(people, op.kind);
    op.plan.faults.forEach((fault) => bump(faults, faultName(fault)));
    bump(events, "upstream effects", l.effects.length);
    bump(events, "write requests", l.requests.filter((r) => r.method === "POST").length);
    const record = { ...op, final: { phase: view.phase, result: view.result }, ledger: l };
    records.push(record);
    problems.push(...violations(record));
  }
}

const plans = planSoak(SEED, OPS);
let next = 0;
const started = Date.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < plans.length && Date.now() < deadline) {
      const plan = plans[next++];
      await conversation(plan).catch((error) =>
        problems.push(`conversation ${plan.index}: driver error ${String(error)}`),
      );
    }
  }),
);
driving = false;
await killer.catch((error) => problems.push(`killer: ${String(error)}`));
if (down) await down;
server.stop();
await up.close();
rmSync(state, { recursive: true, force: true });

console.log(
  `\nsoak-kill seed ${SEED}: ${records.length} operations in ${((Date.now() - started) / 1000).toFixed(0)} s (${plans.length - next} planned conversations not started: drive bound)`,
);
console.log(`kinds: ${showTally(kinds)}`);
console.log(`final: ${showTally(finals)}`);
console.log(`faults scripted: ${showTally(faults)}`);
console.log(`events: ${showTally(events)}`);
console.log(`needing a person: keyed=${people.keyed ?? 0} (${showTally(people) || "none"})`);
if (problems.length > 0) {
  console.log(`\n${problems.length} violations (replay: SOAK_SEED=${SEED} SOAK_KILL_OPS=${OPS}):`);
  for (const p of problems) console.log(`  ${p}`);
  process.exit(1);
}
console.log(
  "invariants held: ≤ 1 effect per key and per operation, succeeded ⇒ exactly one, nothing stuck, no false 'did not take effect'",
);
process.exit(0);

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
