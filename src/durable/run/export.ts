// What the run exports to the model beside its tools: the definitions as plain data (plus
// toolgate_check_status with any write), and its warnings (the definitions themselves stay
// provider-valid): each offered tool whose idempotency key no verification vouches for, and each
// context field an offered tool reads that the run lacks (domain/context-needs.ts).
import { CHECK_STATUS_DEFINITION, offersCheckStatus } from "../../domain/check-status.ts";
import { callFacts, type TenantFacts } from "../../domain/tenant-facts.ts";
import type { RunState } from "../../domain/turn/turn.ts";
import { unverifiedTraceDetail, type VerificationStatus } from "../../domain/verification.ts";
import { requireVerifiedIdempotency } from "../../config.ts";
import type { Env } from "../env.ts";
import type { ToolDefinition, ToolSpec } from "../../tools/spec.ts";
import { verificationStatuses, verificationStatusOf } from "../tenant/verification-client.ts";
import type { IdempotencyWarning, RunWarning } from "./contracts.ts";
import { missingContext } from "../../domain/context-needs.ts";

/** The offered tools as plain data, for exporting definitions to the model (plus toolgate_check_status with any write). */
export function toolDefinitions(offered: readonly ToolSpec[]): ToolDefinition[] {
  const definitions = offered.map((spec) => ({
    name: spec.name,
    description: spec.description,
    inputJsonSchema: spec.inputJsonSchema,
    bound: Object.keys(spec.bind),
    risk: spec.risk,
    builtIn: false,
  }));
  return offersCheckStatus(offered) ? [...definitions, CHECK_STATUS_DEFINITION] : definitions;
}

/**
 * Offered tools whose idempotency key no verification vouches for (for the settings this run
 * snapshotted): the export flags them next to the definitions, which stay provider-valid.
 */
export async function idempotencyWarnings(
  env: Env,
  tenantId: string,
  run: RunState,
  facts: TenantFacts | null,
): Promise<IdempotencyWarning[]> {
  // The run's tenant facts hold every verdict (read with the tools); asked only without them.
  const statuses = facts
    ? await statusesFrom(env, facts, run)
    : await verificationStatuses(env, tenantId, Object.entries(run.tools));
  const enforced = requireVerifiedIdempotency(env);
  return Object.entries(statuses)
    .filter(
      (entry): entry is [string, Exclude<VerificationStatus, "verified">] =>
        entry[1] !== "verified",
    )
    .map(([tool, status]) => ({
      tool,
      code: "idempotency_unverified" as const,
      status,
      enforced,
      detail: unverifiedTraceDetail({ status, enforced }),
    }));
}

/** Everything the run is warned about: unverified idempotency, then missing context. */
export async function runWarnings(
  env: Env,
  tenantId: string,
  run: RunState,
  offered: readonly ToolSpec[],
  facts: TenantFacts | null,
): Promise<RunWarning[]> {
  return [
    ...(await idempotencyWarnings(env, tenantId, run, facts)),
    ...missingContext(offered, run.context),
  ];
}

/** Each offered tool's status from the snapshot (it covers every offered tool: no RPC). */
async function statusesFrom(env: Env, facts: TenantFacts, run: RunState) {
  const statuses: Record<string, VerificationStatus> = {};
  for (const [name, source] of Object.entries(run.tools)) {
    const own = callFacts(facts, name);
    const status = await verificationStatusOf(env, run.tenantId, name, source, own);
    if (status) statuses[name] = status;
  }
  return statuses;
}
