// The tenant's freezes (issue 34): stored (`freezes`), each PUT and each lift an entry in the tenant's
// hash chain (`tenant_chain`, sealed like an operation's trace) and an event (freeze.created /
// freeze.lifted, in `tenant_outbox`), all in one transaction. `createFreeze` is the one creation
// function (a tripwire calls it in the transaction of the write that crosses it). After a change
// the tenant's runs are told to drop their facts snapshot (`freeze_tells`: the change's commit
// queues every run; the PUT tells a first batch, the alarm the rest), and after a lift the
// operations it held (`freeze_holds`, fed by their outboxes) are woken a batch at a time.
import {
  eventId,
  makeEvent,
  type EventOf,
  type FreezeEventData,
  type ToolgateEvent,
} from "../../domain/journal/events.ts";
import {
  freezeView,
  isLive,
  nextExpiryMs,
  type Freeze,
  type FreezeView,
} from "../../domain/freeze.ts";
import { isoUtc } from "../../domain/envelope.ts";
import type { TraceEvent } from "../../domain/operation/index.ts";
import { verifyChain, type ChainCheck } from "../../domain/trace-chain.ts";
import { appendChain, tenantChain } from "./chain.ts";
import type { HeldItem } from "../../domain/journal/announce.ts";
import type { Env } from "../env.ts";
import { decodeFreeze } from "../store/freeze-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub, runStub } from "../stubs.ts";
import { liveSinceMs } from "./runs.ts";

/** Held operations woken per tenant alarm after a lift, and the gap before the next batch. */
export const WAKE_BATCH = 10;
export const WAKE_GAP_MS = 1_000;
/** Runs told per batch to drop their facts snapshot, and how long one is waited for. */
export const TELL_BATCH = 50;
export const TELL_TIMEOUT_MS = 2_000;

type FreezeRow = { id: string; data: string; lifted_at: number | null };
/**
 * A row that does not decode throws (store/freeze-rows.ts): every read of the freezes of the moment
 * then fails — the run's facts, `sendChecks` — so no call starts or is sent past a freeze nobody can
 * read (the turn answers `unavailable`, a send point waits), rather than reading it as no freeze.
 */
const decode = (row: FreezeRow): Freeze => decodeFreeze(row.data);

/** Freezes not lifted (expired ones included until the alarm lifts them). */
function standing(store: SqlStore): Freeze[] {
  if (!store.exists("freezes")) return [];
  return store
    .all<FreezeRow>("SELECT id, data, lifted_at FROM freezes WHERE lifted_at IS NULL ORDER BY id")
    .map(decode);
}

/** The freezes that apply now: what the facts and every send check carry. */
export const liveFreezes = (store: SqlStore, nowMs: number): Freeze[] =>
  standing(store).filter((freeze) => isLive(freeze, nowMs));

/**
 * Stores (or replaces) a freeze with its chain entry and event, and queues the runs to tell: the
 * ONE way a freeze comes to be. Call inside a transaction (a tripwire's write, or putFreeze).
 */
export function createFreeze(store: SqlStore, tenantId: string, freeze: Freeze): void {
  for (const table of ["freezes", "freeze_tells"]) store.ensureTable(table);
  store.run(
    "INSERT OR REPLACE INTO freezes (id, data, lifted_at) VALUES (?, ?, NULL)",
    freeze.id,
    JSON.stringify(freeze),
  );
  record(store, tenantId, "freeze.created", freeze, freeze.created_by, false, freeze.created_at_ms);
  queueTells(store, freeze.created_at_ms);
}

/** PUT /v1/freezes/{id}: stored, then a first batch of runs told (the alarm tells the rest). */
export async function putFreeze(
  store: SqlStore,
  storage: DurableObjectStorage,
  env: Env,
  tenantId: string,
  freeze: Freeze,
) {
  const created = store.transaction(() => {
    const existed = store.exists("freezes")
      ? store.one("SELECT id FROM freezes WHERE id = ? AND lifted_at IS NULL", freeze.id) !== null
      : false;
    createFreeze(store, tenantId, freeze);
    return !existed;
  });
  const told = await tellRuns(store, env, tenantId);
  await armFreezeAlarm(store, storage, Date.now());
  return { freeze: freezeView(freeze), created, runs_told: told.told, runs_pending: told.pending };
}

/** DELETE /v1/freezes/{id}, or its expiry: lifted, chained, announced; its held operations woken. */
export function liftFreeze(
  store: SqlStore,
  tenantId: string,
  id: string,
  by: string,
  nowMs: number,
  expired = false,
): Freeze | null {
  return store.transaction(() => {
    if (!store.exists("freezes")) return null;
    const row = store.one<FreezeRow>(
      "SELECT id, data, lifted_at FROM freezes WHERE id = ? AND lifted_at IS NULL",
      id,
    );
    if (!row) return null;
    const freeze = decode(row);
    store.run("UPDATE freezes SET lifted_at = ? WHERE id = ?", nowMs, id);
    record(store, tenantId, "freeze.lifted", freeze, by, expired, nowMs);
    queueTells(store, nowMs);
    return freeze;
  });
}

/** Whether this freeze was made and has been lifted since (by DELETE or its expiry). */
export function isLifted(store: SqlStore, id: string): boolean {
  if (!store.exists("freezes")) return false;
  return store.one("SELECT id FROM freezes WHERE id = ? AND lifted_at IS NOT NULL", id) !== null;
}

export async function deleteFreeze(
  store: SqlStore,
  storage: DurableObjectStorage,
  env: Env,
  tenantId: string,
  id: string,
  by: string,
) {
  const lifted = liftFreeze(store, tenantId, id, by, Date.now());
  if (!lifted) return null;
  const told = await tellRuns(store, env, tenantId);
  // The wake of its held operations starts on the alarm, now (off this request).
  await storage.setAlarm(Date.now());
  return { freeze: freezeView(lifted), runs_told: told.told, runs_pending: told.pending };
}

/** Lifted freezes listed, newest lift first (the chain keeps every one). */
export const LIFTED_SHOWN = 20;

/**
 * GET /v1/freezes: those that apply now, the latest lifted ones (with when), and the chain of
 * every freeze and lift, checked.
 */
export function listFreezes(
  store: SqlStore,
  nowMs: number,
): {
  freezes: FreezeView[];
  lifted: Array<FreezeView & { lifted_at: string }>;
  chain: ChainCheck;
} {
  const lifted = store.exists("freezes")
    ? store
        .all<FreezeRow>(
          "SELECT id, data, lifted_at FROM freezes WHERE lifted_at IS NOT NULL ORDER BY lifted_at DESC LIMIT ?",
          LIFTED_SHOWN,
        )
        .map((row) => ({ ...freezeView(decode(row)), lifted_at: isoUtc(row.lifted_at!) }))
    : [];
  return {
    freezes: liveFreezes(store, nowMs).map(freezeView),
    lifted,
    chain: verifyChain(tenantChain(store)),
  };
}

/** One chain entry and one event for a freeze's creation or lift (inside the caller's transaction). */
function record(
  store: SqlStore,
  tenantId: string,
  type: "freeze.created" | "freeze.lifted",
  freeze: Freeze,
  by: string,
  expired: boolean,
  nowMs: number,
): void {
  const scope = freeze.scope as Record<string, string | true>;
  const entry: TraceEvent =
    type === "freeze.created"
      ? {
          type: "freeze_created",
          at_ms: nowMs,
          freeze_id: freeze.id,
          mode: freeze.mode,
          scope,
          writes_only: freeze.writes_only,
          reason: freeze.reason,
          by,
          expires_at_ms: freeze.expires_at_ms,
        }
      : { type: "freeze_lifted", at_ms: nowMs, freeze_id: freeze.id, by, expired };
  const seq = appendChain(store, entry);
  const view = freezeView(freeze);
  const data: FreezeEventData = {
    freeze_id: freeze.id,
    scope,
    mode: freeze.mode,
    writes_only: freeze.writes_only,
    reason: freeze.reason,
    expires_at: view.expires_at,
    by,
    ...(type === "freeze.lifted" ? { expired } : {}),
  };
  const event = makeEvent(type, {
    id: eventId(`${tenantId}:freezes`, seq, type),
    at_ms: nowMs,
    tenant_id: tenantId,
    run_id: "run" in freeze.scope ? freeze.scope.run : null,
    operation_id: null,
    tool: "tool" in freeze.scope ? freeze.scope.tool : null,
    data,
  } as Omit<EventOf<typeof type>, "type">);
  storeTenantEvent(store, event);
}

/** A tenant's own event, stored and queued for the EVENTS queue (inside the caller's transaction). */
export function storeTenantEvent(store: SqlStore, event: ToolgateEvent): void {
  for (const table of ["events", "tenant_outbox"]) store.ensureTable(table);
  store.run(
    "INSERT INTO events (id, type, at_ms, body) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    event.id,
    event.type,
    event.at_ms,
    JSON.stringify(event),
  );
  store.run(
    "INSERT OR IGNORE INTO tenant_outbox (id, payload) VALUES (?, ?)",
    event.id,
    JSON.stringify(event),
  );
}

/**
 * Every run the tenant knows that has not expired is to be told (a run told twice only re-reads its
 * facts once more; an expired run makes no more calls, so it is never told).
 */
export function queueTells(store: SqlStore, nowMs: number): void {
  if (!store.exists("tenant_runs")) return;
  store.ensureTable("freeze_tells");
  store.run(
    "INSERT OR IGNORE INTO freeze_tells (run_id) SELECT run_id FROM tenant_runs WHERE at_ms > ?",
    liveSinceMs(nowMs),
  );
}

/**
 * Tells one batch of runs to drop their facts snapshot (so their next call asks the tenant, which
 * answers with this freeze). A run that does not answer in time stays queued for the alarm; a run
 * never reached keeps its snapshot until its bound (FACTS_MAX_AGE_MS, 30 s).
 */
export async function tellRuns(
  store: SqlStore,
  env: Env,
  tenantId: string,
): Promise<{ told: number; pending: number }> {
  if (!store.exists("freeze_tells")) return { told: 0, pending: 0 };
  // Runs that expired (or were pruned) while queued are not told: they leave the queue.
  store.ensureTable("tenant_runs");
  store.run(
    "DELETE FROM freeze_tells WHERE run_id NOT IN (SELECT run_id FROM tenant_runs WHERE at_ms > ?)",
    liveSinceMs(Date.now()),
  );
  const batch = store
    .all<{ run_id: string }>("SELECT run_id FROM freeze_tells LIMIT ?", TELL_BATCH)
    .map((row) => row.run_id);
  const answered = await Promise.all(
    batch.map(async (runId) => {
      const timeout = new Promise<false>((resolve) =>
        setTimeout(() => resolve(false), TELL_TIMEOUT_MS),
      );
      const told = runStub(env, runId)
        .dropFacts(tenantId)
        .then(() => true)
        .catch(() => false);
      return (await Promise.race([told, timeout])) ? runId : null;
    }),
  );
  const told = answered.filter((runId): runId is string => runId !== null);
  for (const runId of told) store.run("DELETE FROM freeze_tells WHERE run_id = ?", runId);
  const pending = store.one<{ n: number }>("SELECT COUNT(*) AS n FROM freeze_tells")?.n ?? 0;
  return { told: told.length, pending };
}

/**
 * An operation says it is held by a freeze, or no longer (its outbox, at least once, maybe out of
 * order: `seq` orders one operation's notices). A hold on a freeze already lifted wakes at once.
 */
export async function markHeld(
  store: SqlStore,
  storage: DurableObjectStorage,
  item: HeldItem,
  open: boolean,
  seq: number,
): Promise<void> {
  store.ensureTable("freeze_holds");
  const held = store.one<{ seq: number }>(
    "SELECT seq FROM freeze_holds WHERE operation_id = ?",
    item.operation_id,
  );
  if (held && seq < held.seq) return;
  if (!open) {
    store.run("DELETE FROM freeze_holds WHERE operation_id = ?", item.operation_id);
    return;
  }
  store.run(
    "INSERT OR REPLACE INTO freeze_holds (operation_id, freeze_id, seq, woken_at) VALUES (?, ?, ?, NULL)",
    item.operation_id,
    item.freeze_id,
    seq,
  );
  const live = liveFreezes(store, Date.now()).some((freeze) => freeze.id === item.freeze_id);
  if (!live) await storage.setAlarm(Date.now());
}

/**
 * The tenant alarm's part: lift expired freezes, wake one batch of operations held by lifted ones
 * (each asks the retry budget of its upstream before it sends: never one herd), tell one batch of
 * runs. Answers when it must run again (null: nothing left).
 */
export async function freezeAlarm(
  store: SqlStore,
  env: Env,
  tenantId: string,
): Promise<number | null> {
  if (!store.exists("freezes")) return null;
  const nowMs = Date.now();
  for (const freeze of standing(store))
    if (!isLive(freeze, nowMs)) liftFreeze(store, tenantId, freeze.id, "expires_at", nowMs, true);
  const live = new Set(liveFreezes(store, nowMs).map((freeze) => freeze.id));
  const waiting = store.exists("freeze_holds")
    ? store
        .all<{ operation_id: string; freeze_id: string }>(
          "SELECT operation_id, freeze_id FROM freeze_holds WHERE woken_at IS NULL ORDER BY seq",
        )
        .filter((hold) => !live.has(hold.freeze_id))
    : [];
  const batch = waiting.slice(0, WAKE_BATCH);
  for (const { operation_id } of batch)
    store.run("UPDATE freeze_holds SET woken_at = ? WHERE operation_id = ?", nowMs, operation_id);
  // A wake that fails is covered by the operation's own recheck (HELD_RECHECK_MS).
  await Promise.all(
    batch.map((hold) =>
      operationStub(env, hold.operation_id)
        .wakeHeld(tenantId)
        .catch(() => {}),
    ),
  );
  const told = await tellRuns(store, env, tenantId);
  const again = waiting.length > batch.length || told.pending > 0 ? nowMs + WAKE_GAP_MS : null;
  const expiry = nextExpiryMs(standing(store), nowMs);
  return again === null ? expiry : expiry === null ? again : Math.min(again, expiry);
}

/** Arms the tenant alarm for the next expiry (or earlier work) if nothing earlier is armed. */
async function armFreezeAlarm(
  store: SqlStore,
  storage: DurableObjectStorage,
  nowMs: number,
): Promise<void> {
  const pending = store.exists("freeze_tells")
    ? (store.one<{ n: number }>("SELECT COUNT(*) AS n FROM freeze_tells")?.n ?? 0)
    : 0;
  const expiry = nextExpiryMs(standing(store), nowMs);
  const due = pending > 0 ? nowMs + WAKE_GAP_MS : expiry;
  if (due === null) return;
  const armed = await storage.getAlarm();
  if (armed === null || due < armed) await storage.setAlarm(due);
}
