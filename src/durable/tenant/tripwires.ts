// The tenant's tripwires (issue 34 item 2): stored (`tripwires`), carried in the run's tenant facts
// like freezes (a PUT or DELETE tells the runs to drop their snapshot, freezes.ts `tellRuns`), and
// the tenant's side of a trip: `tripFreeze` makes the trip's freeze with its deterministic id through
// `createFreeze` and announces `tripwire.tripped`, in one transaction, once per id (the counter asks
// again after a crash; a freeze already made, lifted or not, is never made again). Lifting such a
// freeze tells its counter (`untripCounter`), which re-arms the tripwire from then; a tell that is
// lost is made good by the counter, which asks `tripLifted` while tripped.
import { eventId, makeEvent, type EventOf } from "../../domain/journal/events.ts";
import type { Freeze } from "../../domain/freeze.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import {
  TRIPWIRE_PREFIX,
  tripwireView,
  type TripSpec,
  type Tripwire,
} from "../../domain/tripwire.ts";
import type { Env } from "../env.ts";
import { decodeTripwire } from "../store/freeze-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantRecord } from "../store/tenant-rows.ts";
import { limitStub } from "../stubs.ts";
import type { TenantError } from "./contracts.ts";
import { createFreeze, isLifted, queueTells, storeTenantEvent, tellRuns } from "./freezes.ts";

/**
 * Every tripwire of the tenant: what the facts carry ([] when none: no cost on a call's path). A row
 * that does not decode throws (store/freeze-rows.ts): the facts cannot be read, so no call starts
 * uncounted (the turn answers `unavailable`) — never read as one tripwire fewer.
 */
export function liveTripwires(store: SqlStore): Tripwire[] {
  if (!store.exists("tripwires")) return [];
  return store
    .all<{ data: string }>("SELECT data FROM tripwires ORDER BY id")
    .map((row) => decodeTripwire(row.data));
}

/** PUT /v1/tripwires/{id}: stored (replacing one of the same id), then the runs told. */
export async function putTripwire(store: SqlStore, env: Env, tenantId: string, wire: Tripwire) {
  const created = store.transaction(() => {
    store.ensureTable("tripwires");
    const existed = store.one("SELECT id FROM tripwires WHERE id = ?", wire.id) !== null;
    store.run(
      "INSERT OR REPLACE INTO tripwires (id, data) VALUES (?, ?)",
      wire.id,
      JSON.stringify(wire),
    );
    queueTells(store, Date.now());
    return !existed;
  });
  const told = await tellRuns(store, env, tenantId);
  return {
    tripwire: tripwireView(wire),
    created,
    runs_told: told.told,
    runs_pending: told.pending,
  };
}

/** DELETE /v1/tripwires/{id}: it counts nothing more (a freeze it made stays until lifted). */
export async function deleteTripwire(store: SqlStore, env: Env, tenantId: string, id: string) {
  const gone = store.transaction(() => {
    if (!store.exists("tripwires")) return null;
    const row = store.one<{ data: string }>("SELECT data FROM tripwires WHERE id = ?", id);
    if (!row) return null;
    store.run("DELETE FROM tripwires WHERE id = ?", id);
    queueTells(store, Date.now());
    return decodeTripwire(row.data);
  });
  if (!gone) return null;
  const told = await tellRuns(store, env, tenantId);
  return { tripwire: tripwireView(gone), runs_told: told.told, runs_pending: told.pending };
}

export const listTripwires = (store: SqlStore) => ({
  tripwires: liveTripwires(store).map(tripwireView),
});

/** A counter asks only its own tenant (another tenant's is refused as no such tenant). */
const ownTenant = (store: SqlStore, tenantId: string) => tenantRecord(store)?.id === tenantId;
const noTenant = err({ code: "not_found" as const, detail: "no such tenant" });

/** What a counter sends when it trips (trip.ts). */
export type TripNotice = {
  freeze: Freeze;
  tripwireId: string;
  subject: string;
  measure: TripSpec["measure"];
  threshold: number;
  trippedBy: string | null;
};

/**
 * A trip's freeze and its `tripwire.tripped` event, in one transaction, once per freeze id. True:
 * made now; false: made before (lifted since, or not). Another tenant's counter is refused.
 */
export function tripFreeze(
  store: SqlStore,
  tenantId: string,
  trip: TripNotice,
): Result<boolean, TenantError> {
  if (!ownTenant(store, tenantId)) return noTenant;
  const { freeze } = trip;
  return ok(
    store.transaction(() => {
      store.ensureTable("freezes");
      if (store.one("SELECT id FROM freezes WHERE id = ?", freeze.id) !== null) return false;
      createFreeze(store, tenantId, freeze);
      const event = makeEvent("tripwire.tripped", {
        id: eventId(`${tenantId}:tripwire:${freeze.id}`, 0, "tripwire.tripped"),
        at_ms: freeze.created_at_ms,
        tenant_id: tenantId,
        run_id: null,
        operation_id: trip.trippedBy,
        tool: "tool" in freeze.scope ? (freeze.scope.tool ?? null) : null,
        data: {
          tripwire_id: trip.tripwireId,
          subject: trip.subject,
          measure: trip.measure,
          threshold: trip.threshold,
          freeze_id: freeze.id,
          mode: freeze.mode,
          reason: freeze.reason,
          tripped_by: trip.trippedBy,
        },
      } as Omit<EventOf<"tripwire.tripped">, "type">);
      storeTenantEvent(store, event);
      return true;
    }),
  );
}

/**
 * Whether a tripped counter's freeze was lifted (asked by the counter before it answers "tripped":
 * trip.ts `recheckLift`). Not lifted, or no such freeze: false — the counter stays tripped.
 */
export function tripLifted(
  store: SqlStore,
  tenantId: string,
  freezeId: string,
): Result<boolean, TenantError> {
  if (!ownTenant(store, tenantId)) return noTenant;
  return ok(isLifted(store, freezeId));
}

/**
 * A lifted freeze a tripwire made: its counter is told, so the next call counts afresh. The fast
 * path only: a tell that is lost changes nothing for long, since a tripped counter asks the tenant
 * (`tripLifted`) before it answers "tripped" and re-arms on a lifted freeze by itself.
 */
export async function untripCounter(
  env: Env,
  tenantId: string,
  freeze: Pick<Freeze, "id" | "scope">,
): Promise<void> {
  if (!("tripwire" in freeze.scope)) return;
  const { tripwire, subject } = freeze.scope;
  await limitStub(env, tenantId, `${TRIPWIRE_PREFIX}${tripwire}`, subject)
    .untrip(tenantId, freeze.id)
    .catch((error: unknown) =>
      console.error("tripwire: its counter was not told of the lift", freeze.id, String(error)),
    );
}
