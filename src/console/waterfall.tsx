// The run page's attempt waterfall (issue 20): each operation a row, and each attempt, retry wait,
// approval wait, lock wait, unknown outcome and reconciliation a bar on one time axis, from the
// same run trace as the text timeline below it. Server-rendered SVG with a title and description,
// each bar with its own <title>, and the same spans as a table (readable without CSS or JS).
import type { FC } from "hono/jsx";
import type { TraceEvent } from "../domain/journal/trace-event.ts";
import type { OperationTimeline } from "./timeline.tsx";

type SpanKind =
  | "attempt"
  | "retry wait"
  | "approval"
  | "lock wait"
  | "quota wait"
  | "credential wait"
  | "unknown"
  | "reconcile"
  | "held";
export type Span = { kind: SpanKind; label: string; fromMs: number; toMs: number };

const KIND_FILL: Record<SpanKind, string> = {
  attempt: "#1e7d3a",
  "retry wait": "#9aa5b1",
  approval: "#b25e00",
  "lock wait": "#5b6573",
  "quota wait": "#7a5ba6",
  "credential wait": "#a67c00",
  unknown: "#8a3ffc",
  held: "#0b4f8a",
  reconcile: "#2b59c3",
};

/**
 * What each trace event does to the bars: opens one (its kind), ends the open one as a point
 * ("point"), or nothing ("none"). One case per type, no default: a new event fails tsc here.
 */
function barOf(event: TraceEvent): SpanKind | "point" | "none" {
  switch (event.type) {
    case "awaiting_approval":
      return "approval";
    case "awaiting_lock":
      return "lock wait";
    case "awaiting_quota":
    case "quota_waiting":
      return "quota wait";
    case "awaiting_credential":
    case "credential_required":
      return "credential wait";
    case "credential_ready":
      return "none";
    case "attempt_started":
      return "attempt";
    case "retry_scheduled":
      return "retry wait";
    case "outcome_unknown":
      return "unknown";
    case "reconcile_started":
      return "reconcile";
    case "held":
    case "paused":
      return "held";
    case "recorded":
    case "reported":
    case "proposed":
    case "validated":
      return "point";
    case "run_created":
    case "run_cancelled":
    case "turn_received":
    case "pruned":
    case "idempotency_unverified":
    case "limits_reserved":
    case "policy_decided":
    case "limit_denied":
    case "denied":
    case "cancel_requested":
    case "approval_requested":
    case "preview":
    case "approval_decided":
    case "approval_edited":
    case "approval_expired":
    case "approval_voted":
    case "approval_reminded":
    case "approval_escalated":
    case "lock_granted":
    case "lock_queued":
    case "lock_waiting_long":
    case "quota_granted":
    case "quota_deadline":
    case "credential_expired":
    case "attempt_finished":
    case "retry_deferred":
    case "reconcile_finished":
    case "reconcile_deferred":
    case "settle_scheduled":
    case "settle_window_ended":
    case "resolved":
    case "executing":
    case "reconciling":
    case "hold_released":
    case "grant_used":
    case "grant_lapsed":
    case "payment":
    case "resumed":
    case "retry_now":
    case "freeze_created":
    case "freeze_lifted":
    case "grant_created":
    case "grant_confirmed":
    case "grant_revoked":
    case "grant_use":
      return "none";
  }
}

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
    // A type this version no longer writes (an older stored trace) reads as "none".
    const kind = barOf(event) ?? "none";
    if (kind === "none") continue;
    close(at);
    if (kind === "point") continue;
    if (event.type === "attempt_started") attempt = event.attempt;
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
