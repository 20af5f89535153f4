// /console/webhooks: the tenant's webhook endpoints (TenantObject.listWebhooks) — URL, events,
// format, state (failing since when), consecutive failures, last delivered — each with its recent
// deliveries from its delivery log (TenantObject.listDeliveries): time, event type, attempt (by hand
// or scheduled), status, latency, and what follows: the next attempt's time, or "given up".
// Viewing needs webhooks:read or webhooks:write; the redeliver button (a CSRF-checked POST, as every
// console POST) needs webhooks:write and sends the logged event again now, with the same webhook-id.
import type { Context } from "hono";
import { tenantStub } from "../durable/stubs.ts";
import { deliverOne } from "../events/deliver.ts";
import type { DeliveryRecord } from "../durable/tenant/webhook-deliveries.ts";
import type { WebhookRecord } from "../durable/tenant/webhooks.ts";
import { utc } from "./format.ts";
import { setFlash, takeFlash } from "./flash.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
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
  const [endpoints, flash] = await Promise.all([tenant.listWebhooks(), takeFlash(c)]);
  const canWrite = session.scopes.includes("webhooks:write");
  const logs = await Promise.all(endpoints.map((e) => tenant.listDeliveries(e.id, RECENT)));
  return render(
    c,
    "Webhooks",
    <>
      <h1>Webhooks</h1>
      <p class="lede">Where toolgate sends events, whether they arrive, and the latest attempts.</p>
      <FlashBox flash={flash} />
      {endpoints.length === 0 ? (
        <p class="empty">No webhook endpoints. Create one with PUT /v1/webhooks/:id.</p>
      ) : (
        endpoints.map((endpoint, i) => {
          const log = logs[i];
          return (
            <Endpoint
              endpoint={endpoint}
              deliveries={log?.ok ? log.value : []}
              csrf={canWrite ? session.csrf : null}
            />
          );
        })
      )}
    </>,
  );
}

const Endpoint = ({
  endpoint,
  deliveries,
  csrf,
}: {
  endpoint: WebhookRecord;
  deliveries: DeliveryRecord[];
  /** Only for a webhooks:write session: the redeliver forms' token. */
  csrf: string | null;
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
      <dd>
        {endpoint.state}
        {endpoint.failing_since
          ? ` since ${utc(endpoint.failing_since)}: a delivery was given up after its whole retry schedule`
          : ""}
      </dd>
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
            <th>Next</th>
            {csrf && <th>Redeliver</th>}
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr>
              <td>{utc(d.at)}</td>
              <td>{d.event_type}</td>
              <td>{d.by_hand ? `${d.attempt} (by hand)` : String(d.attempt)}</td>
              <td>
                {d.delivered ? "delivered" : "failed"} {d.status === null ? "" : String(d.status)}
                {/* An HTTP failure's error is its status again ("HTTP 500"): said once. */}
                {d.error && d.error !== `HTTP ${d.status}` ? ` (${d.error})` : ""}
              </td>
              <td>{`${d.latency_ms} ms`}</td>
              <td data-next>{nextOf(d)}</td>
              {csrf && (
                <td>
                  <form
                    method="post"
                    action={`${HREF}/${encodeURIComponent(endpoint.id)}/redeliver`}
                  >
                    <input type="hidden" name="csrf" value={csrf} />
                    <input type="hidden" name="event_id" value={d.event_id} />
                    <button type="submit">Redeliver</button>
                  </form>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </section>
);

/** What follows an attempt: its event's next scheduled attempt, or the end of its schedule. */
const nextOf = (d: DeliveryRecord) =>
  d.next_attempt_at
    ? `next attempt ${utc(d.next_attempt_at)}`
    : d.given_up
      ? "given up: redeliver by hand"
      : "—";

/** Sends one logged event to its endpoint again now; the outcome is a flash on the page (303). */
async function redeliver(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  if (!session.scopes.includes("webhooks:write"))
    return problemPage(
      c,
      403,
      "Not allowed",
      "Redelivering needs an API key with the scope webhooks:write. Nothing was sent.",
    );
  const form = await c.req.parseBody();
  const eventId = typeof form.event_id === "string" ? form.event_id : "";
  const tenant = tenantStub(c.env, session.tenantId);
  const found = await tenant.redeliveryOf(session.tenantId, c.req.param("id") ?? "", eventId);
  if (!found.ok) {
    await setFlash(c, { tone: "error", text: `Nothing was sent: ${found.error.detail}` });
    return c.redirect(HREF, 303);
  }
  const outcome = await deliverOne(c.env, session.tenantId, found.value.target, found.value.event);
  await setFlash(
    c,
    outcome.delivered
      ? {
          tone: "ok",
          text: `Redelivered ${eventId} to ${outcome.endpoint_id} (${outcome.status}).`,
        }
      : {
          tone: "error",
          text: `Redelivering ${eventId} failed: ${outcome.error ?? `status ${outcome.status}`}.`,
        },
  );
  return c.redirect(HREF, 303);
}

export const webhooksPage = definePage({
  nav: { label: "Webhooks", href: HREF },
  routes: consoleRoutes().get("/webhooks", showWebhooks).post("/webhooks/:id/redeliver", redeliver),
});
