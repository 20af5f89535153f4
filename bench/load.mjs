// Load driver, run as its own process: reads one scenario as JSON on argv[2], sends its requests
// with bounded count, concurrency and time, and prints latencies and rows written as JSON.
// Each lane has its own URL and headers (e.g. one run per concurrent client).
const scenario = JSON.parse(process.argv[2]);
const { lanes, count, concurrency, maxMs, warmup, rowsHeader } = scenario;

let next = scenario.offset ?? 0;
async function one(lane, laneIndex) {
  const n = next++;
  const body = lane.body.replaceAll("{{n}}", String(n)).replaceAll("{{lane}}", String(laneIndex));
  const started = performance.now();
  const res = await fetch(lane.url, { method: "POST", headers: lane.headers, body });
  const text = await res.text();
  const ms = performance.now() - started;
  if (res.status >= 300)
    throw new Error(`HTTP ${res.status} from ${lane.url}: ${text.slice(0, 300)}`);
  // A toolgate turn must have succeeded: a refusal would be measuring the wrong path.
  if (scenario.expectSucceeded && JSON.parse(text).results?.[0]?.status !== "succeeded")
    throw new Error(`not succeeded: ${text.slice(0, 300)}`);
  const rows = res.headers.get(rowsHeader);
  return { ms, rows: rows === null ? null : Number(rows) };
}

async function drive(total, deadlineMs) {
  const results = [];
  let sent = 0;
  const worker = async (laneIndex) => {
    const lane = lanes[laneIndex % lanes.length];
    while (sent < total && performance.now() < deadlineMs) {
      sent += 1;
      results.push(await one(lane, laneIndex % lanes.length));
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  return { results, elapsedMs: performance.now() - started };
}

await drive(warmup, performance.now() + maxMs);
const { results, elapsedMs } = await drive(count, performance.now() + maxMs);
const sorted = results.map((r) => r.ms).sort((a, b) => a - b);
const pick = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const rows = results.map((r) => r.rows).filter((r) => r !== null);
console.log(
  JSON.stringify({
    n: results.length,
    p50: pick(0.5),
    p99: pick(0.99),
    throughput: (results.length / elapsedMs) * 1000,
    rowsPerOp: rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : null,
  }),
);
