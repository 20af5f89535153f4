// `notify` at run creation (issue 18 item 6): where an agent that does not wait gets its run's
// turn.settled events. `webhook_id` names one of the tenant's own endpoints; `url` makes an endpoint
// for this run only at the tenant (durable/tenant/run-endpoints.ts: the webhook URL rules, its own
// whsec_ secret returned once here, the same signing, retries and delivery log, deleted with the
// run's retention). The run stores the endpoint's id either way (settle.ts puts it on the event).
import type { Context } from "hono";
import { consoleOrigin, retentionMs } from "../config.ts";
import type { RunEndpoint } from "../durable/tenant/run-endpoints.ts";
import type { AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { tenantStub, unwrap } from "./request.ts";

export type Notify = { webhook_id?: string | undefined; url?: string | undefined };

/** The endpoint the run names (null: no notify); `secret` only for a url endpoint this call made. */
export async function runNotify(
  c: Context<AppEnv>,
  tenantId: string,
  runId: string,
  notify: Notify | undefined,
  expiresAtMs: number,
): Promise<RunEndpoint | null> {
  if (!notify) return null;
  const tenant = tenantStub(c, tenantId);
  if (notify.url !== undefined)
    return unwrap(
      await tenant.putRunEndpoint(tenantId, {
        runId,
        url: notify.url,
        consoleUrl: consoleOrigin(c.env, c.req.url),
        pruneAtMs: expiresAtMs + retentionMs(c.env),
      }),
    );
  const id = notify.webhook_id!;
  // Only the tenant's own endpoints (another run's notify.url endpoint is not listed).
  if (!(await tenant.listWebhooks()).some((hook) => hook.id === id))
    throw new ApiProblem({
      code: "not_found",
      detail: `no webhook ${id} (notify.webhook_id names an existing endpoint: PUT /v1/webhooks/{id})`,
    });
  return { webhook_id: id };
}

/** The run was not created after all: its url endpoint goes (best effort; retention would). */
export async function dropNotify(
  c: Context<AppEnv>,
  tenantId: string,
  made: RunEndpoint | null,
): Promise<void> {
  if (made?.secret === undefined) return;
  await tenantStub(c, tenantId)
    .deleteWebhook(made.webhook_id)
    .catch(() => {});
}
