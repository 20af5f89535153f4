// The EVENTS queue consumer (issue 18): stores each event at its tenant (TenantObject.receiveEvents,
// deduplicated by id there) and acks a message only once its tenant stored it; anything else is
// retried by the queue. One tenant's failure never holds another's messages back.
import { ToolgateEvent, type EventMessage } from "../domain/events.ts";
import type { Env } from "../durable/env.ts";
import { tenantStub } from "../durable/stubs.ts";

export async function handleEventBatch(batch: MessageBatch<EventMessage>, env: Env): Promise<void> {
  const byTenant = new Map<
    string,
    Array<{ message: Message<EventMessage>; event: ToolgateEvent }>
  >();
  for (const message of batch.messages) {
    const parsed = ToolgateEvent.safeParse((message.body as Partial<EventMessage> | null)?.event);
    if (!parsed.success) {
      // Nothing will ever make it valid: dropped, said once.
      console.error(
        JSON.stringify({ level: "warn", event: "toolgate.event_malformed", id: message.id }),
      );
      message.ack();
      continue;
    }
    const group = byTenant.get(parsed.data.tenant_id) ?? [];
    group.push({ message, event: parsed.data });
    byTenant.set(parsed.data.tenant_id, group);
  }
  await Promise.all(
    [...byTenant].map(async ([tenantId, group]) => {
      let stored = false;
      try {
        const result = await tenantStub(env, tenantId).receiveEvents(
          tenantId,
          group.map((item) => item.event),
        );
        stored = result.ok;
      } catch (error) {
        console.error(
          JSON.stringify({
            level: "warn",
            event: "toolgate.event_store_failed",
            tenant_id: tenantId,
            detail: String(error),
          }),
        );
      }
      for (const { message } of group) stored ? message.ack() : message.retry();
    }),
  );
}
