// /console/webhooks: the tenant's webhook endpoints (TenantObject.listWebhooks) — URL, events,
// format, state, consecutive failures, last delivered — each with its recent deliveries from its
// delivery log (TenantObject.listDeliveries): time, event type, attempt, status, latency.
// Read-only; needs webhooks:read or webhooks:write.
import type { Context } from "hono";
import { tenantStub } from "../durable/stubs.ts";
import type { DeliveryRecord } from "../durable/tenant/webhook-deliveries.ts";
import type { WebhookRecord } from "../durable/tenant/webhooks.ts";
import { utc } from "./format.ts";
import { problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";

const HREF = "/console/webhooks";
const RECENT = 10;

async function showWebhooks(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  if (!session.scopes.some((s) => s === "webhooks:read" || s === "webhooks:write"))
    return problemPage(
      c,
      403,
      "Not allowed",
      "Webhooks are shown to API keys with the scope webhooks:read or webhooks:write.",
    );
  const tenant = tenantStub(c.env, session.tenantId);
  const endpoints = await tenant.listWebhooks();
  const logs = await Promise.all(endpoints.map((e) => tenant.listDeliveries(e.id, RECENT)));
  return render(
    c,
    "Webhooks",
    <>
      <h1>Webhooks</h1>
      <p class="lede">Where toolgate sends events, whether they arrive, and the latest attempts.</p>
      {endpoints.length === 0 ? (
        <p class="empty">No webhook endpoints. Create one with PUT /v1/webhooks/:id.</p>
      ) : (
        endpoints.map((endpoint, i) => {
          const log = logs[i];
          return <Endpoint endpoint={endpoint} deliveries={log?.ok ? log.value : []} />;
        })
      )}
    </>,
  );
}

const Endpoint = ({
  endpoint,
  deliveries,
}: {
  endpoint: WebhookRecord;
  deliveries: DeliveryRecord[];
}) => (
  <section class="card" data-webhook={endpoint.id}>
    <h2>{endpoint.id}</h2>
    <dl>
      <dt>URL</dt>
      <dd>{endpoint.url}</dd>
      <dt>Events</dt>
      <dd>{endpoint.events.join(", ")}</dd>
      <dt>Format</dt>
      <dd>{endpoint.format}</dd>
      <dt>State</dt>
      <dd>{endpoint.state}</dd>
      <dt>Consecutive failures</dt>
      <dd>{String(endpoint.consecutive_failures)}</dd>
      <dt>Last delivered</dt>
      <dd>{endpoint.last_delivered_at ? utc(endpoint.last_delivered_at) : "never"}</dd>
    </dl>
    {deliveries.length === 0 ? (
      <p class="empty">No deliveries yet.</p>
    ) : (
      <table>
        <thead>
          <tr>
            <th>Time</th>
            <th>Event</th>
            <th>Attempt</th>
            <th>Status</th>
            <th>Latency</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr>
              <td>{utc(d.at)}</td>
              <td>{d.event_type}</td>
              <td>{String(d.attempt)}</td>
              <td>
                {d.delivered ? "delivered" : "failed"} {d.status === null ? "" : String(d.status)}
                {d.error ? ` (${d.error})` : ""}
              </td>
              <td>{`${d.latency_ms} ms`}</td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </section>
);

export const webhooksPage = definePage({
  nav: { label: "Webhooks", href: HREF },
  routes: consoleRoutes().get("/webhooks", showWebhooks),
});
