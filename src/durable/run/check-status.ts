// toolgate_check_status answered at admission: a snapshot of the target operation's envelope, kept
// with the turn. Only an operation this run created or joined with the identical input is
// readable (mayReadOperation); anything else reads "not found", and nothing is looked up past the
// run's allowance (RUN_LIMITS.maxStatusChecks).
import {
  checkStatusEnvelope,
  checkStatusId,
  checkStatusSpent,
  checkStatusTarget,
  mayReadOperation,
} from "../../domain/check-status.ts";
import type { Envelope } from "../../domain/envelope.ts";
import { RUN_LIMITS } from "../../domain/run-limits.ts";
import type { ProposedCall } from "../../domain/turn/gate.ts";
import { submittedHashes, type RunState } from "../../domain/turn/turn.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub } from "../stubs.ts";
import { holdsOperation, type RunRows } from "./rows.ts";

/**
 * The current envelope of an operation this run created or joined with the identical input
 * (mayReadOperation); anything else (another run's, reached through a conflicting call, or
 * another tenant's) is "not found". `allowed`: within the run's allowance of checks; else
 * refused, and nothing is looked up.
 */
export async function checkStatus(
  env: Env,
  store: SqlStore,
  rows: RunRows,
  run: RunState,
  call: ProposedCall,
  allowed: boolean,
): Promise<Envelope> {
  const checkId = await checkStatusId(run.tenantId, run.runId, call.id);
  if (!allowed) return checkStatusSpent(checkId, RUN_LIMITS.maxStatusChecks);
  const target = checkStatusTarget(call.arguments);
  // The index answers "not held here" without a scan; only a held operation reads this run's
  // calls of it, at most RUN_LIMITS.maxStatusChecks times per run.
  const hashes =
    target.ok && holdsOperation(store, () => rows.turns(), target.value)
      ? rows.turns().flatMap((turn) => submittedHashes(turn, target.value))
      : [];
  if (!target.ok || hashes.length === 0) return checkStatusEnvelope(checkId, target, null);
  const view = await operationStub(env, target.value)
    .get(run.tenantId, 0)
    .catch(() => null);
  const readable = view?.ok && mayReadOperation(run.runId, view.value, hashes);
  return checkStatusEnvelope(checkId, target, readable ? view.value.result : null);
}
