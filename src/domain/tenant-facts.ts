// Tenant facts (issue 19): what a run's operations need from their tenant, as ONE versioned
// snapshot the run holds, so no call waits on the tenant's one object (which lives wherever the
// tenant was created). Read with the tool sources when the run is created or patched, refreshed in
// the background, and never trusted past FACTS_MAX_AGE_MS. Secrets stay sealed (AES-GCM, still
// encrypted) in it: only the operation that sends opens them. A new kind of fact (e.g. a policy
// set) is a new field here, read in the same one RPC, under the same bound. Pure.
import type { Freeze } from "./freeze.ts";
import type { Tripwire } from "./tripwire.ts";
import type { Grant } from "./grant.ts";
import type { PolicySet } from "./policy-request.ts";
import type { StoredQuota } from "./quota/definition.ts";
import type { VerificationStatus } from "./verification.ts";

/** A tenant secret as stored: encrypted under the tenant's key, bound to (tenant, name). */
export type SealedSecret = { iv: string; ciphertext: string };

/** The facts about one offered tool: the secret names it uses and its idempotency verdict. */
export type ToolFacts = {
  secrets: string[];
  /** null: the tool has no verdict to ask for (a read, a code tool, mode "natural" or "none"). */
  verification: { settingsHash: string; status: VerificationStatus } | null;
};

export type TenantFacts = {
  /** The shape's version: a reader meeting another one treats the snapshot as absent. */
  schema: typeof FACTS_SCHEMA;
  /** A content hash over everything below but `readAtMs`: equal versions, equal facts. */
  version: string;
  /** When the tenant answered (its clock): the age every bound is measured from. */
  readAtMs: number;
  /** Sealed values of every secret the tools name; null: not defined (deleted). */
  secrets: Record<string, SealedSecret | null>;
  /** By offered tool name. */
  tools: Record<string, ToolFacts>;
  /** The tenant's Cedar policy set (issue 21); null: none (today's behaviour). */
  policies: PolicySet | null;
  /** Quota shaping (issue 34 item 4): the tenant's quotas, and the origins its upstreams paused (until ms). */
  quotas: StoredQuota[];
  pausedOrigins: Record<string, number>;
  /** The tenant's freezes not lifted when it answered (issue 34); [] when none (no cost then). */
  freezes: Freeze[];
  /** The tenant's tripwires (issue 34); [] when none: a call claims nothing more then. */
  tripwires: Tripwire[];
  /** The tenant's live standing grants (issue 35); [] when none: a call asks nothing more then. */
  grants: Grant[];
};

/**
 * 2: the policy set joined the facts; 3/4: quotas and paused origins, or freezes and tripwires
 * (two branches); 5: all four; 6: standing grants (a snapshot of an older shape is never used).
 */
export const FACTS_SCHEMA = 6;

/** What one call's operation gets: its tool's facts only (least privilege), still sealed. */
export type CallFacts = {
  version: string;
  readAtMs: number;
  secrets: Record<string, SealedSecret | null>;
  verification: ToolFacts["verification"];
  policies: PolicySet | null;
  quotas: StoredQuota[];
  pausedOrigins: Record<string, number>;
  freezes: Freeze[];
  tripwires: Tripwire[];
  grants: Grant[];
};

/**
 * The staleness bound: a snapshot older than this is never used (the operation asks the tenant
 * itself, as before), and a rotated secret or a changed verdict reaches an existing run within it.
 */
export const FACTS_MAX_AGE_MS = 30_000;
/** From this age on, each call starts a background refresh (never awaited), so a busy run never reaches the bound. */
export const FACTS_REFRESH_AFTER_MS = 10_000;

/** fresh: use it; refresh: use it and refresh in the background; stale: do not use it (and refresh). */
export function freshness(
  facts: Pick<TenantFacts, "readAtMs" | "schema">,
  nowMs: number,
): "fresh" | "refresh" | "stale" {
  const ageMs = nowMs - facts.readAtMs;
  if (facts.schema !== FACTS_SCHEMA || ageMs > FACTS_MAX_AGE_MS) return "stale";
  return ageMs > FACTS_REFRESH_AFTER_MS ? "refresh" : "fresh";
}

/** The part of `facts` the call to `tool` may see; null when the snapshot does not cover the tool. */
export function callFacts(facts: TenantFacts, tool: string): CallFacts | null {
  const own = facts.tools[tool];
  if (!own) return null;
  const secrets: Record<string, SealedSecret | null> = {};
  for (const name of own.secrets) secrets[name] = facts.secrets[name] ?? null;
  return {
    version: facts.version,
    readAtMs: facts.readAtMs,
    secrets,
    verification: own.verification,
    policies: facts.policies,
    quotas: facts.quotas,
    pausedOrigins: facts.pausedOrigins,
    freezes: facts.freezes,
    tripwires: facts.tripwires,
    grants: facts.grants,
  };
}
