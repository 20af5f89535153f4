// Webhook delivery: one event → one signed HTTP POST per subscribed endpoint, in the Standard
// Webhooks format (https://www.standardwebhooks.com: `webhook-id` = the event id on every attempt,
// `webhook-timestamp` = the attempt's time in seconds, `webhook-signature` from the
// `standardwebhooks` package; body `{ type, timestamp, data }`), or a Slack Block Kit message
// (events/slack.ts). A 2xx is delivered; any other status, a redirect (never followed: the checked
// host is the one hit), a connection error or the 10 s timeout is a retryable failure. Every attempt
// is logged at the tenant. Endpoints are independent: one slow or dead endpoint never delays another.
import { Webhook } from "standardwebhooks";
import { hostPolicy } from "../config.ts";
import { notifiedEndpoint, type ToolgateEvent } from "../domain/events.ts";
import { ok, type Result } from "../domain/result.ts";
import {
  planWebhookRetry,
  type EndpointState,
  type WebhookRetryPlan,
} from "../domain/webhook-retry.ts";
import type { Env } from "../durable/env.ts";
import { tenantStub } from "../durable/stubs.ts";
import type { TenantError } from "../durable/tenant/object.ts";
import type { DeliveryResult, LoggedAttempt } from "../durable/tenant/webhook-deliveries.ts";
import type { EventRoutes, WebhookTarget } from "../durable/tenant/webhooks.ts";
import type { HostPolicy } from "../tools/manifest/schema.ts";
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
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const body = webhookBody(target, event);
  const headers = {
    "Content-Type": "application/json",
    "User-Agent": "toolgate-webhooks/1",
    "webhook-id": event.id,
    "webhook-timestamp": String(Math.floor(nowMs / 1000)),
    "webhook-signature": new Webhook(target.secret).sign(event.id, new Date(nowMs), body),
  };
  const started = Date.now();
  const signal = AbortSignal.timeout(timeoutMs);
  const failed = (error: string, status: number | null = null, snippet = ""): DeliveryResult => ({
    delivered: false,
    status,
    latency_ms: Date.now() - started,
    snippet,
    error,
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
      ? failed(`no response within ${timeoutMs} ms`)
      : failed(`connection failed: ${scrub(String(error), target.secret)}`);
  }
  // The timeout's signal also errors a body that stalls after the headers (tested: a stalled 2xx).
  // Scrubbed before it is cut, so no part of a secret survives at the edge of the snippet.
  const snippet = scrub(await readSnippet(response), target.secret).slice(0, SNIPPET_CHARS);
  const latency = Date.now() - started;
  if (response.status >= 200 && response.status < 300)
    return { delivered: true, status: response.status, latency_ms: latency, snippet, error: null };
  if (response.status >= 300 && response.status < 400)
    return failed(
      `redirect to ${scrub(response.headers.get("Location") ?? "?", target.secret)} not followed`,
      response.status,
      snippet,
    );
  return failed(`HTTP ${response.status}`, response.status, snippet);
}

export type EndpointOutcome = {
  endpoint_id: string;
  delivered: boolean;
  status: number | null;
  /** This event's attempt number at this endpoint (null: the endpoint was deleted meanwhile). */
  attempt: number | null;
  state: EndpointState | null;
  /** After a failure: when to try again, or `failed` once the schedule is used up; null when delivered. */
  retry: WebhookRetryPlan | null;
  error: string | null;
};

/**
 * Delivers `event` to each of the tenant's endpoints subscribed to its type, each independently,
 * and logs every attempt at the tenant (deliverRouted). What the webhook tests call; the queue
 * consumer routes a whole batch at once (TenantObject.receiveEvents) and calls deliverRouted.
 */
export async function deliverToEndpoints(
  env: Env,
  tenantId: string,
  event: ToolgateEvent,
  options: DeliveryOptions = {},
): Promise<Result<EndpointOutcome[], TenantError>> {
  if (event.tenant_id !== tenantId) return ok([]); // another tenant's event is none of these endpoints' business
  const tenant = tenantStub(env, tenantId);
  const targets = await tenant.webhookTargets(tenantId, event.type, notifiedEndpoint(event));
  if (!targets.ok) return targets;
  const routes = { [event.id]: targets.value.map((target) => target.id) };
  const outcomes = await deliverRouted(
    tenant,
    { targets: targets.value, routes },
    [event],
    hostPolicy(env),
    options,
  );
  return ok(outcomes.get(event.id) ?? []);
}

/**
 * One tenant's batch of events, each to the endpoints `routed` names: every send starts at once;
 * each endpoint's attempts are logged in one call once its own sends are done, so a hanging
 * endpoint (10 s) delays only its own log, never another endpoint's sends or records. The
 * outcomes per event id, each with its retry plan.
 */
export async function deliverRouted(
  tenant: ReturnType<typeof tenantStub>,
  routed: EventRoutes,
  events: readonly ToolgateEvent[],
  hosts: HostPolicy,
  options: DeliveryOptions = {},
): Promise<Map<string, EndpointOutcome[]>> {
  const outcomes = new Map<string, EndpointOutcome[]>(events.map((event) => [event.id, []]));
  await Promise.all(
    routed.targets.map(async (target) => {
      const mine = events.filter((event) => routed.routes[event.id]?.includes(target.id));
      if (mine.length === 0) return;
      const allowed = checkWebhookUrl(target.url, hosts);
      const attempts = await Promise.all(
        mine.map(async (event) => {
          const atMs = Date.now();
          const result: DeliveryResult = allowed.ok
            ? await deliverWebhook(target, event, atMs, options)
            : {
                delivered: false,
                status: null,
                latency_ms: 0,
                snippet: "",
                error: allowed.error.detail,
              };
          return { event, result, atMs };
        }),
      );
      let logged: LoggedAttempt[] | null;
      let unrecorded: string | null = null;
      try {
        logged = await tenant.recordDeliveries(target.id, attempts);
      } catch (error) {
        logged = null;
        unrecorded = `the attempt could not be recorded: ${String(error)}`;
      }
      attempts.forEach(({ event, result, atMs }, index) => {
        const entry = logged?.[index] ?? null;
        outcomes.get(event.id)!.push({
          endpoint_id: target.id,
          delivered: result.delivered,
          status: result.status,
          attempt: entry?.attempt ?? null,
          state: entry?.state ?? null,
          retry:
            result.delivered || !entry
              ? null
              : planWebhookRetry({
                  eventId: event.id,
                  endpointId: target.id,
                  attempt: entry.attempt,
                  nowMs: atMs,
                }),
          error: unrecorded ?? result.error,
        });
      });
    }),
  );
  return outcomes;
}

/** One endpoint, one event (the test ping, a redeliver): sent and logged like any delivery. */
export async function deliverOne(
  env: Env,
  tenant: ReturnType<typeof tenantStub>,
  target: WebhookTarget,
  event: ToolgateEvent,
  options: DeliveryOptions,
): Promise<EndpointOutcome> {
  const routed = { targets: [target], routes: { [event.id]: [target.id] } };
  const outcomes = await deliverRouted(tenant, routed, [event], hostPolicy(env), options);
  return outcomes.get(event.id)![0]!;
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

/** One endpoint's retry of one event (a `delivery` queue message): none if it was deleted or unsubscribed. */
export async function deliverToEndpoint(
  env: Env,
  tenantId: string,
  endpointId: string,
  event: ToolgateEvent,
  options: DeliveryOptions = {},
): Promise<Result<EndpointOutcome | null, TenantError>> {
  if (event.tenant_id !== tenantId) return ok(null);
  const tenant = tenantStub(env, tenantId);
  const targets = await tenant.webhookTargets(tenantId, event.type, notifiedEndpoint(event));
  if (!targets.ok) return targets;
  const target = targets.value.find((candidate) => candidate.id === endpointId);
  return ok(target ? await deliverOne(env, tenant, target, event, options) : null);
}
