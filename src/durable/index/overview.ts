// The index's overview (issue 20): queue counts, counts by status, per-tool rates and latency
// percentiles, calls per 5 minutes — of live calls; a shadow run's calls (which reached no
// production system) are counted apart, in `shadow`, never mixed into the live figures. Cost: it reads every operation row created in its window
// (≤ 7 days).
import { quantile } from "../../domain/index-feed.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { openStatusTerm } from "./write.ts";

export type ToolStats = {
  tool: string;
  calls: number;
  by_status: Record<string, number>;
  failure_rate: number;
  unknown_rate: number;
  p50_ms: number | null;
  p95_ms: number | null;
};
export type Overview = {
  since: string;
  queues: { awaiting_approval: number; outcome_unknown: number };
  runs: number;
  operations: Record<string, number>;
  tools: ToolStats[];
  /** Calls per 5 minutes by status, oldest first (only buckets with calls). */
  series: Array<{ at: string; by_status: Record<string, number> }>;
  /** Shadow runs' calls in the same window: by status and per tool (in no live figure above). */
  shadow: { operations: Record<string, number>; tools: ToolStats[] };
};

const BUCKET_MS = 5 * 60_000;

export function overview(store: SqlStore, sinceMs: number): Overview {
  const count = (query: string, ...args: SqlStorageValue[]) =>
    store.one<{ n: number }>(query, ...args)?.n ?? 0;
  const operations: Record<string, number> = {};
  const tools: ToolTally = new Map();
  const shadowOperations: Record<string, number> = {};
  const shadowTools: ToolTally = new Map();
  const series = new Map<number, Record<string, number>>();
  for (const row of store.all<{
    tool: string;
    status: string;
    latency_ms: number | null;
    created_at_ms: number;
    shadow: number;
  }>(
    "SELECT tool, status, latency_ms, created_at_ms, shadow FROM idx_ops WHERE created_at_ms >= ? ORDER BY created_at_ms",
    sinceMs,
  )) {
    if (row.shadow) {
      shadowOperations[row.status] = (shadowOperations[row.status] ?? 0) + 1;
      tally(shadowTools, row);
      continue;
    }
    operations[row.status] = (operations[row.status] ?? 0) + 1;
    tally(tools, row);
    const bucket = Math.floor(row.created_at_ms / BUCKET_MS) * BUCKET_MS;
    const slot = series.get(bucket) ?? {};
    slot[row.status] = (slot[row.status] ?? 0) + 1;
    series.set(bucket, slot);
  }
  return {
    since: new Date(sinceMs).toISOString(),
    queues: {
      awaiting_approval: count(
        `SELECT COUNT(*) AS n FROM idx_ops WHERE status = 'awaiting_approval' AND ${openStatusTerm("awaiting_approval")}`,
      ),
      outcome_unknown: count(
        `SELECT COUNT(*) AS n FROM idx_ops WHERE status = 'outcome_unknown' AND ${openStatusTerm("outcome_unknown")}`,
      ),
    },
    runs: count("SELECT COUNT(*) AS n FROM idx_runs WHERE created_at_ms >= ?", sinceMs),
    operations,
    tools: toolStats(tools),
    series: [...series].map(([at, by]) => ({ at: new Date(at).toISOString(), by_status: by })),
    shadow: { operations: shadowOperations, tools: toolStats(shadowTools) },
  };
}

type ToolTally = Map<string, { by: Record<string, number>; latencies: number[] }>;

function tally(tools: ToolTally, row: { tool: string; status: string; latency_ms: number | null }) {
  const tool = tools.get(row.tool) ?? { by: {}, latencies: [] };
  tool.by[row.status] = (tool.by[row.status] ?? 0) + 1;
  if (row.latency_ms !== null) tool.latencies.push(row.latency_ms);
  tools.set(row.tool, tool);
}

function toolStats(tools: ToolTally): ToolStats[] {
  return [...tools]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([tool, stats]) => {
      const calls = Object.values(stats.by).reduce((a, b) => a + b, 0);
      const sorted = stats.latencies.sort((a, b) => a - b);
      return {
        tool,
        calls,
        by_status: stats.by,
        failure_rate: ((stats.by.failed ?? 0) + (stats.by.budget_exhausted ?? 0)) / calls,
        unknown_rate: (stats.by.outcome_unknown ?? 0) / calls,
        p50_ms: quantile(sorted, 0.5),
        p95_ms: quantile(sorted, 0.95),
      };
    });
}
