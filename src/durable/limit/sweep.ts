// The sweep of a LimitObject (issue 21): a reservation is made before its operation's first log
// row, so a crash in between leaves it held with nobody holding it. A while after a reservation,
// the object asks each operation it has not seen holding one (OperationObject.limitHold): held →
// confirmed; released or absent → released. An operation that answers "absent" while its own
// start is in flight re-reserves before it commits (it learns of the answer), and a reserve that
// arrives while the question is out marks the row `touched`, so the sweep then keeps it.
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub } from "../stubs.ts";
import type { Env } from "../env.ts";

/** How long after a reservation its operation must have committed its start (else it is asked). */
export const SWEEP_AFTER_MS = 120_000;

type Pending = { operation_id: string; at_ms: number; touched: number };

/**
 * Returns when to sweep again (null: nothing unconfirmed is left). Never throws. `changed` is told
 * of each row it may have released (the object keeps its rows in memory).
 */
export async function sweepUnconfirmed(
  env: Env,
  store: SqlStore,
  tenantId: string,
  name: string,
  subject: string,
  changed: (operationId: string) => void,
): Promise<number | null> {
  if (!store.exists("reservation")) return null;
  const nowMs = Date.now();
  const due = store.all<Pending>(
    "SELECT operation_id, at_ms, touched FROM reservation WHERE state = 'held' AND confirmed = 0 AND at_ms <= ?",
    nowMs - SWEEP_AFTER_MS,
  );
  let failed = false;
  for (const row of due) {
    let answer: "held" | "released" | "absent";
    try {
      answer = await operationStub(env, row.operation_id).limitHold(tenantId, name, subject);
    } catch (error) {
      console.error("limit sweep could not ask an operation", row.operation_id, String(error));
      failed = true;
      continue;
    }
    if (answer === "held")
      store.run("UPDATE reservation SET confirmed = 1 WHERE operation_id = ?", row.operation_id);
    else {
      store.run(
        "UPDATE reservation SET state = 'released' WHERE operation_id = ? AND state = 'held' AND confirmed = 0 AND touched = ?",
        row.operation_id,
        row.touched,
      );
      changed(row.operation_id);
    }
  }
  const left = store.one<{ at: number | null }>(
    "SELECT MIN(at_ms) AS at FROM reservation WHERE state = 'held' AND confirmed = 0",
  )?.at;
  if (left === null || left === undefined) return failed ? nowMs + SWEEP_AFTER_MS : null;
  return Math.max(left + SWEEP_AFTER_MS, nowMs + (failed ? SWEEP_AFTER_MS : 1_000));
}
