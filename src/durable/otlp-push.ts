// Background push of finished spans to an OpenTelemetry collector (OTLP/HTTP JSON, POST
// {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces, headers from the OTEL_EXPORTER_OTLP_HEADERS secret in the
// spec's `k=v,k2=v2` form). Run under ctx.waitUntil, bounded by its own timeout and at most three
// tries, never throwing: an operation's result and timing never depend on a collector (issue 10).
import type { OtlpTrace } from "../domain/otlp.ts";
import type { Env } from "./env.ts";

export const PUSH_TIMEOUT_MS = 5_000;

/** The traces URL and headers, or null when no collector is configured. */
export function collectorFor(env: Env): { url: string; headers: Record<string, string> } | null {
  const base =
    typeof env.OTEL_EXPORTER_OTLP_ENDPOINT === "string" ? env.OTEL_EXPORTER_OTLP_ENDPOINT : "";
  if (base === "") return null;
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  const raw =
    typeof env.OTEL_EXPORTER_OTLP_HEADERS === "string" ? env.OTEL_EXPORTER_OTLP_HEADERS : "";
  raw.split(",").forEach((pair, index) => {
    if (pair.trim() === "") return;
    const at = pair.indexOf("=");
    const name = at > 0 ? decoded(pair.slice(0, at).trim()) : null;
    const value = at > 0 ? decoded(pair.slice(at + 1).trim()) : null;
    // A malformed entry must not throw: this runs after an operation's transition has committed.
    if (name === null || value === null || !HEADER_NAME.test(name) || /[\r\n\0]/.test(value))
      return warnOnce(raw, index);
    headers[name] = value;
  });
  return { url: `${base.replace(/\/+$/, "")}/v1/traces`, headers };
}

/** RFC 9110 §5.6.2 token: what `fetch` accepts as a header name. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function decoded(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** Malformed entries already reported, per configured value: logged once per isolate, not per push. */
const warned = new Set<string>();
function warnOnce(raw: string, index: number): void {
  const key = `${index} ${raw}`;
  if (warned.has(key)) return;
  if (warned.size >= 64) warned.clear();
  warned.add(key);
  // The values are secrets: only the entry's position is logged.
  console.error(
    JSON.stringify({
      level: "warn",
      event: "toolgate.otlp_header_dropped",
      detail: `OTEL_EXPORTER_OTLP_HEADERS entry ${index + 1} is not name=value with a valid header name and percent-encoding; it is not sent`,
    }),
  );
}

/** OTLP/HTTP §Retryable response codes: throttled or the collector briefly unavailable. */
const RETRYABLE = new Set([429, 502, 503, 504]);
/** Waits before the 2nd and 3rd push of the same spans (then it is logged as failed and dropped). */
export const PUSH_RETRY_DELAYS_MS = [1_000, 3_000];

/**
 * Pushes once, and again after PUSH_RETRY_DELAYS_MS when the collector answered a retryable status
 * or the connection failed (a timeout included); any other answer is final. The same spans each
 * time: a collector deduplicates by trace and span id.
 */
export async function pushSpans(env: Env, trace: OtlpTrace, operationId: string): Promise<void> {
  const collector = collectorFor(env);
  if (!collector) return;
  const body = JSON.stringify(trace);
  for (let attempt = 0; ; attempt++) {
    const failure = await pushOnce(collector, body);
    if (failure === null) return;
    const delay = PUSH_RETRY_DELAYS_MS[attempt];
    if (!failure.retryable || delay === undefined) {
      // The header values are secrets: only the failure's class is logged, never the request.
      console.error(
        JSON.stringify({
          level: "warn",
          event: "toolgate.otlp_push_failed",
          operation_id: operationId,
          attempts: attempt + 1,
          ...failure.log,
        }),
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

type PushFailure = { retryable: boolean; log: { status: number } | { error: string } };

async function pushOnce(
  collector: { url: string; headers: Record<string, string> },
  body: string,
): Promise<PushFailure | null> {
  try {
    const response = await fetch(collector.url, {
      method: "POST",
      headers: collector.headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (response.ok) return null;
    return { retryable: RETRYABLE.has(response.status), log: { status: response.status } };
  } catch (error) {
    return { retryable: true, log: { error: error instanceof Error ? error.name : "error" } };
  }
}
