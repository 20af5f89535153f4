// Load driver, run as its own process: reads one scenario as JSON on argv[2], sends its requests
// with bounded count, concurrency and time, and prints latencies and rows as JSON.
// Each lane has its own URL and headers (e.g. one run per concurrent client). `paired`: lanes come
// in pairs (2i, 2i+1) and client i alternates between its two, so both sides of a comparison share
// the same moment's machine load; `groups` then reports each side's latencies on their own.
// `approval` scenarios time one thing per operation: from the approve POST to the upstream
// receiving the request (its /_control/wait answering for that operation's own namespace).
const scenario = JSON.parse(process.argv[2]);
const { lanes, count, concurrency, maxMs, warmup, rowsHeaders } = scenario;

let next = scenario.offset ?? 0;
/** {{n}}: the request's number; {{n%M}}: it modulo M (a pool of M resources); {{lane}}: the client. */
const fill = (text, n, lane) =>
  text
    .replaceAll("{{n}}", String(n))
    .replace(/\{\{n%(\d+)\}\}/g, (_, m) => String(n % Number(m)))
    .replaceAll("{{lane}}", String(lane));

/** A request that never answers fails the scenario instead of hanging the bench. */
const REQUEST_TIMEOUT_MS = Math.max(10_000, maxMs);

async function post(url, headers, body) {
  const res = await fetch(url, {
    method: "POST",
    headers,
    body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  }).catch((error) => {
    throw new Error(`no answer from ${url} within ${REQUEST_TIMEOUT_MS} ms (${error.name})`);
  });
  const text = await res.text();
  if (res.status >= 300 && !(res.status === 202 && scenario.approval))
    throw new Error(`HTTP ${res.status} from ${url}: ${text.slice(0, 300)}`);
  return { res, text };
}

async function one(lane, laneIndex) {
  const n = next++;
  const body = fill(lane.body, n, laneIndex);
  if (scenario.approval) return approvalCycle(lane, n, body);
  const started = performance.now();
  const { res, text } = await post(lane.url, lane.headers, body);
  const ms = performance.now() - started;
  // A toolgate turn must have succeeded: a refusal would be measuring the wrong path.
  if (scenario.expectSucceeded && JSON.parse(text).results?.[0]?.status !== "succeeded")
    throw new Error(`not succeeded: ${text.slice(0, 300)}`);
  const rows = rowsHeaders?.map((name) => res.headers.get(name));
  return { ms, rows: rows && rows.every((r) => r !== null) ? rows.map(Number) : null };
}

async function approvalCycle(lane, n, body) {
  const { text } = await post(lane.url, { ...lane.headers, Prefer: "wait=0" }, body);
  const envelope = JSON.parse(text).results?.[0];
  if (envelope?.status !== "awaiting_approval")
    throw new Error(`not awaiting approval: ${text.slice(0, 300)}`);
  const { approve } = scenario.approval;
  const started = performance.now();
  const arrived = fetch(fill(scenario.approval.arrivedUrl, n, 0)).then(async (res) => {
    const seen = await res.json();
    if (seen.requests < 1) throw new Error(`the upstream never saw operation ${n}`);
    return performance.now();
  });
  await post(
    `${approve.url}/v1/operations/${envelope.operation_id}/approve`,
    approve.headers,
    '{"reason":"bench"}',
  );
  return { ms: (await arrived) - started, rows: null };
}

async function drive(total, deadlineMs) {
  const results = [];
  let sent = 0;
  const worker = async (laneIndex) => {
    let turn = laneIndex;
    while (sent < total && performance.now() < deadlineMs) {
      sent += 1;
      const group = scenario.paired ? turn++ % 2 : 0;
      const index = scenario.paired
        ? (2 * laneIndex + group) % lanes.length
        : laneIndex % lanes.length;
      results.push({ ...(await one(lanes[index], index)), group });
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  return { results, elapsedMs: performance.now() - started };
}

// Warm-up is bounded to a third of the scenario's time: the bench as a whole stays within ~6 minutes.
const warm = await drive(warmup, performance.now() + maxMs / 3);
const { results, elapsedMs } = await drive(count, performance.now() + maxMs);
const percentiles = (of) => {
  const sorted = of.map((r) => r.ms).sort((a, b) => a - b);
  return (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const pick = percentiles(results);
const groups = scenario.paired
  ? [0, 1].map((group) => {
      const mine = results.filter((r) => r.group === group);
      const at = percentiles(mine);
      return { n: mine.length, p50: at(0.5), p99: at(0.99) };
    })
  : null;
const rows = results.map((r) => r.rows).filter((r) => r !== null);
const mean = (i) => (rows.length ? rows.reduce((a, r) => a + r[i], 0) / rows.length : null);
console.log(
  JSON.stringify({
    n: results.length,
    sent: warm.results.length + results.length,
    p50: pick(0.5),
    p99: pick(0.99),
    throughput: (results.length / elapsedMs) * 1000,
    rowsRead: mean(0),
    rowsWritten: mean(1),
    groups,
  }),
);
