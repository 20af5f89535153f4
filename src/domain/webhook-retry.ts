// Webhook retry timing and endpoint state (issue 18). The schedule is the one Standard Webhooks
// suggests (immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about a day in all), each
// delay jittered within [half, all] of its step, seeded by (event id, endpoint id, attempt) so a
// replay computes the same due time. Jitter never reaches 0: a full-jitter draw on a fixed schedule
// could collapse the day into minutes against an endpoint that is down. Pure.
import { seededUnit } from "./retry.ts";

/** Delay after failed attempt n (1-based) before attempt n + 1; past the end the delivery has failed. */
export const WEBHOOK_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;
export const WEBHOOK_MAX_ATTEMPTS = WEBHOOK_SCHEDULE_MS.length + 1;
/** Consecutive failed attempts (any events) after which an endpoint shows as `failing`. */
export const FAILING_AFTER = WEBHOOK_MAX_ATTEMPTS;

export type WebhookRetryPlan =
  | { kind: "retry"; delayMs: number; dueAtMs: number }
  /** The schedule is used up: the delivery is `failed` (still redeliverable by hand). */
  | { kind: "failed" };

/** What to do after attempt `attempt` (1-based) of `eventId` to `endpointId` failed at `nowMs`. */
export function planWebhookRetry(args: {
  eventId: string;
  endpointId: string;
  attempt: number;
  nowMs: number;
}): WebhookRetryPlan {
  const stepMs = WEBHOOK_SCHEDULE_MS[args.attempt - 1];
  if (stepMs === undefined) return { kind: "failed" };
  const unit = seededUnit(`${args.eventId}:${args.endpointId}:${args.attempt}`);
  const delayMs = Math.floor(stepMs / 2 + unit * (stepMs / 2));
  return { kind: "retry", delayMs, dueAtMs: args.nowMs + delayMs };
}

export type EndpointState = "healthy" | "failing";

/** An endpoint is `failing` once its last FAILING_AFTER attempts all failed; one success heals it. */
export const endpointState = (consecutiveFailures: number): EndpointState =>
  consecutiveFailures >= FAILING_AFTER ? "failing" : "healthy";
