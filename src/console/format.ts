// Pure formatting shared by the console pages: absolute UTC times, "expires in N min" computed on the
// server (the console runs no JavaScript), and data as pretty JSON for a <pre>. The clock is passed
// in. Everything returned here is plain text; the pages render it as JSX text, which is escaped.
import type { NotificationState } from "../durable/tenant/notifications.ts";

/** A card's "Notification" line, from the webhook delivery log (approval and unknown-outcome cards). */
export const notificationText = (n: NotificationState) =>
  n.delivered > 0
    ? `delivered to ${n.delivered} endpoint(s)${n.failing ? `, failing at ${n.failing}` : ""}`
    : n.failing > 0
      ? `failing (${n.failing} endpoint(s))`
      : "no delivery recorded (no endpoint subscribed, or not sent yet)";

/** `2026-12-03 08:44:34 UTC` from an ISO string or epoch milliseconds. */
export function utc(at: string | number): string {
  return `${new Date(at).toISOString().replace("T", " ").slice(0, 19)} UTC`;
}

/**
 * How long an approval still has, rounded down (a person reading "14 min" has at least that long).
 * Past the deadline the request is expired even if the expiry alarm has not recorded it yet: a
 * decision now is refused as expired, so the page must not invite one.
 */
export function expiresIn(expiresAtMs: number, nowMs: number): { expired: boolean; text: string } {
  const leftMs = expiresAtMs - nowMs;
  if (leftMs <= 0) return { expired: true, text: "expired" };
  if (leftMs < 60_000) return { expired: false, text: "expires in less than a minute" };
  const minutes = Math.floor(leftMs / 60_000);
  if (minutes < 120) return { expired: false, text: `expires in ${minutes} min` };
  return { expired: false, text: `expires in ${Math.floor(minutes / 60)} h ${minutes % 60} min` };
}

/** How long something has been waiting: `3 min ago`, `2 h 5 min ago`. */
export function ago(atMs: number, nowMs: number): string {
  const minutes = Math.floor(Math.max(0, nowMs - atMs) / 60_000);
  if (minutes < 1) return "less than a minute ago";
  if (minutes < 120) return `${minutes} min ago`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min ago`;
}

/** Untrusted data as readable JSON text; a string body is shown as it came. */
export function pretty(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "(nothing)";
  return JSON.stringify(value, null, 2) ?? String(value);
}

/** A describeTarget string, `POST https://…`, as method and URL. */
export function splitTarget(target: string): { method: string; url: string } {
  const space = target.indexOf(" ");
  return space > 0 && /^[A-Z]+$/.test(target.slice(0, space))
    ? { method: target.slice(0, space), url: target.slice(space + 1) }
    : { method: "", url: target };
}

/** How a decider was verified, in words (trace-event.ts DeciderVia; null: a trace from before issue 35). */
export function viaText(via: string | null | undefined): string {
  switch (via) {
    case "access":
      return "verified by Cloudflare Access";
    case "api_key":
      return "API key";
    case "console":
      return "console session";
    case "delegated":
      return "named by a delegating key";
    default:
      return "how it was verified is not recorded";
  }
}
