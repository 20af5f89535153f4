// Webhook delivery: one event → one signed HTTP POST per subscribed endpoint, in the Standard
// Webhooks format (https://www.standardwebhooks.com: `webhook-id` = the event id on every attempt,
// `webhook-timestamp` = the attempt's time in seconds, `webhook-signature` from the
// `standardwebhooks` package; body `{ type, timestamp, data }`), or a Slack Block Kit message
// (events/slack.ts). A 2xx is delivered; any other status, a redirect (never followed: the checked
// host is the one hit), a connection error or the 10 s timeout is a retryable failure. Every attempt
// is logged at the tenant with what follows it on the schedule (domain/webhook-retry.ts). Requests
// take turns in the invocation's connection slots (send-slots.ts), each endpoint a bounded share.
import { Webhook } from "standardwebhooks";
import { hostPolicy, retentionMs } from "../config.ts";
import { notifiedEndpoint, type ToolgateEvent } from "../domain/journal/events.ts";
import { ok, type Result } from "../domain/result.ts";
import {
  planWebhookRetry,
  type EndpointState,
  type WebhookRetryPlan,
} from "../domain/webhook-retry.ts";
import type { Env } from "../durable/env.ts";
import { tenantStub } from "../durable/stubs.ts";
import type { TenantError } from "../durable/tenant/object.ts";
import type {
  DeliveryAttempt,
  DeliveryResult,
  LoggedAttempt,
} from "../durable/tenant/webhook-deliveries.ts";
import type { WebhookTarget } from "../durable/tenant/webhooks.ts";
import type { HostPolicy } from "../tools/manifest/schema.ts";
import { SendSlots } from "./send-slots.ts";
import { slackMessage } from "./slack.ts";
import { checkWebhookUrl } from "./webhook-url.ts";

export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Characters of the receiver's answer kept in the log. */
export const SNIPPET_CHARS = 256;
const SNIPPET_BYTES = 4096;

/** `timeoutMs`: tests shorten the 10 s wait for a hanging receiver through this, never by config. */
export type DeliveryOptions = { timeoutMs?: number };

/** The body for `target`: the Standard Webhooks payload, or a Slack message. */
export function webhookBody(
  target: Pick<WebhookTarget, "format" | "console_url">,
  event: ToolgateEvent,
): string {
  if (target.format === "slack") return JSON.stringify(slackMessage(event, target.console_url));
  return JSON.stringify({
    type: event.type,
    timestamp: new Date(event.at_ms).toISOString(),
    data: {
      run_id: event.run_id,
      operation_id: event.operation_id,
      tool: event.tool,
      ...event.data,
    },
  });
}

/** One attempt. Never throws: every failure is a result the log records. */
export async function deliverWebhook(
  target: WebhookTarget,
  event: ToolgateEvent,
  nowMs: number,
  options: DeliveryOptions = {},
): Promise<DeliveryResult> {
  return (await attemptWebhook(target, event, nowMs, options.timeoutMs ?? WEBHOOK_TIMEOUT_MS))
    .result;
}

/**
 * A JSON body's Standard Webhooks headers (`webhook-id`, `-timestamp`, `-signature` with `secret`,
 * a `whsec_` value): every signed POST toolgate makes — event deliveries and the x402 signer's ask.
 * Throws when the secret is not a Standard Webhooks secret.
 */
export function standardWebhookHeaders(
  secret: string,
  id: string,
  nowMs: number,
  body: string,
): Record<string, string> {
  return {
    "Content-Type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(nowMs / 1000)),
    "webhook-signature": new Webhook(secret).sign(id, new Date(nowMs), body),
  };
}

/** One attempt; `timedOut`: no answer within the timeout, which starts here, as the request does. */
async function attemptWebhook(
  target: WebhookTarget,
  event: ToolgateEvent,
  nowMs: number,
  timeoutMs: number,
): Promise<{ result: DeliveryResult; timedOut: boolean }> {
  const body = webhookBody(target, event);
  const headers = {
    "User-Agent": "toolgate-webhooks/1",
    ...standardWebhookHeaders(target.secret, event.id, nowMs, body),
  };
  const started = Date.now();
  const signal = AbortSignal.timeout(timeoutMs);
  const failed = (error: string, status: number | null = null, snippet = "") => ({
    result: { delivered: false, status, latency_ms: Date.now() - started, snippet, error },
    timedOut: false,
  });
  let response: Response;
  try {
    response = await fetch(target.url, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal,
    });
  } catch (error) {
    return isTimeout(error)
      ? { ...failed(`no response within ${timeoutMs} ms`), timedOut: true }
      : failed(`connection failed: ${scrub(String(error), target.secret)}`);
  }
  // The timeout's signal also errors a body that stalls after the headers (tested: a stalled 2xx).
  // Scrubbed before it is cut, so no part of a secret survives at the edge of the snippet.
  const snippet = scrub(await readSnippet(response), target.secret).slice(0, SNIPPET_CHARS);
  const latency = Date.now() - started;
  if (response.status >= 200 && response.status < 300)
    return {
      result: {
        delivered: true,
        status: response.status,
        latency_ms: latency,
        snippet,
        error: null,
      },
      timedOut: false,
    };
  if (response.status >= 300 && response.status < 400)
    return failed(
      `redirect to ${scrub(response.headers.get("Location") ?? "?", target.secret)} not followed`,
      response.status,
      snippet,
    );
  return failed(`HTTP ${response.status}`, response.status, snippet);
}

/** One send of one event to one endpoint, and where it stands on the schedule. */
export type DeliveryJob = {
  target: WebhookTarget;
  event: ToolgateEvent;
  /** Its number on the schedule (1: the first fan-out); null: one attempt by hand, never retried. */
  attempt: number | null;
  /** When the event's first attempt at this endpoint was made (null: this is it). */
  firstAttemptAtMs: number | null;
};

export type EndpointOutcome = {
  endpoint_id: string;
  delivered: boolean;
  status: number | null;
  /** This event's attempt number at this endpoint (null: the endpoint was deleted meanwhile). */
  attempt: number | null;
  state: EndpointState | null;
  /** After a recorded failure: when to try again, or `failed` once the schedule is over; else null. */
  retry: WebhookRetryPlan | null;
  error: string | null;
  /** false: the tenant could not record the attempt (it threw): the attempt must be made again. */
  recorded: boolean;
  /** When the event's first attempt at this endpoint was made (its retries carry it). */
  first_attempt_at_ms: number;
};

/** What a person is shown of an attempt by hand (redeliver, test): no plan, nothing internal. */
export const shownOutcome = (outcome: EndpointOutcome) => ({
  endpoint_id: outcome.endpoint_id,
  delivered: outcome.delivered,
  status: outcome.status,
  attempt: outcome.attempt,
  state: outcome.state,
  error: outcome.error,
});

/** One tenant's sends: where they are logged, the URL rules, its retention, the invocation's slots. */
export type Delivery = {
  tenantId: string;
  tenant: ReturnType<typeof tenantStub>;
  hosts: HostPolicy;
  retentionMs: number;
  slots: SendSlots;
  timeoutMs: number;
};

export function deliveryFor(
  env: Env,
  tenantId: string,
  slots: SendSlots = new SendSlots(),
  options: DeliveryOptions = {},
): Delivery {
  return {
    tenantId,
    tenant: tenantStub(env, tenantId),
    hosts: hostPolicy(env),
    retentionMs: retentionMs(env),
    slots,
    timeoutMs: options.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
  };
}

/**
 * Makes `jobs` (one tenant's, any endpoints): each send takes its turn in the invocation's slots
 * (send-slots.ts); each endpoint's attempts are logged in one call once its own sends are done, so
 * a hanging endpoint delays only its own log. A failed scheduled attempt is planned here, from the
 * number and first-attempt time it carries. The outcomes, in the order of `jobs`.
 */
export async function deliverJobs(
  delivery: Delivery,
  jobs: readonly DeliveryJob[],
): Promise<EndpointOutcome[]> {
  const outcomes: EndpointOutcome[] = new Array(jobs.length);
  const byEndpoint = new Map<string, number[]>();
  jobs.forEach((job, index) => {
    const mine = byEndpoint.get(job.target.id) ?? [];
    mine.push(index);
    byEndpoint.set(job.target.id, mine);
  });
  await Promise.all(
    [...byEndpoint].map(async ([endpointId, indices]) => {
      const attempts: DeliveryAttempt[] = await Promise.all(
        indices.map(async (index) => {
          const job = jobs[index]!;
          const { result, atMs } = await send(delivery, job);
          return {
            event: job.event,
            result,
            atMs,
            attempt: job.attempt,
            plan: planOf(delivery, job, result, atMs),
          };
        }),
      );
      let logged: LoggedAttempt[] | null = null;
      let unrecorded: string | null = null;
      try {
        logged = await delivery.tenant.recordDeliveries(endpointId, attempts);
      } catch (error) {
        unrecorded = `the attempt could not be recorded: ${String(error)}`;
      }
      attempts.forEach((attempt, k) => {
        const index = indices[k]!;
        const entry = logged?.[k] ?? null;
        outcomes[index] = {
          endpoint_id: endpointId,
          delivered: attempt.result.delivered,
          status: attempt.result.status,
          attempt: entry?.attempt ?? (unrecorded ? jobs[index]!.attempt : null),
          state: entry?.state ?? null,
          // A deleted endpoint (nothing logged) is not tried again.
          retry: entry ? attempt.plan : null,
          error: unrecorded ?? attempt.result.error,
          recorded: unrecorded === null,
          first_attempt_at_ms: jobs[index]!.firstAttemptAtMs ?? attempt.atMs,
        };
      });
    }),
  );
  return outcomes;
}

/** One job's request, in its turn; not made if its URL is refused or its endpoint hung in this invocation. */
async function send(
  delivery: Delivery,
  job: DeliveryJob,
): Promise<{ result: DeliveryResult; atMs: number }> {
  const allowed = checkWebhookUrl(job.target.url, delivery.hosts);
  if (!allowed.ok) return { result: notSent(allowed.error.detail), atMs: Date.now() };
  const key = `${delivery.tenantId}/${job.target.id}`;
  return delivery.slots.run(key, job.target.failing, async () => {
    const atMs = Date.now();
    if (delivery.slots.hung(key))
      return {
        result: notSent(
          `not sent: another request to this endpoint got no answer within ${delivery.timeoutMs} ms in the same batch`,
        ),
        atMs,
      };
    const { result, timedOut } = await attemptWebhook(
      job.target,
      job.event,
      atMs,
      delivery.timeoutMs,
    );
    if (timedOut) delivery.slots.hang(key);
    return { result, atMs };
  });
}

const notSent = (error: string): DeliveryResult => ({
  delivered: false,
  status: null,
  latency_ms: 0,
  snippet: "",
  error,
});

/** After a failed scheduled attempt: the next one, or the end of the schedule (null: delivered, or by hand). */
function planOf(
  delivery: Delivery,
  job: DeliveryJob,
  result: DeliveryResult,
  atMs: number,
): WebhookRetryPlan | null {
  if (result.delivered || job.attempt === null) return null;
  return planWebhookRetry({
    eventId: job.event.id,
    endpointId: job.target.id,
    attempt: job.attempt,
    nowMs: atMs,
    firstAttemptAtMs: job.firstAttemptAtMs ?? atMs,
    notAfterMs: job.event.at_ms + delivery.retentionMs,
  });
}

/**
 * Delivers `event` to each of the tenant's endpoints subscribed to its type, as a first fan-out
 * (attempt 1), each logged (deliverJobs). What the webhook tests call; the queue consumer routes a
 * whole batch at once (TenantObject.receiveEvents) and calls deliverJobs.
 */
export async function deliverToEndpoints(
  env: Env,
  tenantId: string,
  event: ToolgateEvent,
  options: DeliveryOptions = {},
): Promise<Result<EndpointOutcome[], TenantError>> {
  if (event.tenant_id !== tenantId) return ok([]); // another tenant's event is none of these endpoints' business
  const delivery = deliveryFor(env, tenantId, new SendSlots(), options);
  const targets = await delivery.tenant.webhookTargets(
    tenantId,
    event.type,
    notifiedEndpoint(event),
  );
  if (!targets.ok) return targets;
  return ok(
    await deliverJobs(
      delivery,
      targets.value.map((target) => ({ target, event, attempt: 1, firstAttemptAtMs: null })),
    ),
  );
}

/** One endpoint, one event, by hand (the test ping, a redeliver): sent and logged, never retried. */
export async function deliverOne(
  env: Env,
  tenantId: string,
  target: WebhookTarget,
  event: ToolgateEvent,
  options: DeliveryOptions = {},
): Promise<EndpointOutcome> {
  const delivery = deliveryFor(env, tenantId, new SendSlots(), options);
  const [outcome] = await deliverJobs(delivery, [
    { target, event, attempt: null, firstAttemptAtMs: null },
  ]);
  return outcome!;
}

async function readSnippet(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < SNIPPET_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // A body cut off or timed out: whatever arrived is the snippet.
  } finally {
    void reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) (bytes.set(chunk, at), (at += chunk.byteLength));
  return new TextDecoder().decode(bytes);
}

/** The signing secret (as itself and its key part) never reaches the log; control characters neither. */
function scrub(text: string, secret: string): string {
  const key = secret.replace(/^whsec_/, "");
  return text
    .replaceAll(secret, "[redacted]")
    .replaceAll(key, "[redacted]")
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "");
}

const isTimeout = (error: unknown) =>
  error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
