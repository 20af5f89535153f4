// The tenant's side of tenant facts (domain/tenant-facts.ts): one snapshot for a run's tools, read
// in one go from this object's own rows. Secrets leave sealed, exactly as stored; verdicts are the
// stored ones for the settings each tool source carries. The version is a content hash, so a
// refresh that finds nothing changed answers "unchanged" and the run rewrites nothing. Also the
// bodies of TenantObject.runTools (a run's tools with their facts) and startFacts (an operation's).
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { ok, type Result } from "../../domain/result.ts";
import {
  verificationStatus,
  verificationFor,
  type VerificationStatus,
} from "../../domain/verification.ts";
import {
  FACTS_SCHEMA,
  type SealedSecret,
  type TenantFacts,
  type ToolFacts,
} from "../../domain/tenant-facts.ts";
import { hostPolicy } from "../../config.ts";
import { compileTool } from "../../tools/catalog.ts";
import type { ToolSource } from "../../tools/spec.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantRecord } from "../store/tenant-rows.ts";
import type { PolicySet } from "../../domain/policy-request.ts";
import type { TenantError } from "./contracts.ts";
import { sources, storedStatuses, verificationRow } from "./registry.ts";
import { NATURAL, verifiableSettings } from "./verification-client.ts";
import { policySetOf } from "./policies.ts";
import { quotaFacts } from "./quotas.ts";
import type { StoredQuota } from "../../domain/quota/definition.ts";
import { secretRow } from "./secrets.ts";
import { liveFreezes } from "./freezes.ts";
import type { Freeze } from "../../domain/freeze.ts";
import type { Tripwire } from "../../domain/tripwire.ts";
import { liveTripwires } from "./tripwires.ts";
import { liveGrants } from "./grants.ts";
import type { Grant } from "../../domain/grant.ts";

/** `unchanged`: the facts still have version `known` (only `readAtMs` moved on). */
export type FactsAnswer = { unchanged: true; readAtMs: number } | TenantFacts;

export async function readFacts(
  store: SqlStore,
  env: Env,
  tenantId: string,
  tools: Record<string, ToolSource>,
  known: string | null = null,
): Promise<FactsAnswer> {
  const own = tenantRecord(store)?.id === tenantId;
  const secrets: Record<string, SealedSecret | null> = {};
  const byTool: Record<string, ToolFacts> = {};
  for (const [name, source] of Object.entries(tools)) {
    const spec = compileTool(source, hostPolicy(env));
    const names = spec.ok ? spec.value.secretNames : [];
    for (const secret of names) {
      const row = own ? secretRow(store, secret) : null;
      secrets[secret] = row ? { iv: row.iv, ciphertext: row.ciphertext } : null;
    }
    const settings = source.kind === "manifest" ? await verifiableSettings(source.manifest) : null;
    byTool[name] = {
      secrets: names,
      verification:
        settings === null || settings === NATURAL
          ? null
          : {
              settingsHash: settings,
              status: verificationStatus(verificationFor(verificationRow(store, name), settings)),
            },
    };
  }
  const policies = own ? policySetOf(store) : null;
  const readAtMs = Date.now();
  const shaping = own ? quotaFacts(store, readAtMs) : { quotas: [], pausedOrigins: {} };
  const freezes = own ? liveFreezes(store, readAtMs) : [];
  const tripwires = own ? liveTripwires(store) : [];
  const grants = own ? liveGrants(store, readAtMs) : [];
  const version = await sha256Hex(
    canonicalJson({ secrets, tools: byTool, policies, freezes, tripwires, grants, ...shaping }),
  );
  if (version === known) return { unchanged: true, readAtMs };
  return {
    schema: FACTS_SCHEMA,
    version,
    readAtMs,
    secrets,
    tools: byTool,
    policies,
    freezes,
    tripwires,
    grants,
    ...shaping,
  };
}

/** A run's tools and the tenant facts its operations use (TenantObject.runTools). */
export type RunTools = { sources: Record<string, ToolSource>; facts: TenantFacts };

/** Issue 19: read once at the run's create or PATCH, not per call; every name must resolve. */
export async function runTools(
  store: SqlStore,
  env: Env,
  tenantId: string,
  names: string[],
): Promise<Result<RunTools, TenantError>> {
  const found = await sources(store, names);
  if (!found.ok) return found;
  const facts = (await readFacts(store, env, tenantId, found.value)) as TenantFacts;
  return ok({ sources: found.value, facts });
}

/** A new operation's tenant facts, one read: the tools' verdicts and the Cedar policy set (issue 21). */
export type StartFacts = {
  statuses: Record<string, VerificationStatus>;
  policies: PolicySet | null;
  quotas: StoredQuota[];
  pausedOrigins: Record<string, number>;
  /** The freezes of the moment (issue 34). */
  freezes: Freeze[];
  /** The tripwires (issue 34). */
  tripwires: Tripwire[];
  /** The live standing grants (issue 35). */
  grants: Grant[];
};

export async function startFacts(
  store: SqlStore,
  items: Array<{ name: string; settingsHash: string }>,
): Promise<StartFacts> {
  const statuses = items.length > 0 ? await storedStatuses(store, items) : {};
  const nowMs = Date.now();
  return {
    statuses,
    policies: policySetOf(store),
    freezes: liveFreezes(store, nowMs),
    tripwires: liveTripwires(store),
    grants: liveGrants(store, nowMs),
    ...quotaFacts(store, nowMs),
  };
}
