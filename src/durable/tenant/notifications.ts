// Whether each operation's notification reached the tenant's webhook endpoints, from the delivery
// log: per operation id, the latest attempt at each endpoint that logged one (only of event `type`
// when given: an unknown-outcome card asks about its operation.outcome_unknown, not an earlier
// approval.requested of the same operation). One query per page.
import type { EventType } from "../../domain/journal/events.ts";
import type { SqlStore } from "../store/sql-store.ts";

/** delivered: endpoints whose latest attempt succeeded; failing: endpoints whose latest failed. */
export type NotificationState = { delivered: number; failing: number };

export function notificationStates(
  store: SqlStore,
  operationIds: string[],
  type: EventType | null = null,
): Record<string, NotificationState> {
  const out: Record<string, NotificationState> = {};
  const ids = operationIds.slice(0, 100);
  if (ids.length === 0 || !store.exists("webhook_deliveries")) return out;
  const ofType = type ? " AND json_extract(e.event, '$.type') = ?" : "";
  const rows = store.all<{ op: string; endpoint_id: string; delivered: number }>(
    `SELECT json_extract(event, '$.operation_id') AS op, endpoint_id, delivered FROM webhook_deliveries d
     WHERE json_extract(event, '$.operation_id') IN (${ids.map(() => "?").join(", ")})
       AND seq = (SELECT MAX(seq) FROM webhook_deliveries e WHERE e.endpoint_id = d.endpoint_id
                  AND json_extract(e.event, '$.operation_id') = json_extract(d.event, '$.operation_id')${ofType})`,
    ...ids,
    ...(type ? [type] : []),
  );
  for (const row of rows) {
    const state = (out[row.op] ??= { delivered: 0, failing: 0 });
    if (row.delivered === 1) state.delivered++;
    else state.failing++;
  }
  return out;
}
