// The tenant's standing grants (issue 35 item 1): stored (`grants`, one row each, kept after a
// revoke or expiry so its uses stay listed), carried in the run's tenant facts while live (a create
// or revoke tells the runs to drop their snapshot, freezes.ts `tellRuns`), and answered in
// `sendChecks` so every send point of a call that relied on one sees a revoke of the moment. The
// uses are the reservations its counters hold (LimitObject `uses`), read when one grant is shown.
// The tenant's chain (chain.ts) records each grant made and revoked, in the change's transaction,
// and each use once per (grant, operation) as the operation's outbox delivers it (`grant_uses`).
import {
  confirmGrant as confirmed,
  grantCounters,
  grantBounds,
  grantEventData,
  usedUp,
  type GrantUsed,
  grantView,
  GRANT_SUBJECT,
  isProposed,
  type Grant,
  type GrantConfirmError,
} from "../../domain/grant.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { GrantUseItem } from "../../domain/journal/announce.ts";
import type { TraceEvent } from "../../domain/operation/index.ts";
import { verifyChain } from "../../domain/trace-chain.ts";
import { appendChain, tenantChain } from "./chain.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { limitStub } from "../stubs.ts";
import { queueTells, storeTenantEvent, tellRuns } from "./freezes.ts";
import { eventId, makeEvent, type EventOf } from "../../domain/journal/events.ts";
import { GRANT_USE_AMOUNT_COLUMN } from "../store/tenant-rows.ts";

/** Grants are few; a tenant keeps at most this many (live or not) listed. */
export const MAX_LISTED = 200;

/** The grants that may cover calls now: what the facts and the send checks carry ([] when none). */
export function liveGrants(store: SqlStore, nowMs: number): Grant[] {
  if (!store.exists("grants")) return [];
  return store
    .all<{ data: string }>("SELECT data FROM grants WHERE live_until > ? ORDER BY id", nowMs)
    .map((row) => JSON.parse(row.data) as Grant);
}

export function grantById(store: SqlStore, id: string): Grant | null {
  if (!store.exists("grants")) return null;
  const row = store.one<{ data: string }>("SELECT data FROM grants WHERE id = ?", id);
  return row ? (JSON.parse(row.data) as Grant) : null;
}

/** A grant changed, and how many of the tenant's runs were told (the rest by the alarm). */
type GrantChange = { grant: ReturnType<typeof grantView>; runs_told: number; runs_pending: number };

/** The tenant's grant settings (admin: PUT /v1/admin/tenants/{id}/settings). */
export type GrantSettings = { grant_four_eyes: boolean };

export function grantSettings(store: SqlStore): GrantSettings {
  const row = store.exists("tenant_settings")
    ? store.one<{ value: string }>(
        "SELECT value FROM tenant_settings WHERE name = 'grant_four_eyes'",
      )
    : null;
  return { grant_four_eyes: row?.value === "true" };
}

export function putGrantSettings(store: SqlStore, settings: GrantSettings): GrantSettings {
  store.ensureTable("tenant_settings");
  store.run(
    "INSERT OR REPLACE INTO tenant_settings (name, value) VALUES ('grant_four_eyes', ?)",
    String(settings.grant_four_eyes),
  );
  return grantSettings(store);
}

/**
 * POST /v1/grants: stored, then the runs told (their next call sees it). Under the tenant's four
 * eyes (read in the same transaction) it is stored proposed: not live, told to no run, until a
 * second person confirms it.
 */
export async function createGrant(store: SqlStore, env: Env, tenantId: string, made: Grant) {
  const grant = store.transaction(() => {
    const grant: Grant = { ...made, fourEyes: grantSettings(store).grant_four_eyes };
    store.ensureTable("grants");
    store.run(
      "INSERT INTO grants (id, data, live_until) VALUES (?, ?, ?)",
      grant.id,
      JSON.stringify(grant),
      isProposed(grant) ? 0 : grant.expiresAtMs,
    );
    const seq = appendChain(store, createdEntry(grant));
    announce(store, tenantId, "grant.created", seq, grant, grant.createdBy, grant.createdAtMs);
    if (!isProposed(grant)) queueTells(store, grant.createdAtMs);
    return grant;
  });
  const told = await tellRuns(store, env, tenantId);
  return {
    grant: grantView(grant, grant.createdAtMs),
    runs_told: told.told,
    runs_pending: told.pending,
  };
}

/** POST /v1/grants/{id}/confirm: the second person's confirmation makes a proposed grant live. */
export async function confirmGrant(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  by: string,
): Promise<Result<GrantChange, GrantConfirmError>> {
  const nowMs = Date.now();
  const done = store.transaction(() => {
    const grant = grantById(store, id);
    if (!grant) return err({ code: "not_found" as const, detail: `no grant ${id}` });
    const next = confirmed(grant, by, nowMs);
    if (!next.ok) return next;
    store.run(
      "UPDATE grants SET data = ?, live_until = ? WHERE id = ?",
      JSON.stringify(next.value),
      next.value.expiresAtMs,
      id,
    );
    const seq = appendChain(store, { type: "grant_confirmed", at_ms: nowMs, grant_id: id, by });
    announce(store, tenantId, "grant.confirmed", seq, next.value, by, nowMs);
    queueTells(store, nowMs);
    return next;
  });
  if (!done.ok) return done;
  const told = await tellRuns(store, env, tenantId);
  return ok({
    grant: grantView(done.value, nowMs),
    runs_told: told.told,
    runs_pending: told.pending,
  });
}

/**
 * DELETE /v1/grants/{id}: revoked (kept, with who and when). Idempotent: a revoked grant answers
 * as it is. Committed before the runs are told, so every send check from now on sees it.
 */
export async function revokeGrant(
  store: SqlStore,
  env: Env,
  tenantId: string,
  id: string,
  by: string,
) {
  const nowMs = Date.now();
  const revoked = store.transaction(() => {
    const grant = grantById(store, id);
    if (!grant || grant.revokedAtMs !== null) return grant;
    const next: Grant = { ...grant, revokedAtMs: nowMs, revokedBy: by };
    store.run("UPDATE grants SET data = ?, live_until = 0 WHERE id = ?", JSON.stringify(next), id);
    const seq = appendChain(store, { type: "grant_revoked", at_ms: nowMs, grant_id: id, by });
    announce(store, tenantId, "grant.revoked", seq, next, by, nowMs);
    queueTells(store, nowMs);
    return next;
  });
  if (!revoked) return null;
  const told = await tellRuns(store, env, tenantId);
  return { grant: grantView(revoked, nowMs), runs_told: told.told, runs_pending: told.pending };
}

/** The chain entry of a grant made: every bound it was made with, and by whom. */
function createdEntry(grant: Grant): TraceEvent {
  return {
    type: "grant_created",
    at_ms: grant.createdAtMs,
    grant_id: grant.id,
    ...grantBounds(grantView(grant, grant.createdAtMs)),
    expires_at_ms: grant.expiresAtMs,
    reason: grant.reason,
    by: grant.createdBy,
    proposed: isProposed(grant),
  };
}

/**
 * A call the grant let through, delivered by its operation's outbox (at least once): chained the
 * first time, a redelivery changes nothing. A use of a grant this tenant never made is not chained.
 */
export function recordGrantUse(
  store: SqlStore,
  tenantId: string,
  item: GrantUseItem,
  nowMs: number,
): void {
  store.transaction(() => {
    const grant = grantById(store, item.grant_id);
    if (!grant) return;
    store.ensureTable("grant_uses");
    store.ensureColumn("grant_uses", GRANT_USE_AMOUNT_COLUMN);
    const known = store.one(
      "SELECT chain_seq FROM grant_uses WHERE grant_id = ? AND operation_id = ?",
      item.grant_id,
      item.operation_id,
    );
    if (known) return;
    const before = usedOf(store, grant.id);
    const seq = appendChain(store, { type: "grant_use", at_ms: nowMs, ...item });
    store.run(
      "INSERT INTO grant_uses (grant_id, operation_id, chain_seq, amount) VALUES (?, ?, ?, ?)",
      item.grant_id,
      item.operation_id,
      seq,
      item.amount,
    );
    // Once per (grant, operation), like its chain entry; `grant.exhausted` once, on the use that fills it.
    const used = usedOf(store, grant.id);
    const use = { operation_id: item.operation_id, amount: item.amount };
    announce(store, tenantId, "grant.used", seq, grant, null, nowMs, { use, used });
    if (usedUp(grant, used) && !usedUp(grant, before))
      announce(store, tenantId, "grant.exhausted", seq, grant, null, nowMs, { use, used });
  });
}

/** The uses chained so far (an older row without its amount counts 0 toward the sum). */
function usedOf(store: SqlStore, grantId: string): GrantUsed {
  const row = store.one<{ calls: number; sum: number | null }>(
    "SELECT COUNT(*) AS calls, SUM(amount) AS sum FROM grant_uses WHERE grant_id = ?",
    grantId,
  );
  return { calls: row?.calls ?? 0, sum: row?.sum ?? 0 };
}

/**
 * A grant's event (issue 35), stored and queued in `tenant_outbox` in the change's transaction, its
 * id from the chain entry it rides with (so a redelivery is the same event); the tenant object sends
 * it after the change (`sendOwnEvents`), its alarm if that fails.
 */
function announce(
  store: SqlStore,
  tenantId: string,
  type: "grant.created" | "grant.confirmed" | "grant.revoked" | "grant.used" | "grant.exhausted",
  seq: number,
  grant: Grant,
  by: string | null,
  nowMs: number,
  extra: Parameters<typeof grantEventData>[3] = {},
): void {
  const event = makeEvent(type, {
    id: eventId(`${tenantId}:chain`, seq, type),
    at_ms: nowMs,
    tenant_id: tenantId,
    run_id: null,
    operation_id: extra.use?.operation_id ?? null,
    tool: null,
    data: grantEventData(grant, nowMs, by, extra),
  } as Omit<EventOf<typeof type>, "type">);
  storeTenantEvent(store, event);
}

/** The tenant's chain checked whole, and this grant's entries in it (made, revoked, each use). */
function grantChain(store: SqlStore, id: string) {
  const entries = tenantChain(store);
  return {
    check: verifyChain(entries),
    entries: entries.filter((entry) => "grant_id" in entry && entry.grant_id === id),
  };
}

export function listGrants(store: SqlStore) {
  const nowMs = Date.now();
  if (!store.exists("grants")) return { grants: [] };
  const rows = store.all<{ data: string }>(
    "SELECT data FROM grants ORDER BY id DESC LIMIT ?",
    MAX_LISTED,
  );
  return { grants: rows.map((row) => grantView(JSON.parse(row.data) as Grant, nowMs)) };
}

/** One grant with each use its counters hold (the count's, or the sum's when it has no count). */
export async function showGrant(store: SqlStore, env: Env, tenantId: string, id: string) {
  const grant = grantById(store, id);
  if (!grant) return null;
  const names = grantCounters(id);
  const [sum, count] = await Promise.all([
    grant.totalMax !== null
      ? limitStub(env, tenantId, names.sum, GRANT_SUBJECT).uses(tenantId)
      : Promise.resolve([]),
    grant.count !== null
      ? limitStub(env, tenantId, names.count, GRANT_SUBJECT).uses(tenantId)
      : Promise.resolve([]),
  ]);
  const amounts = new Map(sum.map((use) => [use.operationId, use.amount]));
  // A call holds every counter of its grant or none (start.ts), so either lists every use.
  const uses = (grant.count !== null ? count : sum).map((use) => ({
    operation_id: use.operationId,
    amount: grant.field === null ? null : (amounts.get(use.operationId) ?? null),
    at: new Date(use.atMs).toISOString(),
    state: use.state,
  }));
  const held = uses.filter((use) => use.state === "held");
  return {
    ...grantView(grant, Date.now()),
    used: {
      calls: held.length,
      ...(grant.field !== null ? { sum: held.reduce((s, u) => s + (u.amount ?? 0), 0) } : {}),
    },
    uses,
    chain: grantChain(store, id),
  };
}
