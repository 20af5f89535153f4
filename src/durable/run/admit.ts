// Admitting a turn (POST …/turns): gather what the gate and planTurn need (the tenant's known
// names, toolgate_check_status snapshots, peeks of operations a refusal would name), plan, and
// commit the turn row, its usage and its sources in one transactionSync; only then dispatch (settle).
// The commit happens before any operation is sent: the output gate holds the RPCs until it lands.
import { keySecretOf } from "../../crypto.ts";
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { CHECK_STATUS, offersCheckStatus } from "../../domain/check-status.ts";
import type { ModelUsage } from "../../domain/pricing.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { admitStored, countStored, RUN_LIMITS, stoppedTurn } from "../../domain/run-limits.ts";
import {
  admitToGroup,
  freezeTurn,
  gateTurn,
  planTurn,
  unofferedNames,
} from "../../domain/turn/admit.ts";
import type { ProposedCall } from "../../domain/turn/gate.ts";
import { sameGateInputs, turnIdentity, type TurnRecord } from "../../domain/turn/turn.ts";
import type { Env } from "../env.ts";
import { MAX_CALLS_PER_TURN } from "../../providers/types.ts";
import { encodeTurnCalls, TURN_GROUP_CALLS_COLUMN } from "../store/run-rows.ts";
import { operationStub, tenantStub } from "../stubs.ts";
import { checkStatus } from "./check-status.ts";
import type { Wait } from "../../domain/wait.ts";
import type { RunError, TurnReply, RunParts } from "./contracts.ts";
import { dispatchedSources } from "./sources.ts";
import { migrateStored, storedCounts } from "./rows.ts";
import { compileTools } from "../../tools/catalog.ts";
import { hostPolicy } from "../../config.ts";

export async function postTurn(
  parts: RunParts,
  tenantId: string,
  calls: ProposedCall[],
  modelCost: number,
  wait: Wait,
  group: { key: string; usage: ModelUsage | null } | null = null,
  format = "native",
): Promise<Result<TurnReply, RunError>> {
  const { env, store, rows, sources, settler, events } = parts;
  const identity = await turnIdentity(calls);
  // Upstream idempotency keys derive from the signing key: without one, no call is admitted.
  const secret = await keySecretOf(env);
  if (!secret.ok) return secret;
  const keySecret = secret.value;
  const usageHash = group?.usage ? await sha256Hex(canonicalJson(group.usage)) : null;
  // What the operations of calls a budget or a cancel refuses said (peek, read-only): planTurn's `peeked`.
  const peeked = new Map<string, string | null>();
  // Each pass admits against one snapshot of the run; it repeats only if the run's tools or
  // scopes changed while it hashed (or asked the tenant), because the gate must see the newest.
  for (;;) {
    const run = rows.loadFor(tenantId);
    if (!run) return rows.missing(tenantId);
    const existing = rows.turn(identity.id);
    if (existing) {
      if (existing.contentHash !== identity.contentHash)
        return err({
          code: "turn_conflict",
          detail: `turn ${identity.id} was posted with the same call ids and other calls; use new call ids for a new turn`,
        });
      return ok(await settler.settle(existing, wait, 0, format));
    }
    const offered = compileTools(run.tools, hostPolicy(parts.env));
    const checks = offersCheckStatus(offered.values())
      ? calls.map((call) => call.name === CHECK_STATUS)
      : calls.map(() => false);
    const verdicts = gateTurn(run, offered, calls);
    const frozen = await freezeTurn(
      run,
      verdicts,
      await registered(
        env,
        run.tenantId,
        unofferedNames(verdicts).filter((name) => name !== CHECK_STATUS || !checks.includes(true)),
      ),
      keySecret,
    );
    // toolgate_check_status is answered here, at admission: a snapshot of the target, kept with the turn.
    // Up to the run's allowance (`looked`, counted with the turn; a post that raced past it goes again).
    const allowance = RUN_LIMITS.maxStatusChecks - storedCounts(store).checks;
    const looked = Math.max(0, Math.min(checks.filter(Boolean).length, allowance));
    let checkIndex = 0;
    for (const [index, call] of calls.entries())
      if (checks[index])
        frozen[index] = {
          call: { id: call.id, name: call.name },
          fixed: await checkStatus(env, store, rows, run, call, checkIndex++ < looked),
        };
    await sources.hash(dispatchedSources(frozen));
    const rowsBefore = store.rowsWritten;
    let exhausted = false;
    const plan = store.transaction(() => {
      const now = rows.loadFor(tenantId)!;
      if (rows.turn(identity.id) || !sameGateInputs(run, now)) return null;
      const counts = migrateStored(store);
      if (counts.checks + looked > RUN_LIMITS.maxStatusChecks) return null;
      let grouping = null;
      if (group) {
        store.ensureSchema(); // a run created before turn groups existed lacks the table
        store.ensureColumn("turn_groups", TURN_GROUP_CALLS_COLUMN);
        const existing = rows.group(group.key);
        const admission = admitToGroup(existing, usageHash, calls.length, MAX_CALLS_PER_TURN);
        if (!admission.ok) return admission;
        grouping = { key: group.key, existing, usageHash, admission: admission.value };
      }
      const plan = planTurn(
        now,
        rows.usage(),
        identity,
        frozen,
        modelCost,
        Date.now(),
        grouping,
        settler.knownRecorded(frozen),
        peeked,
      );
      // Refused calls whose operations were not asked yet: nothing is written; ask, then admit again.
      if (plan.unpeeked.length > 0) return { peek: plan.unpeeked };
      const { record } = plan;
      const storedCalls = encodeTurnCalls(record.calls, sources.hashOf);
      const bytes = new TextEncoder().encode(storedCalls).byteLength;
      const stopped = stoppedTurn(record, plan.runStopped);
      const full = admitStored(counts, bytes, stopped);
      if (full) return err(full);
      sources.store(dispatchedSources(record.calls));
      rows.writeTurn(plan, storedCalls, countStored(counts, bytes, stopped, looked));
      // run.budget_exhausted, the first time a budget refuses a call in this run (issue 18).
      const refused = record.calls.find(
        (call) => "fixed" in call && call.fixed.status === "budget_exhausted",
      );
      if (refused && "fixed" in refused && refused.fixed.status === "budget_exhausted")
        exhausted = events.write(
          now,
          {
            type: "run.budget_exhausted",
            seq: 0,
            operationId: refused.fixed.operation_id,
            tool: refused.call.name,
            data: { turn_id: record.id, call_id: refused.call.id, code: refused.fixed.code },
          },
          record.createdAtMs,
        );
      return ok(plan);
    });
    if (plan && "peek" in plan) {
      await peekInto(env, run.tenantId, plan.peek, peeked);
      continue;
    }
    if (plan && !plan.ok) return plan;
    if (plan) {
      if (exhausted) events.afterCommit(Date.now());
      logRefusals(run.runId, plan.value.record);
      return ok(
        await settler.settle(plan.value.record, wait, store.rowsWritten - rowsBefore, format),
      );
    }
  }
}

/**
 * Peek before refusal: a call a budget or a cancel would refuse may be a replay of an operation
 * that already exists with this very input (planTurn's `peeked`). Asks each operation how it
 * stands, read-only (a peek never creates one): its input hash, or null (none, or unreachable:
 * the call is refused).
 */
async function peekInto(
  env: Env,
  tenantId: string,
  ids: readonly string[],
  into: Map<string, string | null>,
): Promise<void> {
  const seen = await Promise.all(
    ids.map(async (id) => {
      const peek = await operationStub(env, id)
        .peek(tenantId)
        .catch(() => null);
      const hash = peek?.ok
        ? peek.value.input_hash
        : peek?.error.code === "pruned"
          ? peek.error.input_hash
          : null;
      return [id, hash] as const;
    }),
  );
  for (const [id, hash] of seen) into.set(id, hash);
}

/** Which of `names` the tenant knows; asked only for names the run does not offer (an unreachable tenant keeps tool_not_allowed). */
async function registered(env: Env, tenantId: string, names: string[]): Promise<Set<string>> {
  return new Set(
    names.length === 0
      ? []
      : await tenantStub(env, tenantId)
          .knownTools(names)
          .catch(() => names),
  );
}

/** The gate's and the budgets' decisions (calls refused before any operation): one JSON log line each. */
function logRefusals(runId: string, record: TurnRecord): void {
  for (const stored of record.calls)
    if ("fixed" in stored && stored.fixed.status !== "succeeded")
      console.log(
        JSON.stringify({
          level: "info",
          event: "toolgate.refused",
          at: record.createdAtMs,
          run_id: runId,
          call_id: stored.call.id,
          operation_id: stored.fixed.operation_id,
          tool: stored.call.name,
          turn_id: record.id,
          status: stored.fixed.status,
          code: stored.fixed.code,
        }),
      );
}
