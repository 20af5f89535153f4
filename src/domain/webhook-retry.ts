// Webhook retry timing and endpoint state (issue 18, issue 38). The schedule is the one Standard
// Webhooks suggests (immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about a day in
// all), each delay jittered within [half, all] of its step, seeded by (event id, endpoint id,
// attempt) so a replay computes the same due time. The attempt number and the first attempt's time
// travel with each retry (never counted from a log), so the schedule always ends: after the eighth
// attempt, or once the next one would fall past the event's age limit, the delivery is `failed`.
// Jitter never reaches 0: a full-jitter draw on a fixed schedule could collapse the day into
// minutes against an endpoint that is down. Pure.
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
/**
 * No automatic attempt later than this after an event's first attempt at an endpoint: the whole
 * schedule is at most 27.6 h, so this leaves 8 h for queue delays (a backlog, a dead-letter park).
 */
export const WEBHOOK_MAX_AGE_MS = 36 * 3_600_000;
/** Consecutive failed attempts (any events) after which an endpoint shows as `failing`. */
export const FAILING_AFTER = WEBHOOK_MAX_ATTEMPTS;

/** Why a delivery was given up: its eighth attempt failed, or the next would come too late. */
export type GiveUpReason = "schedule_ended" | "too_old";
export type WebhookRetryPlan =
  | { kind: "retry"; delayMs: number; dueAtMs: number }
  /** The schedule is over: the delivery is `failed` (still redeliverable by hand). */
  | { kind: "failed"; reason: GiveUpReason };

/** What to do after scheduled attempt `attempt` (1-based) of `eventId` to `endpointId` failed at `nowMs`. */
export function planWebhookRetry(args: {
  eventId: string;
  endpointId: string;
  attempt: number;
  nowMs: number;
  /** When this event's first attempt at this endpoint was made (the age limit counts from it). */
  firstAttemptAtMs: number;
  /** No attempt after this (the tenant's retention of the event): it could not be redelivered either. */
  notAfterMs: number;
}): WebhookRetryPlan {
  const stepMs = WEBHOOK_SCHEDULE_MS[args.attempt - 1];
  if (stepMs === undefined || args.attempt < 1) return { kind: "failed", reason: "schedule_ended" };
  const unit = seededUnit(`${args.eventId}:${args.endpointId}:${args.attempt}`);
  const delayMs = Math.floor(stepMs / 2 + unit * (stepMs / 2));
  const dueAtMs = args.nowMs + delayMs;
  if (dueAtMs > Math.min(args.firstAttemptAtMs + WEBHOOK_MAX_AGE_MS, args.notAfterMs))
    return { kind: "failed", reason: "too_old" };
  return { kind: "retry", delayMs, dueAtMs };
}

export type EndpointState = "healthy" | "failing";

/**
 * An endpoint is `failing` once its last FAILING_AFTER attempts all failed, or once a delivery to
 * it was given up (`failingSinceMs`) with no delivered attempt since; one success heals it.
 */
export const endpointState = (
  consecutiveFailures: number,
  failingSinceMs: number | null = null,
): EndpointState =>
  consecutiveFailures >= FAILING_AFTER || failingSinceMs !== null ? "failing" : "healthy";

/**
 * The delay before the queue hands a message back that its consumer could not handle (the tenant's
 * object unreachable, say during a deploy): 5 s, doubling with each try of the message, at most
 * 5 min, so the queue's 10 tries span about 25 minutes instead of seconds before the dead-letter
 * queue takes over. `attempts`: the message's tries so far (1 on its first delivery).
 */
export const queueRetryDelaySeconds = (attempts: number): number =>
  Math.min(300, 5 * 2 ** Math.min(Math.max(0, attempts - 1), 10));
