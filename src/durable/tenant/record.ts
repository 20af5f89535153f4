// The tenant record (written once, by TenantObject.init) and the tenant's one alarm: retention of
// the approvals inbox and closed unknown outcomes (inbox.ts), the stored events (events.ts), the
// webhook delivery logs (webhook-deliveries.ts) and the runs' notify endpoints (run-endpoints.ts),
// and the resend of the tenant's own events the queue has not taken yet (events.ts), re-armed for
// the earliest due time among them.
import { err, ok, type Result } from "../../domain/result.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { TenantError } from "./contracts.ts";
import { pruneEvents, sendTenantEvents } from "./events.ts";
import type { Inbox } from "./inbox.ts";
import * as runEndpoints from "./run-endpoints.ts";
import { pruneDeliveries } from "./webhook-deliveries.ts";

export type TenantCreated = { tenant_id: string; name: string };

const earliestOf = (a: number | null, b: number | null) =>
  a === null ? b : b === null ? a : Math.min(a, b);

export function initTenant(
  store: SqlStore,
  tenantId: string,
  name: string,
): Result<TenantCreated, TenantError> {
  store.ensureSchema();
  if (store.one("SELECT id FROM tenant"))
    return err({ code: "invalid_request", detail: "tenant exists" });
  store.run(
    "INSERT INTO tenant (id, name, created_at) VALUES (?, ?, ?)",
    tenantId,
    name,
    Date.now(),
  );
  return ok({ tenant_id: tenantId, name });
}

/** TenantObject.alarm: retention for the inbox and for the closed rows of the unknown-outcomes list. */
export async function tenantAlarm(
  store: SqlStore,
  storage: DurableObjectStorage,
  env: Env,
  inbox: Inbox,
  freezes: () => Promise<number | null>,
): Promise<void> {
  await inbox.prune();
  // Freezes first (issue 34): an expiry lifted here writes its event, which the send below takes.
  const freezeAtMs = await freezes();
  const retryAtMs = earliestOf(await sendTenantEvents(store, env), freezeAtMs);
  // The stored events, the delivery logs, the runs' notify endpoints and the tenant's unsent events
  // share the one alarm: the earliest due time.
  const now = Date.now();
  const { earliest } = runEndpoints;
  const next = earliest(
    earliest(pruneEvents(store, env, now), pruneDeliveries(store, env, now)),
    earliest(runEndpoints.pruneRunEndpoints(store, now), retryAtMs),
  );
  const armed = await storage.getAlarm();
  if (next !== null && (armed === null || next < armed)) await storage.setAlarm(next);
}
