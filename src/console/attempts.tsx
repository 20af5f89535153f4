// An unknown outcome's attempts and what the upstream said, from the operation's own log: one table
// row per attempt (sent, answered, the observation in words plus its raw kind, status and detail),
// then the status lookups. An attempt with no answer recorded says so (a crash or a hang).
import { eventsOf, type ObservedSummary, type TraceEvent } from "../domain/journal/trace-event.ts";
import { utc } from "./format.ts";

type AttemptRow = {
  attempt: number;
  sentAtMs: number | null;
  answeredAtMs: number | null;
  observed: ObservedSummary | null;
};

/** One row per attempt from the log; an attempt with no answer recorded says so (a crash or a hang). */
export function attemptRows(events: TraceEvent[]): AttemptRow[] {
  const rows = new Map<number, AttemptRow>();
  for (const event of events) {
    if (event.type !== "attempt_started" && event.type !== "attempt_finished") continue;
    const { attempt } = event;
    const row = rows.get(attempt) ?? {
      attempt,
      sentAtMs: null,
      answeredAtMs: null,
      observed: null,
    };
    if (event.type === "attempt_started") row.sentAtMs = event.at_ms;
    else {
      row.answeredAtMs = event.at_ms;
      row.observed = event.observed;
    }
    rows.set(attempt, row);
  }
  return [...rows.values()].sort((a, b) => a.attempt - b.attempt);
}

/** What the upstream said, in words; the raw kind, status and detail are shown next to it. */
export function upstreamSaid(observed: ObservedSummary | null): string {
  if (!observed) return "No answer was recorded (toolgate stopped while the request was out).";
  switch (observed.kind) {
    case "ok":
      return "Answered 2xx with a valid result.";
    case "http_error":
      return `Answered HTTP ${observed.status}.`;
    case "timeout":
      return "No answer before the timeout; the request had been sent.";
    case "connection_lost":
      return "The connection broke after the request may have been sent.";
    case "crash":
      return "toolgate stopped mid-attempt; the request may have been sent.";
    case "body_lost":
      return "Answered 2xx, but the body was lost.";
    case "invalid_output":
    case "config_error":
    case "not_sent":
      return `Observed ${observed.kind}.`;
  }
}

export const Attempts = ({ events }: { events: TraceEvent[] }) => {
  const rows = attemptRows(events);
  const lookups = eventsOf(events, "reconcile_finished");
  if (rows.length === 0) return <p class="empty">No attempt is recorded.</p>;
  return (
    <>
      <table class="attempts">
        <thead>
          <tr>
            <th scope="col" class="num">
              Attempt
            </th>
            <th scope="col">Sent</th>
            <th scope="col">Answered</th>
            <th scope="col">What the upstream said</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr data-attempt={String(row.attempt)}>
              <td class="num">{String(row.attempt)}</td>
              <td>
                {row.sentAtMs === null ? (
                  "—"
                ) : (
                  <time datetime={new Date(row.sentAtMs).toISOString()}>{utc(row.sentAtMs)}</time>
                )}
              </td>
              <td>
                {row.answeredAtMs === null ? (
                  "—"
                ) : (
                  <time datetime={new Date(row.answeredAtMs).toISOString()}>
                    {utc(row.answeredAtMs)}
                  </time>
                )}
              </td>
              <td>
                {upstreamSaid(row.observed)}
                {row.observed && (
                  <span class="observed">
                    {" "}
                    <span class="kv">
                      <b>kind</b> <code>{String(row.observed.kind)}</code>
                    </span>
                    {"status" in row.observed && row.observed.status !== undefined && (
                      <span class="kv">
                        <b>status</b> <code>{String(row.observed.status)}</code>
                      </span>
                    )}
                    {"detail" in row.observed && (
                      <span class="kv">
                        <b>detail</b> {row.observed.detail}
                      </span>
                    )}
                  </span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {lookups.length > 0 && (
        <p class="hint">
          Status lookups:{" "}
          {lookups.map((event) => `${utc(event.at_ms)} → ${String(event.found)}`).join("; ")}.
        </p>
      )}
    </>
  );
};
