// /v1/webhooks: the tenant's webhook endpoints (issue 18). The `whsec_` secret is in the answer that
// creates an endpoint or rotates its secret, and nowhere else. Reads take webhooks:read or
// webhooks:write (a key that can write can see what it wrote); everything else needs webhooks:write.
// Redeliver sends the event again now, with the same webhook-id: one this endpoint was sent, or a
// stored event it subscribes to, for the retention period (a delivered one cancels its retries).
// Test sends a new `webhook.test` event to this one endpoint now, signed, formatted and logged like
// any delivery (deliverOne): the answer says whether it arrived.
import type { Context } from "hono";
import { Hono } from "hono";
import type { ToolgateEvent } from "../domain/journal/events.ts";
import { consoleOrigin } from "../config.ts";
import { describeInvalid } from "../domain/invalid-input.ts";
import { deliverOne, shownOutcome } from "../events/deliver.ts";
import { requireScope, type AppEnv } from "./auth.ts";
import { ApiProblem } from "./problem.ts";
import { readJson, readQuery, tenantStub, unwrap } from "./request.ts";
import { DeliveriesQuery, PutWebhook, Redeliver, WebhookId } from "./schemas.ts";

const webhookId = (id: string | undefined) => {
  const parsed = WebhookId.safeParse(id);
  if (!parsed.success)
    throw new ApiProblem({ code: "invalid_request", detail: parsed.error.issues[0]!.message });
  return parsed.data;
};

function requireRead(c: Context<AppEnv>): string {
  const principal = c.get("principal");
  return principal.kind === "key" && principal.scopes.includes("webhooks:write")
    ? principal.tenantId
    : requireScope(c, "webhooks:read");
}

export const webhookRoutes = new Hono<AppEnv>()
  .put("/:id", async (c) => {
    const tenantId = requireScope(c, "webhooks:write");
    const id = webhookId(c.req.param("id"));
    const body = await readJson(c, PutWebhook);
    const { created, ...record } = unwrap(
      await tenantStub(c, tenantId).putWebhook(tenantId, id, {
        url: body.url,
        events: body.events,
        format: body.format,
        description: body.description ?? null,
        // Slack messages link to the deployment's console (TOOLGATE_CONSOLE_URL, else this origin).
        console_url: consoleOrigin(c.env, c.req.url),
      }),
    );
    return c.json(record, created ? 201 : 200);
  })
  .get("/", async (c) => c.json({ webhooks: await tenantStub(c, requireRead(c)).listWebhooks() }))
  .delete("/:id", async (c) => {
    const tenantId = requireScope(c, "webhooks:write");
    unwrap(await tenantStub(c, tenantId).deleteWebhook(webhookId(c.req.param("id"))));
    return c.body(null, 204);
  })
  .post("/:id/rotate-secret", async (c) => {
    const tenantId = requireScope(c, "webhooks:write");
    const id = webhookId(c.req.param("id"));
    return c.json(unwrap(await tenantStub(c, tenantId).rotateWebhookSecret(tenantId, id)));
  })
  .get("/:id/deliveries", async (c) => {
    const tenantId = requireRead(c);
    const { limit } = readQuery(c, DeliveriesQuery);
    const id = webhookId(c.req.param("id"));
    const deliveries = unwrap(await tenantStub(c, tenantId).listDeliveries(id, limit));
    return c.json({ webhook_id: id, deliveries });
  })
  .post("/:id/redeliver", async (c) => {
    const tenantId = requireScope(c, "webhooks:write");
    const id = webhookId(c.req.param("id"));
    const { event_id } = await readJson(c, Redeliver);
    const stub = tenantStub(c, tenantId);
    const { target, event } = unwrap(await stub.redeliveryOf(tenantId, id, event_id));
    // One attempt by hand, now: nothing schedules another (a delivered one cancels the scheduled
    // retries: each finds the event delivered and sends nothing), so the answer carries no plan.
    const outcome = await deliverOne(c.env, tenantId, target, event);
    return c.json({ event_id, ...shownOutcome(outcome) });
  })
  .post("/:id/test", async (c) => {
    const tenantId = requireScope(c, "webhooks:write");
    const id = webhookId(c.req.param("id"));
    const stub = tenantStub(c, tenantId);
    // This endpoint whatever its events filter (the same lookup a delivery makes).
    const targets = unwrap(await stub.webhookTargets(tenantId, "webhook.test", id));
    const target = targets.find((candidate) => candidate.id === id);
    if (!target) throw new ApiProblem({ code: "not_found", detail: `no webhook ${id}` });
    const hex = Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) =>
      byte.toString(16).padStart(2, "0"),
    ).join("");
    const event: ToolgateEvent = {
      id: `evt_${hex}`,
      type: "webhook.test",
      at_ms: Date.now(),
      tenant_id: tenantId,
      run_id: null,
      operation_id: null,
      tool: null,
      data: { webhook_id: id },
    };
    // A ping is not retried: the answer carries no retry plan.
    const outcome = await deliverOne(c.env, tenantId, target, event);
    return c.json({ event_id: event.id, ...shownOutcome(outcome) });
  });
