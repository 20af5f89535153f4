// The operation's trace beyond the log rows: events are annotated, redacted by the tool's `redact`
// pointers and hash-chained inside the transaction that appends them (domain/trace.ts); each attempt
// and decision is one JSON log line; a recorded operation's spans are pushed to the OTLP collector
// in the background; deliveries of a recorded result are traced at most MAX_REPORTED_EVENTS times.
import type { Step, TraceEvent } from "../../domain/operation/index.ts";
import { otlpTrace } from "../../domain/otlp.ts";
import { reportedEvent } from "../../domain/journal/trace-event.ts";
import { logLine, traceStep } from "../../domain/trace.ts";
import { seal } from "../../domain/trace-chain.ts";
import type { Env } from "../env.ts";
import { collectorFor, pushSpans } from "../otlp-push.ts";
import type { FrozenRow, Head } from "./contracts.ts";
import { toolName, type OperationLog } from "./log.ts";

/** Deliveries of one recorded result kept in its trace (later replays are answered, not traced). */
export const MAX_REPORTED_EVENTS = 100;

export type Reported = { appended: boolean; full: boolean };

/** The trace events of one changed step, sealed onto the log's chain (inside its transaction). */
export function traceOf(
  log: OperationLog,
  head: Head | null,
  row: FrozenRow,
  step: Step,
  nowMs: number,
): TraceEvent[] {
  return traceStep({
    prev: head?.state ?? null,
    next: step.state,
    events: step.trace,
    nowMs,
    last: head ? log.lastLink() : null,
    details: {
      redaction: log.redaction(row),
      risk: row.risk ?? null,
      arguments: row.trace_content?.arguments ? JSON.parse(row.input) : undefined,
      includeResult: row.trace_content?.result ?? false,
      shadow: row.plan.shadow !== undefined,
    },
  });
}

/**
 * The recorded result went to the caller in a turn response: appended once per (turn, format),
 * so "recorded but never reported" stays visible. Only a recorded operation is reported, and only
 * its first MAX_REPORTED_EVENTS deliveries: an agent re-proposing a settled call forever is
 * answered every time but cannot grow the log (and every trace export) without bound.
 */
export function report(log: OperationLog, head: Head, turnId: string, format: string): Reported {
  if (head.state.phase !== "recorded") return { appended: false, full: false };
  const delivered = log.deliveries();
  const key = `${turnId} ${format}`;
  const full = () => delivered.size >= MAX_REPORTED_EVENTS;
  if (delivered.has(key) || full()) return { appended: false, full: full() };
  const nowMs = Date.now();
  log.store.transaction(() => {
    const current = log.head()!;
    const events = seal([reportedEvent(turnId, format, nowMs)], log.lastLink());
    log.append(current.seq + 1, nowMs, current.state, events, null);
  });
  delivered.add(key);
  // Not logged: a delivery is neither an attempt nor a decision (domain/trace.ts LOGGED).
  return { appended: true, full: full() };
}

/** One JSON line per attempt and per decision, from the already redacted events. */
export function logEvents(events: readonly TraceEvent[], row: FrozenRow): void {
  const context = {
    run_id: row.run_id,
    call_id: row.call_id,
    operation_id: row.id,
    tool: toolName(row),
  };
  for (const event of events) {
    const line = logLine(event, context);
    if (line) console.log(JSON.stringify(line));
  }
}

/** The spans of a recorded operation, pushed in the background (`waitUntil`). */
export function pushRecorded(
  env: Env,
  log: OperationLog,
  waitUntil: (promise: Promise<unknown>) => void,
): void {
  const head = log.head();
  // No collector configured: not even the spans are built (they cost ~2% of a new write's CPU).
  if (!head || !collectorFor(env)) return;
  const spans = otlpTrace(head.frozen.run_id, [
    { operation_id: head.frozen.id, events: log.eventsAsWritten() },
  ]);
  waitUntil(pushSpans(env, spans, head.frozen.id));
}
