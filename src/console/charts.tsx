// Server-rendered SVG charts for the overview (issue 20): no script, no library. Each chart is an
// `img` with a title and a description a screen reader reads, colours from one palette with a
// legend beside it, and the same numbers as a table under a <details> (readable without CSS or JS).
// Colours are SVG presentation attributes (the console's CSP forbids inline style attributes).
import type { FC } from "hono/jsx";

export const STATUS_ORDER = [
  "succeeded",
  "pending",
  "awaiting_approval",
  "outcome_unknown",
  "rejected",
  "failed",
  "budget_exhausted",
  "cancelled",
] as const;
/** Fills with at least 3:1 contrast against white (non-text contrast). */
export const STATUS_FILL: Record<string, string> = {
  succeeded: "#1e7d3a",
  pending: "#2b59c3",
  awaiting_approval: "#b25e00",
  outcome_unknown: "#8a3ffc",
  rejected: "#c2410c",
  failed: "#a4161a",
  budget_exhausted: "#5c0b0e",
  cancelled: "#5b6573",
};
const label = (status: string) => status.replace(/_/g, " ");

type Slot = { atMs: number; by: Record<string, number> };

/** Calls per 5 minutes, stacked by outcome, over [fromMs, toMs). */
export const CallsChart: FC<{ id: string; slots: Slot[]; fromMs: number; toMs: number }> = ({
  id,
  slots,
  fromMs,
  toMs,
}) => {
  const bucket = 5 * 60_000;
  const n = Math.max(1, Math.ceil((toMs - fromMs) / bucket));
  const [w, h, left, bottom, top] = [720, 200, 40, 24, 8];
  const bw = (w - left) / n;
  const totals = slots.map((slot) => Object.values(slot.by).reduce((a, b) => a + b, 0));
  const max = Math.max(1, ...totals);
  const y = (v: number) => top + (h - top - bottom) * (1 - v / max);
  const present = STATUS_ORDER.filter((s) => slots.some((slot) => slot.by[s]));
  const total = totals.reduce((a, b) => a + b, 0);
  const hours = Math.round((toMs - fromMs) / 3_600_000);
  const summary = `${total} calls in the last ${hours} hours, at most ${max} in one 5-minute slot; ${present.map((s) => `${label(s)} ${slots.reduce((a, slot) => a + (slot.by[s] ?? 0), 0)}`).join(", ") || "none"}.`;
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${w} ${h}`}
        role="img"
        aria-labelledby={`${id}-title ${id}-desc`}
        width="100%"
        preserveAspectRatio="xMidYMid meet"
      >
        <title id={`${id}-title`}>Calls per 5 minutes, stacked by outcome</title>
        <desc id={`${id}-desc`}>{summary}</desc>
        <line x1={left} x2={w} y1={h - bottom} y2={h - bottom} stroke="#4a5360" />
        <text x={left - 6} y={top + 10} text-anchor="end" font-size="11" fill="#4a5360">
          {max}
        </text>
        <text x={left - 6} y={h - bottom} text-anchor="end" font-size="11" fill="#4a5360">
          0
        </text>
        {[0, 0.5, 1].map((f) => {
          const at = fromMs + f * (toMs - fromMs);
          return (
            <text
              x={left + f * (w - left)}
              y={h - 6}
              text-anchor={f === 0 ? "start" : f === 1 ? "end" : "middle"}
              font-size="11"
              fill="#4a5360"
            >
              {new Date(at).toISOString().slice(11, 16)} UTC
            </text>
          );
        })}
        {slots.map((slot) => {
          const i = Math.floor((slot.atMs - fromMs) / bucket);
          if (i < 0 || i >= n) return null;
          let acc = 0;
          return STATUS_ORDER.filter((s) => slot.by[s]).map((s) => {
            const v = slot.by[s]!;
            const rect = (
              <rect
                x={left + i * bw + 0.5}
                width={Math.max(1, bw - 1)}
                y={y(acc + v)}
                height={y(acc) - y(acc + v)}
                fill={STATUS_FILL[s]}
              >
                <title>{`${new Date(slot.atMs).toISOString().slice(11, 16)} UTC: ${v} ${label(s)}`}</title>
              </rect>
            );
            acc += v;
            return rect;
          });
        })}
      </svg>
      <Legend statuses={present} />
      <details>
        <summary>The numbers as a table</summary>
        <table>
          <caption>Calls per 5 minutes by outcome</caption>
          <thead>
            <tr>
              <th scope="col">From (UTC)</th>
              {present.map((s) => (
                <th scope="col" class="num">
                  {label(s)}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {slots.map((slot) => (
              <tr>
                <th scope="row">
                  {new Date(slot.atMs).toISOString().slice(0, 16).replace("T", " ")}
                </th>
                {present.map((s) => (
                  <td class="num">{slot.by[s] ?? 0}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
};

const Legend: FC<{ statuses: readonly string[] }> = ({ statuses }) => (
  <ul class="legend" aria-label="Legend">
    {statuses.map((s) => (
      <li>
        <svg width="12" height="12" aria-hidden="true">
          <rect width="12" height="12" fill={STATUS_FILL[s]} />
        </svg>{" "}
        {label(s)}
      </li>
    ))}
  </ul>
);

/** p50 and p95 latency per tool, as paired horizontal bars on one scale. */
export const LatencyChart: FC<{
  id: string;
  tools: Array<{ tool: string; p50_ms: number | null; p95_ms: number | null }>;
}> = ({ id, tools }) => {
  const rows = tools.filter((t) => t.p95_ms !== null);
  const max = Math.max(1, ...rows.map((t) => t.p95_ms ?? 0));
  const [w, left, rowH] = [720, 220, 30];
  const h = Math.max(1, rows.length) * rowH + 24;
  const x = (v: number) => left + ((w - left - 120) * v) / max;
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${w} ${h}`}
        role="img"
        aria-labelledby={`${id}-title ${id}-desc`}
        width="100%"
      >
        <title id={`${id}-title`}>Latency percentiles per tool</title>
        <desc id={`${id}-desc`}>
          {rows.length === 0
            ? "No tool has a recorded latency in this window."
            : rows.map((t) => `${t.tool}: p50 ${t.p50_ms} ms, p95 ${t.p95_ms} ms`).join("; ")}
        </desc>
        {rows.map((t, i) => (
          <g>
            <text x={left - 8} y={i * rowH + 18} text-anchor="end" font-size="12" fill="#1b1f24">
              {t.tool.length > 30 ? `${t.tool.slice(0, 29)}…` : t.tool}
            </text>
            <rect
              x={left}
              y={i * rowH + 6}
              width={x(t.p95_ms ?? 0) - left}
              height="16"
              fill="#9db7e8"
            />
            <rect
              x={left}
              y={i * rowH + 10}
              width={x(t.p50_ms ?? 0) - left}
              height="8"
              fill="#0b3d91"
            />
            <text x={x(t.p95_ms ?? 0) + 4} y={i * rowH + 18} font-size="11" fill="#4a5360">
              {`${t.p50_ms} / ${t.p95_ms} ms`}
            </text>
          </g>
        ))}
        <line x1={left} x2={left} y1="0" y2={h - 20} stroke="#4a5360" />
        <text x={left} y={h - 4} font-size="11" fill="#4a5360">
          0 ms
        </text>
        <text x={w - 120} y={h - 4} text-anchor="end" font-size="11" fill="#4a5360">
          {max} ms
        </text>
      </svg>
      <ul class="legend" aria-label="Legend">
        <li>
          <svg width="12" height="12" aria-hidden="true">
            <rect width="12" height="12" fill="#0b3d91" />
          </svg>{" "}
          p50 (median)
        </li>
        <li>
          <svg width="12" height="12" aria-hidden="true">
            <rect width="12" height="12" fill="#9db7e8" />
          </svg>{" "}
          p95
        </li>
      </ul>
    </figure>
  );
};
