// Rollback (issue 22), the run's shell around domain/rollback.ts: planned once when the run is
// cancelled with `rollback: true` from the operations this run created (one row per step in
// `rollback_steps`, in order, written in one transaction with the `rollback` row; nothing is
// planned while one of them does not answer), then driven one step at a time by `advance` — from the
// cancel itself and from the run's alarm — so a crash, an eviction or a failed submit in the
// middle resumes where it stood. A step is marked `submitted` only after its compensation
// answered; resubmitting after a crash is a replay of the same operation (its id derives from the
// original's, compensate.ts), never a second refund. While a compensation waits (for a person, a
// retry), the alarm looks again every ROLLBACK_CHECK_MS.
import {
  currentStep,
  planRollback,
  resumable,
  rollbackState,
  stepAfter,
  type RollbackStep,
  type RollbackView,
  type RunWrite,
} from "../../domain/rollback.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { operationIds, type RunState } from "../../domain/turn/turn.ts";
import { operationStub } from "../stubs.ts";
import { compensate, compensationRow } from "./compensate.ts";
import { castPlanApprovals, clearPlanApprovals, planApprovals } from "./rollback-plan.ts";
import type { RunError, RunParts } from "./contracts.ts";
import type { SqlStore } from "../store/sql-store.ts";

/** How often a waiting compensation is looked at (one RPC per look; a person may take hours). */
export const ROLLBACK_CHECK_MS = 15_000;
/** A compensation just submitted is looked at this soon (one without approval is usually done). */
const ROLLBACK_FIRST_LOOK_MS = 1_000;
/** A submit that was not answered is tried again after this long. */
const ROLLBACK_RETRY_MS = 5_000;

type StepRow = RollbackStep & { seq: number };

export function rollbackOf(parts: RunParts): RollbackView | null {
  const { store } = parts;
  if (!store.exists("rollback")) return null;
  const head = store.one<{ state: RollbackView["state"] }>(
    "SELECT state FROM rollback WHERE k = 1",
  );
  if (!head) return null;
  return {
    state: head.state,
    steps: stepRows(parts).map(({ seq: _seq, ...step }) => ({
      ...step,
      compensation_input_hash: submittedHash(parts, step),
    })),
  };
}

/** The input hash of the step's compensation as its row records it (the generation it names). */
function submittedHash(parts: RunParts, step: RollbackStep): string | null {
  if (!step.compensation_id) return null;
  const row = compensationRow(parts, step.operation_id);
  return row?.compensation_id === step.compensation_id ? row.input_hash : null;
}

function stepRows(parts: RunParts): StepRow[] {
  return parts.store.all<StepRow>(
    "SELECT seq, operation_id, tool, compensation_id, state, detail FROM rollback_steps ORDER BY seq",
  );
}

/**
 * Plans the rollback once (a second cancel with rollback: true finds it and only drives it on):
 * asks each operation the run's turns reference how it stands, then writes this run's own steps
 * in one transaction. `unavailable`: one did not answer, so nothing was planned.
 */
export async function startRollback(
  parts: RunParts,
  run: RunState,
  by: string,
  storage: DurableObjectStorage,
): Promise<Result<true, RunError>> {
  const { tenantId } = run;
  const head = rollbackOf(parts);
  const planned = head ? stepRows(parts) : [];
  const stuck = head ? resumable(planned) : null;
  if (stuck)
    parts.store.transaction(() => {
      parts.store.run(
        "UPDATE rollback_steps SET state = ?, detail = NULL WHERE seq = ?",
        stuck.state,
        planned[stuck.index]!.seq,
      );
      parts.store.run("UPDATE rollback SET state = 'running' WHERE k = 1");
      clearPlanApprovals(parts);
    });
  if (!head) {
    const ids = [...new Set(parts.rows.turns().flatMap(operationIds))];
    const writes = await Promise.all(
      ids.map(async (id): Promise<RunWrite | null | "unanswered"> => {
        const source = await operationStub(parts.env, id)
          .compensationSource(tenantId)
          .catch(() => "unanswered" as const);
        // Not found (its submit never arrived) or pruned: nothing here to undo.
        return source === "unanswered" ? source : source.ok ? source.value : null;
      }),
    );
    // An operation that did not answer may be one of this run's writes: planning without it would
    // report a rollback completed while that write stands. Nothing is planned; asking again plans.
    if (writes.includes("unanswered"))
      return err({
        code: "unavailable",
        detail:
          "the run is cancelled, but its rollback could not be planned (an operation did not answer); cancel with rollback: true again",
      });
    const steps = planRollback(
      run.runId,
      writes.filter((w): w is RunWrite => w !== null && w !== "unanswered"),
    );
    parts.store.transaction(() => {
      parts.store.ensureTable("rollback");
      parts.store.ensureTable("rollback_steps");
      if (parts.store.one("SELECT k FROM rollback WHERE k = 1")) return; // planned meanwhile
      parts.store.run(
        "INSERT INTO rollback (k, state, by, started_at_ms) VALUES (1, ?, ?, ?)",
        rollbackState(steps),
        by,
        Date.now(),
      );
      steps.forEach((step, seq) =>
        parts.store.run(
          "INSERT INTO rollback_steps (seq, operation_id, tool, compensation_id, state, detail) VALUES (?, ?, ?, ?, ?, ?)",
          seq,
          step.operation_id,
          step.tool,
          step.compensation_id,
          step.state,
          step.detail,
        ),
      );
    });
  }
  await advance(parts, tenantId, storage);
  return ok(true);
}

/** The run's alarm, and a plan just approved: drives a running rollback on (a no-op without one). */
export async function rollbackAlarm(parts: RunParts, storage: DurableObjectStorage) {
  const run = parts.rows.load();
  if (run && rollbackOf(parts)?.state === "running") await advance(parts, run.tenantId, storage);
}

/**
 * Works on the current step until one waits: submits its compensation (pending), or looks at it
 * (submitted), records what it became, and goes on only when it is compensated. A waiting or
 * unanswered step arms the alarm to look again; nothing here waits on a person.
 */
async function advance(
  parts: RunParts,
  tenantId: string,
  storage: DurableObjectStorage,
): Promise<void> {
  const run = parts.rows.load()!;
  const by = parts.store.one<{ by: string }>("SELECT by FROM rollback WHERE k = 1")?.by ?? "";
  for (;;) {
    const steps = stepRows(parts);
    const index = currentStep(steps);
    if (index < 0) return finish(parts, steps);
    const step = steps[index]!;
    if (step.state === "pending") {
      const original = await operationStub(parts.env, step.operation_id)
        .compensationSource(tenantId)
        .catch(() => null);
      if (!original) return arm(parts, storage, ROLLBACK_RETRY_MS);
      // It answered that it cannot be read (pruned since the plan): asking every few seconds for
      // ever would keep the rollback "running" with nothing happening; it stops here and says why.
      if (!original.ok) {
        update(
          parts,
          step.seq,
          "failed",
          null,
          `the original could not be read (${original.error.code}); compensate it by hand`,
        );
        return finish(parts, stepRows(parts));
      }
      // A plan written before rollbacks were per run (audit 2026-12-05 N3) may name another run's
      // operation: it is that run's to undo, so it leaves this report and the rollback goes on.
      if (original.value.run_id !== run.runId) {
        parts.store.run("DELETE FROM rollback_steps WHERE seq = ?", step.seq);
        continue;
      }
      const reason = `rollback of run ${run.runId}`;
      const done = await compensate(parts, tenantId, original.value, { reason, by, waitMs: 0 });
      if (!done.ok) {
        if (done.error.code === "unavailable") return arm(parts, storage, ROLLBACK_RETRY_MS);
        update(
          parts,
          step.seq,
          "failed",
          null,
          `the compensation could not be asked for: ${"detail" in done.error ? done.error.detail : done.error.code}`,
        );
        return finish(parts, stepRows(parts));
      }
      update(parts, step.seq, "submitted", done.value.compensation_id, null);
      // Recorded already (a replay after a crash): go on; so does one a plan approval may cover
      // (looked at now, rollback-plan.ts); else look again soon (a fast one is done by then).
      if (done.value.reply?.terminal || planApprovals(parts).length > 0) continue;
      return arm(parts, storage, ROLLBACK_FIRST_LOOK_MS);
    }
    const view = await operationStub(parts.env, step.compensation_id!)
      .get(tenantId, 0)
      .catch(() => null);
    if (!view?.ok) return arm(parts, storage, ROLLBACK_RETRY_MS);
    // Awaiting a person, and a person approved the plan listing its hash: their decision is cast.
    const cast = await castPlanApprovals(parts, tenantId, step.compensation_id!, view.value);
    if (cast.decided) return arm(parts, storage, ROLLBACK_FIRST_LOOK_MS);
    if (cast.refused && cast.refused !== step.detail)
      update(parts, step.seq, step.state, step.compensation_id, cast.refused);
    const result = view.value.result;
    const next = stepAfter({
      phase: view.value.phase,
      status: view.value.phase === "recorded" ? result.status : null,
      code: view.value.phase === "recorded" && "code" in result ? result.code : null,
      message: "message" in result ? result.message : null,
      settling: view.value.settling !== null,
    });
    if (!next) return arm(parts, storage, ROLLBACK_CHECK_MS);
    update(parts, step.seq, next.state, step.compensation_id, next.detail);
  }
}

function update(
  parts: RunParts,
  seq: number,
  state: RollbackStep["state"],
  compensationId: string | null,
  detail: string | null,
): void {
  parts.store.run(
    "UPDATE rollback_steps SET state = ?, compensation_id = ?, detail = ? WHERE seq = ?",
    state,
    compensationId,
    detail,
    seq,
  );
}

function finish(parts: RunParts, steps: readonly RollbackStep[]): void {
  parts.store.run("UPDATE rollback SET state = ? WHERE k = 1", rollbackState(steps));
}

/**
 * Never later than an alarm already set (retention, an event's resend): the earliest wins. The
 * time is kept in the rollback row too, so whoever sets the run's alarm back to retention (an
 * event's sent, events.ts) keeps it (`rollbackDueAtMs`).
 */
async function arm(parts: RunParts, storage: DurableObjectStorage, inMs: number): Promise<void> {
  const atMs = Date.now() + inMs;
  parts.store.run("UPDATE rollback SET next_at_ms = ? WHERE k = 1", atMs);
  const armed = await storage.getAlarm();
  if (armed === null || armed > atMs) await storage.setAlarm(atMs);
}

/** When a running rollback looks again (null: none running): no alarm may be set past it. */
export function rollbackDueAtMs(store: SqlStore): number | null {
  if (!store.exists("rollback")) return null;
  const row = store.one<{ state: string; next_at_ms: number | null }>(
    "SELECT state, next_at_ms FROM rollback WHERE k = 1",
  );
  return row?.state === "running" ? row.next_at_ms : null;
}
