// Background push of finished spans to an OpenTelemetry collector (OTLP/HTTP JSON, POST
// {OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces, headers from the OTEL_EXPORTER_OTLP_HEADERS secret in the
// spec's `k=v,k2=v2` form). Run under ctx.waitUntil, bounded by its own timeout, never throwing: an
// operation's result and timing never depend on a collector (issue 10).
import type { OtlpTrace } from "../domain/otlp.ts";
import type { Env } from "../env.ts";

export const PUSH_TIMEOUT_MS = 5_000;

/** The traces URL and headers, or null when no collector is configured. */
export function collectorFor(env: Env): { url: string; headers: Record<string, string> } | null {
  const base =
    typeof env.OTEL_EXPORTER_OTLP_ENDPOINT === "string" ? env.OTEL_EXPORTER_OTLP_ENDPOINT : "";
  if (base === "") return null;
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  const raw =
    typeof env.OTEL_EXPORTER_OTLP_HEADERS === "string" ? env.OTEL_EXPORTER_OTLP_HEADERS : "";
  for (const pair of raw.split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(
      pair.slice(at + 1).trim(),
    );
  }
  return { url: `${base.replace(/\/+$/, "")}/v1/traces`, headers };
}

export async function pushSpans(env: Env, trace: OtlpTrace, operationId: string): Promise<void> {
  const collector = collectorFor(env);
  if (!collector) return;
  try {
    const response = await fetch(collector.url, {
      method: "POST",
      headers: collector.headers,
      body: JSON.stringify(trace),
      redirect: "manual",
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (!response.ok)
      console.error(
        JSON.stringify({
          level: "warn",
          event: "toolgate.otlp_push_failed",
          operation_id: operationId,
          status: response.status,
        }),
      );
  } catch (error) {
    // The header values are secrets: only the failure's class is logged, never the request.
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.otlp_push_failed",
        operation_id: operationId,
        error: error instanceof Error ? error.name : "error",
      }),
    );
  }
}
