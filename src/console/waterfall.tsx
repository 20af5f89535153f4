// The run page's attempt waterfall (issue 20): each operation a row, and each attempt, retry wait,
// approval wait, lock wait, unknown outcome and reconciliation a bar on one time axis, from the
// same run trace as the text timeline below it. Server-rendered SVG with a title and description,
// each bar with its own <title>, and the same spans as a table (readable without CSS or JS).
import type { FC } from "hono/jsx";
import type { TraceEvent } from "../domain/operation/index.ts";
import type { OperationTimeline } from "./timeline.tsx";

type SpanKind = "attempt" | "retry wait" | "approval" | "lock wait" | "unknown" | "reconcile";
export type Span = { kind: SpanKind; label: string; fromMs: number; toMs: number };

const KIND_FILL: Record<SpanKind, string> = {
  attempt: "#1e7d3a",
  "retry wait": "#9aa5b1",
  approval: "#b25e00",
  "lock wait": "#5b6573",
  unknown: "#8a3ffc",
  reconcile: "#2b59c3",
};

/** The state each trace event enters, as a waterfall bar (null: a point, not a span). */
const ENTERS: Record<string, SpanKind | null> = {
  awaiting_approval: "approval",
  awaiting_lock: "lock wait",
  attempt_started: "attempt",
  retry_scheduled: "retry wait",
  outcome_unknown: "unknown",
  reconcile_started: "reconcile",
  recorded: null,
  reported: null,
  proposed: null,
  validated: null,
};

/** One operation's spans: each state-entering event opens a bar that the next one closes. */
export function spansOf(events: readonly TraceEvent[], nowMs: number): Span[] {
  const spans: Span[] = [];
  let open: Span | null = null;
  let attempt = 0;
  const close = (atMs: number) => {
    if (open) spans.push({ ...open, toMs: Math.max(open.fromMs, atMs) });
    open = null;
  };
  for (const event of events) {
    const at = Number(event.at_ms);
    if (!Number.isFinite(at)) continue;
    if (event.type === "attempt_finished" && open?.kind === "attempt") {
      close(at);
      continue;
    }
    if (!(event.type in ENTERS)) continue;
    close(at);
    const kind = ENTERS[event.type];
    if (!kind) continue;
    if (kind === "attempt")
      attempt = typeof event.attempt === "number" ? event.attempt : attempt + 1;
    open = { kind, label: kind === "attempt" ? `attempt ${attempt}` : kind, fromMs: at, toMs: at };
  }
  close(nowMs);
  return spans;
}

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

export const Waterfall: FC<{ operations: OperationTimeline[]; nowMs: number }> = ({
  operations,
  nowMs,
}) => {
  const rows = operations.map((op) => ({ op, spans: spansOf(op.events, nowMs) }));
  const all = rows.flatMap((row) => row.spans);
  if (all.length === 0) return <p class="empty">No attempt or wait to draw yet.</p>;
  const from = Math.min(...all.map((s) => s.fromMs));
  const to = Math.max(from + 1, ...all.map((s) => s.toMs));
  const [w, left, rowH] = [720, 200, 26];
  const h = rows.length * rowH + 24;
  const x = (ms: number) => left + ((w - left - 10) * (ms - from)) / (to - from);
  const kinds = [...new Set(all.map((s) => s.kind))];
  return (
    <figure class="chart waterfall">
      <svg
        viewBox={`0 0 ${w} ${h}`}
        role="img"
        aria-labelledby="waterfall-title waterfall-desc"
        width="100%"
      >
        <title id="waterfall-title">Attempt waterfall</title>
        <desc id="waterfall-desc">
          {`${rows.length} operations over ${to - from} ms. ` +
            rows
              .map(
                ({ op, spans }) =>
                  `${op.tool}: ${spans.map((s) => `${s.label} ${s.toMs - s.fromMs} ms`).join(", ") || "no spans"}`,
              )
              .join("; ")}
        </desc>
        {rows.map(({ op, spans }, i) => (
          <g data-operation={op.operationId}>
            <a href={`#${op.operationId}`}>
              <text x={left - 8} y={i * rowH + 17} text-anchor="end" font-size="12" fill="#0b57d0">
                {op.tool.length > 26 ? `${op.tool.slice(0, 25)}…` : op.tool}
              </text>
            </a>
            {spans.map((s) => (
              <rect
                x={x(s.fromMs)}
                y={i * rowH + 5}
                width={Math.max(2, x(s.toMs) - x(s.fromMs))}
                height="16"
                fill={KIND_FILL[s.kind]}
                data-kind={s.kind}
              >
                <title>{`${op.tool} ${s.label}: ${s.toMs - s.fromMs} ms from ${clock(s.fromMs)} UTC`}</title>
              </rect>
            ))}
          </g>
        ))}
        <line x1={left} x2={w - 10} y1={h - 20} y2={h - 20} stroke="#4a5360" />
        <text x={left} y={h - 4} font-size="11" fill="#4a5360">
          {clock(from)} UTC
        </text>
        <text x={w - 10} y={h - 4} text-anchor="end" font-size="11" fill="#4a5360">
          +{to - from} ms
        </text>
      </svg>
      <ul class="legend" aria-label="Legend">
        {kinds.map((kind) => (
          <li>
            <svg width="12" height="12" aria-hidden="true">
              <rect width="12" height="12" fill={KIND_FILL[kind]} />
            </svg>{" "}
            {kind}
          </li>
        ))}
      </ul>
      <details>
        <summary>The spans as a table</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Operation</th>
              <th scope="col">Span</th>
              <th scope="col">From (UTC)</th>
              <th scope="col" class="num">
                Duration
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.flatMap(({ op, spans }) =>
              spans.map((s) => (
                <tr>
                  <td>
                    <a href={`#${op.operationId}`}>{op.tool}</a>
                  </td>
                  <td>{s.label}</td>
                  <td>{clock(s.fromMs)}</td>
                  <td class="num">{s.toMs - s.fromMs} ms</td>
                </tr>
              )),
            )}
          </tbody>
        </table>
      </details>
    </figure>
  );
};
