// Retention for the run itself (issue 10: "in each object"): once the run's token has been expired
// for the retention period and every one of its operations is gone, its rows go and one row stays
// (id, tenant, when: every route then answers 410 run_pruned). Alarms are at-least-once: each
// pass re-reads everything and either prunes in one transaction or sets the next alarm.
import { operationIds } from "../../domain/turn/turn.ts";
import { retentionMs } from "../../config.ts";
import { dropFromIndex } from "../index/drop.ts";
import { operationStub, tenantStub } from "../stubs.ts";
import { compensationIds } from "./compensate.ts";
import type { RunParts } from "./contracts.ts";

/** A run still holding an operation asks again a day later. */
const RUN_PRUNE_RECHECK_MS = 24 * 60 * 60_000;

/**
 * Its turns keep every call's frozen arguments, so they go too — but only once the run's token
 * has been expired for the retention period and every one of its operations is gone: an operation
 * still held (outcome unknown, awaiting approval, recorded but not yet pruned) may still ask this
 * run `authorize`. Asked in order, stopping at the first that is still there; then rechecked
 * daily. A turn that arrived meanwhile (a tenant key may still post) defers it. True when pruned
 * now (the object then drops its caches).
 */
export async function pruneRun(
  parts: RunParts,
  storage: DurableObjectStorage,
  nowMs: number,
): Promise<boolean> {
  const { env, store, rows } = parts;
  const run = rows.load();
  if (!run) return false;
  const dueAtMs = run.expiresAtMs + retentionMs(env);
  if (nowMs < dueAtMs) {
    await storage.setAlarm(dueAtMs);
    return false;
  }
  // Not while an event waits for its resend (events.ts): the alarm comes back for it first.
  if (parts.events.dueAtMs() !== null) return false;
  const turns = rows.turns();
  // A compensation (undo) asks this run `authorize` too: the run stays while one is held.
  for (const id of new Set([...turns.flatMap(operationIds), ...compensationIds(parts)])) {
    const view = await operationStub(env, id)
      .get(run.tenantId, 0)
      .catch(() => null);
    const gone = view !== null && !view.ok && view.error.code !== "invalid_tool";
    if (!gone) {
      await storage.setAlarm(nowMs + RUN_PRUNE_RECHECK_MS);
      return false;
    }
  }
  // The tenant index drops the run's row first (issue 20), and the tenant's list of runs (what an
  // index rebuild walks, tenant/runs.ts) forgets it; either not done: retry.
  const forgotten = await tenantStub(env, run.tenantId)
    .forgetRuns([run.runId])
    .then(() => true)
    .catch(() => false);
  if (
    !forgotten ||
    !(await dropFromIndex(env, run.tenantId, { operations: [], runs: [run.runId] }))
  ) {
    await storage.setAlarm(nowMs + 60_000);
    return false;
  }
  const pruned = store.transaction(() => {
    if (rows.turns().length !== turns.length) return false;
    store.ensureTable("run_pruned");
    store.run(
      "INSERT OR REPLACE INTO run_pruned (k, run_id, tenant_id, pruned_at_ms) VALUES (1, ?, ?, ?)",
      run.runId,
      run.tenantId,
      nowMs,
    );
    for (const table of [
      "turns",
      "turn_groups",
      "turn_ops",
      "tool_sources",
      "usage",
      "run",
      "run_events",
      "tenant_facts",
      "compensations",
      "rollback",
      "rollback_steps",
      "rollback_approvals",
      "rollback_refusals",
    ])
      if (store.exists(table)) store.run(`DELETE FROM ${table}`);
    return true;
  });
  if (!pruned) await storage.setAlarm(nowMs + 60_000);
  return pruned;
}

/**
 * The run's one alarm: events the queue has not taken go first (events.ts), then retention, which
 * sets its own alarm; a resend still due comes back before it. True when the run was pruned now.
 */
export async function runAlarm(parts: RunParts, storage: DurableObjectStorage): Promise<boolean> {
  await parts.events.send();
  const pruned = await pruneRun(parts, storage, Date.now());
  const resendAtMs = parts.events.dueAtMs();
  if (resendAtMs !== null) {
    const armed = await storage.getAlarm();
    if (armed === null || armed > resendAtMs) await storage.setAlarm(resendAtMs);
  }
  return pruned;
}
