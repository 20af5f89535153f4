// Retention's message to the tenant index (issue 20): the rows of a pruned operation or run go.
// Through the events queue of the tenant's jurisdiction, like the feed, so the index is only ever
// written by the consumer.
import type { IndexDropMessage } from "../../domain/journal/events.ts";
import type { Env } from "../env.ts";
import { eventsQueue } from "../placement.ts";

/** True when the queue took it (then the consumer drops the rows, retrying until it has). */
export async function dropFromIndex(
  env: Env,
  tenantId: string,
  ids: { operations: string[]; runs: string[] },
): Promise<boolean> {
  const message: IndexDropMessage = { kind: "index_drop", tenant_id: tenantId, ...ids };
  try {
    await eventsQueue(env, tenantId).send(message, { contentType: "json" });
    return true;
  } catch (error) {
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.index_drop_send_failed",
        tenant_id: tenantId,
        detail: String(error),
      }),
    );
    return false;
  }
}
