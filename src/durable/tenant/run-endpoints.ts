// Per-run notify endpoints (issue 18 item 6, `POST /v1/runs { notify: { url } }`): an agent that
// does not wait names a URL at run creation and gets that run's turn.settled there. The URL becomes
// an ordinary webhook endpoint of the tenant (webhooks.ts), so it gets exactly the same URL rules,
// sealed `whsec_` secret (returned once, in the creating answer), Standard Webhooks signing, retry
// schedule, delivery log, redeliver and rotate-secret; its events filter is empty, so it gets only
// the turn.settled events whose run names it (`notify_webhook_id`, events/deliver.ts).
// What sets it apart is a row in `run_endpoints`: it is left out of GET /v1/webhooks and the console
// list (one per run would bury the tenant's own endpoints), it cannot be replaced by PUT (nor named
// by another run's notify.webhook_id), and the tenant's alarm deletes it with its delivery log once
// its run's retention has passed (`prune_at`: the run's expiry + the retention period, when the
// run's own rows may go).
import { hostPolicy } from "../../config.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { checkWebhookUrl } from "../../events/webhook-url.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { TenantError } from "./object.ts";
import { deleteWebhook, putWebhook, runOfEndpoint, webhookRow } from "./webhooks.ts";

/** The endpoint id a run's notify.url gets (a webhook id: 1-64 of [A-Za-z0-9_-]). */
export const runEndpointId = (runId: string) => `notify_${runId}`;

export type RunEndpoint = { webhook_id: string; secret?: string };
export type RunEndpointArgs = { runId: string; url: string; consoleUrl: string; pruneAtMs: number };

/**
 * Creates the run's endpoint; `secret` only when this call created it. The URL is checked first:
 * a refused URL stores nothing. Called again for the same run (a resend of one creating request),
 * it answers the endpoint without its secret.
 */
export async function putRunEndpoint(
  store: SqlStore,
  env: Env,
  storage: DurableObjectStorage,
  tenantId: string,
  args: RunEndpointArgs,
): Promise<Result<RunEndpoint, TenantError>> {
  const url = checkWebhookUrl(args.url, hostPolicy(env));
  if (!url.ok) return url;
  const id = runEndpointId(args.runId);
  if (runOfEndpoint(store, id) === args.runId && webhookRow(store, id))
    return ok({ webhook_id: id });
  if (webhookRow(store, id))
    return err({
      code: "invalid_request",
      detail: `webhook id ${id} is taken by one of the tenant's endpoints: create the run with another request_id`,
    });
  // The marker first: an endpoint is never listed, even for a moment, as one of the tenant's own.
  store.ensureTable("run_endpoints");
  store.run(
    "INSERT INTO run_endpoints (webhook_id, run_id, prune_at) VALUES (?, ?, ?) ON CONFLICT (webhook_id) DO UPDATE SET prune_at = excluded.prune_at",
    id,
    args.runId,
    args.pruneAtMs,
  );
  const made = await putWebhook(
    store,
    env,
    tenantId,
    id,
    {
      url: url.value,
      events: [],
      format: "standard",
      description: `notify.url of run ${args.runId}`,
      console_url: args.consoleUrl,
    },
    args.runId,
  );
  if (!made.ok) {
    store.run("DELETE FROM run_endpoints WHERE webhook_id = ?", id);
    return made;
  }
  const armed = await storage.getAlarm();
  if (armed === null || args.pruneAtMs < armed) await storage.setAlarm(args.pruneAtMs);
  return ok(made.value.secret ? { webhook_id: id, secret: made.value.secret } : { webhook_id: id });
}

/** Deletes the endpoints whose run's retention has passed; the next one's due time (null: none). */
export function pruneRunEndpoints(store: SqlStore, nowMs: number): number | null {
  if (!store.exists("run_endpoints")) return null;
  const due = store.all<{ webhook_id: string }>(
    "SELECT webhook_id FROM run_endpoints WHERE prune_at <= ?",
    nowMs,
  );
  for (const { webhook_id } of due) {
    deleteWebhook(store, webhook_id); // its row and log, in one transaction (not_found: deleted by hand)
    store.run("DELETE FROM run_endpoints WHERE webhook_id = ?", webhook_id);
  }
  return (
    store.one<{ at: number | null }>("SELECT MIN(prune_at) AS at FROM run_endpoints")?.at ?? null
  );
}

/** The earlier of two due times (null: none). */
export const earliest = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : Math.min(a, b);
