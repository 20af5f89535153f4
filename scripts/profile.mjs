// npm run profile: a reproducible CPU profile of toolgate's new-write and replay paths, taken
// inside `wrangler dev` through its inspector (Chrome DevTools protocol: the inspector port's /json
// lists the worker's `webSocketDebuggerUrl`; Profiler.enable/start/stop). Local workerd runs the
// Worker and all its Durable Objects in one isolate, so one profile covers the edge, the RunObject,
// the OperationObject and the TenantObject. Each phase drives PROFILE_MS of load at PROFILE_CONC
// from this process, then prints the top self-time frames and a rollup by module; the raw
// .cpuprofile files land in bench/results/ (open them in Chrome DevTools → Performance).
// A third phase profiles the bench's durable floor ((b): bench/worker, a new Durable Object per
// request that writes, fetches and writes) the same way, so a frame both share — the RPC that
// makes a new object — can be compared per operation.
// Ports 8980 (upstream), 8981 (toolgate), 8982 (its inspector), 8983/8984 (the floor and its
// inspector) unless PROFILE_PORT is set.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import { call, createRun, DEV_VARS, registerDemo, ROOT, startWrangler } from "./lib/dev-server.mjs";

const PORT = Number(process.env.PROFILE_PORT ?? 8981);
const UPSTREAM_PORT = Number(process.env.PROFILE_UPSTREAM_PORT ?? PORT - 1);
const MS = Number(process.env.PROFILE_MS ?? 8_000);
const CONCURRENCY = Number(process.env.PROFILE_CONC ?? 8);
const TOP = Number(process.env.PROFILE_TOP ?? 25);
const state = mkdtempSync(join(tmpdir(), "toolgate-profile-"));
const outDir = join(ROOT, "bench", "results");
mkdirSync(outDir, { recursive: true });

const upstream = await startUpstream(UPSTREAM_PORT);
const toolgate = await startWrangler({
  port: PORT,
  inspectorPort: PORT + 1,
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: join(state, "toolgate"),
  quiet: true,
});
const floor = await startWrangler({
  config: join(ROOT, "bench", "worker", "wrangler.toml"),
  port: PORT + 2,
  inspectorPort: PORT + 3,
  vars: { UPSTREAM_URL: upstream.url },
  persistTo: join(state, "floor"),
  quiet: true,
});

/** A minimal CDP client over Node 24's global WebSocket. */
async function connect(port) {
  const deadline = Date.now() + 15_000;
  let target;
  while (!target && Date.now() < deadline) {
    try {
      const list = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
      target = list.find((t) => t.webSocketDebuggerUrl && !/proxy/i.test(t.title ?? ""));
      target ??= list.find((t) => t.webSocketDebuggerUrl);
    } catch {}
    if (!target) await new Promise((r) => setTimeout(r, 250));
  }
  if (!target) throw new Error(`no inspector target on port ${port}`);
  // The inspector proxy refuses a connection without a local Origin (undici's WebSocket sends none).
  const ws = new WebSocket(target.webSocketDebuggerUrl, {
    headers: { Origin: `http://127.0.0.1:${port}` },
  });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let id = 0;
  const waiting = new Map();
  ws.onmessage = (message) => {
    const data = JSON.parse(message.data);
    const pending = data.id !== undefined && waiting.get(data.id);
    if (!pending) return;
    waiting.delete(data.id);
    if (data.error) pending.reject(new Error(JSON.stringify(data.error)));
    else pending.resolve(data.result);
  };
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      id += 1;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close(), title: target.title };
}

const succeeded = (text) => JSON.parse(text).results?.[0]?.status === "succeeded";

async function drive(lanes, makeBody, ok = succeeded) {
  let n = 0;
  let done = 0;
  const deadline = performance.now() + MS;
  await Promise.all(
    lanes.map(async (lane) => {
      while (performance.now() < deadline) {
        const res = await fetch(lane.url, {
          method: "POST",
          headers: lane.headers,
          body: makeBody(n++, lane),
        });
        const text = await res.text();
        if (!ok(text, res)) throw new Error(`not succeeded: ${text.slice(0, 200)}`);
        done += 1;
      }
    }),
  );
  return done;
}

/** Self time per frame (function @ file:line) and per module, from a V8 .cpuprofile. */
function summarize(profile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  // Samples, not time deltas: on a shared machine a descheduled isolate makes one sample's delta
  // huge, and weighting by it blames whatever happened to be on the stack.
  const intervalUs = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length);
  for (const id of profile.samples) selfUs.set(id, (selfUs.get(id) ?? 0) + intervalUs);
  let total = 0;
  const frames = new Map();
  const modules = new Map();
  for (const [id, us] of selfUs) {
    const { callFrame } = byId.get(id);
    total += us;
    const file = (callFrame.url || "(native)").replace(/^.*\/(node_modules\/)?/, "");
    const label = `${callFrame.functionName || "(anonymous)"}  ${file}:${callFrame.lineNumber + 1}`;
    frames.set(label, (frames.get(label) ?? 0) + us);
    const module = /node_modules\/(@[^/]+\/[^/]+|[^/]+)/.exec(callFrame.url)?.[1] ?? file;
    modules.set(module, (modules.get(module) ?? 0) + us);
  }
  // Inclusive time: each sample counts once for every distinct function on its stack.
  const parent = new Map();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const inclusive = new Map();
  for (const [id, us] of selfUs) {
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const { callFrame } = byId.get(at);
      if (!callFrame.url || callFrame.functionName === "") continue;
      const label = `${callFrame.functionName}  ${callFrame.url.replace(/^.*\//, "")}:${callFrame.lineNumber + 1}`;
      if (seen.has(label)) continue;
      seen.add(label);
      inclusive.set(label, (inclusive.get(label) ?? 0) + us);
    }
  }
  // By part of the new write (issue 32): a sample counts for each part with one of its functions on
  // the stack; "new object" is the RPC frame's own time (the platform making a new Durable Object,
  // which the floor pays too).
  const partUs = Object.fromEntries(Object.keys(PARTS).map((part) => [part, 0]));
  for (const [id, us] of selfUs) {
    const names = new Set();
    for (let at = id; at !== undefined; at = parent.get(at))
      names.add(byId.get(at).callFrame.functionName);
    for (const [part, fns] of Object.entries(PARTS))
      if (
        part === "new object"
          ? byId.get(id).callFrame.functionName === "observe"
          : fns.some((f) => names.has(f))
      )
        partUs[part] += us;
  }
  const top = (map, k) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([label, us]) => `  ${((100 * us) / total).toFixed(1).padStart(5)}%  ${label}`);
  return {
    total,
    frames: top(frames, TOP),
    inclusive: top(inclusive, TOP),
    modules: top(modules, 12),
    parts: partUs,
  };
}

/** The parts `summarize` reports, by the functions that mark them (bundle names of src/). */
const PARTS = {
  edge: ["dispatch"],
  run: ["postTurn"],
  "new object": [],
  submit: ["submit"],
  attempt: ["runAttempt", "attemptOnce"],
  events: ["sendNow", "sendOperationEvents", "sendEvents", "handleEventBatch", "receiveEvents"],
  index: ["ingest"],
  report: ["reported"],
};

const json = { "Content-Type": "application/json" };
let exitCode = 0;
try {
  const demo = await registerDemo(toolgate.url, upstream.url, {
    runContext: { charge_limit: 10_000_000 },
  });
  const lanes = [];
  for (let i = 0; i < CONCURRENCY; i++) {
    const run = await createRun(toolgate.url, demo.key, ["charge_card"], {
      charge_limit: 10_000_000,
    });
    lanes.push({
      index: i,
      run,
      url: `${toolgate.url}/v1/runs/${run.run_id}/turns`,
      headers: { ...json, Authorization: `Bearer ${run.run_token}` },
    });
    await call(toolgate.url, "POST", `/v1/runs/${run.run_id}/turns`, run.run_token, {
      calls: [{ id: "settle", name: "charge_card", arguments: { amount: 1 + i, currency: "usd" } }],
    });
  }
  const turn = (id, amount) =>
    `{"calls":[{"id":"${id}","name":"charge_card","arguments":{"amount":${amount},"currency":"usd"}}]}`;
  const floorLanes = lanes.map((lane) => ({ ...lane, url: `${floor.url}/durable`, headers: json }));
  const charge = (n) => `{"amount":${1000 + n},"currency":"usd"}`;
  const recorded = (text, res) => res.ok && JSON.parse(text).id !== undefined;
  const phases = [
    ["new-write", PORT + 1, lanes, (n) => turn(`p${n}`, 1000 + n), succeeded],
    ["replay", PORT + 1, lanes, (n, lane) => turn(`r${n}`, 1 + lane.index), succeeded],
    ["floor", PORT + 3, floorLanes, charge, recorded],
  ];
  // A short unprofiled warm-up compiles the hot code first.
  await drive(lanes, (n) => turn(`w${n}`, 50_000 + n)).catch(() => 0);
  await drive(floorLanes, charge, recorded).catch(() => 0);
  const inspectors = new Map();
  for (const [name, inspectorPort, phaseLanes, body, ok] of phases) {
    let inspector = inspectors.get(inspectorPort);
    if (!inspector) {
      inspector = await connect(inspectorPort);
      await inspector.send("Profiler.enable");
      await inspector.send("Profiler.setSamplingInterval", { interval: 200 });
      inspectors.set(inspectorPort, inspector);
    }
    await inspector.send("Profiler.start");
    const started = performance.now();
    const ops = await drive(phaseLanes, body, ok);
    const elapsedMs = performance.now() - started;
    const { profile } = await inspector.send("Profiler.stop");
    const file = join(outDir, `profile-${name}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    const summary = summarize(profile);
    const cpuMsPerOp = summary.total / 1000 / ops;
    console.log(
      `\n${name}: ${ops} ops in ${(elapsedMs / 1000).toFixed(1)} s at concurrency ${CONCURRENCY} (${((ops / elapsedMs) * 1000).toFixed(0)}/s); isolate CPU sampled ${(summary.total / 1000).toFixed(0)} ms = ${cpuMsPerOp.toFixed(2)} ms/op (idle included as "(idle)")`,
    );
    console.log(`top ${TOP} self-time frames:\n${summary.frames.join("\n")}`);
    console.log(`top ${TOP} by inclusive time (JS functions):\n${summary.inclusive.join("\n")}`);
    console.log(`by module:\n${summary.modules.join("\n")}`);
    console.log(
      `by part, inclusive (run includes the new object; ms/op):\n${Object.entries(summary.parts)
        .map(([part, us]) => `  ${part.padEnd(11)} ${(us / 1000 / ops).toFixed(2)}`)
        .join("\n")}`,
    );
    console.log(`raw profile: ${file}`);
  }
  for (const inspector of inspectors.values()) inspector.close();
} catch (error) {
  console.error(error);
  exitCode = 1;
} finally {
  toolgate.stop();
  floor.stop();
  await upstream.close();
  rmSync(state, { recursive: true, force: true });
}
process.exit(exitCode);
