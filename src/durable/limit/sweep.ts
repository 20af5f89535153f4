// The sweep of a LimitObject (issue 21): it asks each operation whose reservation is not yet known
// recorded how it stands (OperationObject.limitHold), when due (domain/limit/window.ts firstAskAtMs,
// askAgainAtMs). Recorded (having applied) → the row learns when, and counts one window from then
// (audit N5); not recorded yet → asked again later, counting meanwhile; released → released; absent
// → it never started (a crash between reserve and its start's commit): released. An operation that
// answers "absent" while its own start is in flight re-reserves before it commits (it learns of the
// answer), and a reserve that arrives while the question is out marks the row `touched`, so the
// sweep then keeps it. No operation is asked on a call's path: one ask per reservation, here.
import { askAgainAtMs } from "../../domain/limit/window.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub } from "../stubs.ts";
import type { Env } from "../env.ts";

type Due = { operation_id: string; touched: number; confirmed: number };
type Meta = { tenant_id: string; name: string; subject: string; window_ms: number };

/** A question that failed is asked again this much later. */
const RETRY_ASK_MS = 60_000;

/**
 * Returns when to sweep again (null: every held row's operation is known recorded). Never throws.
 * `changed` is told of each row it wrote (the object keeps its rows in memory).
 */
export async function sweep(
  env: Env,
  store: SqlStore,
  meta: Meta,
  changed: (operationId: string) => void,
): Promise<number | null> {
  if (!store.exists("reservation")) return null;
  const nowMs = Date.now();
  const due = store.all<Due>(
    "SELECT operation_id, touched, confirmed FROM reservation WHERE state = 'held' AND recorded_at_ms IS NULL AND ask_at_ms <= ?",
    nowMs,
  );
  for (const row of due) {
    const id = row.operation_id;
    try {
      const answer = await operationStub(env, id).limitHold(
        meta.tenant_id,
        meta.name,
        meta.subject,
      );
      if (answer.kind === "held" && answer.recordedAtMs !== null)
        store.run(
          "UPDATE reservation SET confirmed = 1, recorded_at_ms = ? WHERE operation_id = ? AND state = 'held'",
          answer.recordedAtMs,
          id,
        );
      else if (answer.kind === "held")
        store.run(
          "UPDATE reservation SET confirmed = 1, ask_at_ms = ? WHERE operation_id = ?",
          askAgainAtMs(nowMs, meta.window_ms),
          id,
        );
      else if (answer.kind === "absent" && row.confirmed === 1)
        // Seen holding it before, gone now: it cannot be unsaid that it may have applied; count
        // one window from now (operations are only ever removed with a tombstone, so this is a guard).
        store.run(
          "UPDATE reservation SET recorded_at_ms = ? WHERE operation_id = ? AND state = 'held'",
          nowMs,
          id,
        );
      else
        store.run(
          "UPDATE reservation SET state = 'released' WHERE operation_id = ? AND state = 'held' AND touched = ?",
          id,
          row.touched,
        );
    } catch (error) {
      console.error("limit sweep could not ask an operation", id, String(error));
      store.run(
        "UPDATE reservation SET ask_at_ms = ? WHERE operation_id = ?",
        nowMs + RETRY_ASK_MS,
        id,
      );
    }
    changed(id);
  }
  const next = store.one<{ at: number | null }>(
    "SELECT MIN(ask_at_ms) AS at FROM reservation WHERE state = 'held' AND recorded_at_ms IS NULL",
  )?.at;
  return next === null || next === undefined ? null : Math.max(next, Date.now() + 1_000);
}
