// What an upstream's answer says about its own quota (issue 34 item 4): a 429 or 503 with
// `Retry-After` (RFC 9110 §10.2.3), or the IETF httpapi ratelimit-headers draft's `RateLimit`
// (a List of policy items with `r` remaining and `t` seconds to reset; r=0 means none left until
// then), with `RateLimit-Policy` naming the policies. Parsed as Structured Fields (RFC 9651) by the
// `structured-headers` package; anything that does not parse is ignored (no pause is invented).
// Pure: the caller passes the clock reading.
import { parseList } from "structured-headers";
import { parseRetryAfterMs } from "../retry.ts";

/** The longest pause an upstream can impose (a day): a larger or absurd value is clamped. */
export const MAX_PAUSE_MS = 86_400_000;

export type UpstreamPause = { untilMs: number; detail: string };

/** `RateLimit`'s earliest reset among policies with nothing remaining (ms from now), or null. */
export function rateLimitResetMs(header: string | null): number | null {
  if (!header) return null;
  let items: ReturnType<typeof parseList>;
  try {
    items = parseList(header);
  } catch {
    return null;
  }
  let resetMs: number | null = null;
  for (const [, params] of items) {
    const remaining = params.get("r");
    const reset = params.get("t");
    if (typeof remaining !== "number" || typeof reset !== "number") continue;
    if (remaining > 0 || reset < 0) continue;
    const ms = Math.round(reset * 1000);
    resetMs = resetMs === null ? ms : Math.max(resetMs, ms);
  }
  return resetMs;
}

/**
 * The pause an answer asks for: a 429 or 503 with a usable Retry-After, or any answer whose
 * RateLimit says a policy has nothing left (the longest wait wins). Null: no pause.
 */
export function upstreamPause(
  status: number,
  headers: { retryAfter: string | null; rateLimit: string | null; rateLimitPolicy: string | null },
  nowMs: number,
): UpstreamPause | null {
  const retryAfterMs =
    status === 429 || status === 503 ? parseRetryAfterMs(headers.retryAfter, nowMs) : null;
  const resetMs = rateLimitResetMs(headers.rateLimit);
  const waits = [retryAfterMs, resetMs].filter((ms): ms is number => ms !== null && ms > 0);
  if (waits.length === 0) return null;
  const ms = Math.min(MAX_PAUSE_MS, Math.max(...waits));
  const said =
    retryAfterMs !== null && retryAfterMs >= (resetMs ?? 0)
      ? `answered ${status} with Retry-After: ${headers.retryAfter}`
      : `answered ${status} with RateLimit: ${headers.rateLimit}${headers.rateLimitPolicy ? ` (policy ${headers.rateLimitPolicy})` : ""}`;
  return { untilMs: nowMs + ms, detail: `the upstream ${said}` };
}
