// The callers' side of a tenant's verification verdicts, run in other objects (an operation's
// start, a run's tool export) and in the tenant's facts: which settings of a tool are verifiable,
// and its status asked from the TenantObject. Only manifest writes with mode "header" have a
// verdict (code tools are the deployment's own, reviewed with it); a manifest write with mode
// "natural" promises safe repeats that verify cannot check, so it is always "unverified". A tenant
// that cannot be asked counts as "unverified": under the policy that fails closed.
import type { StartFacts } from "./facts.ts";
import type { PolicySet } from "../../domain/policy-request.ts";
import type { VerificationStatus } from "../../domain/verification.ts";
import type { CallFacts } from "../../domain/tenant-facts.ts";
import { LruCache } from "../../lru.ts";
import { Manifest } from "../../tools/manifest/schema.ts";
import type { ToolSource } from "../../tools/spec.ts";
import { verificationSettingsHash } from "../../tools/verify.ts";
import type { Env } from "../env.ts";
import { tenantStub } from "../stubs.ts";

/** The callers' side (an operation's create, a run's tool export): each offered tool's status, asked once. */
export async function verificationStatuses(
  env: Env,
  tenantId: string,
  tools: ReadonlyArray<[name: string, source: ToolSource]>,
): Promise<Record<string, VerificationStatus>> {
  const items: Array<{ name: string; settingsHash: string }> = [];
  const unverifiable: Record<string, VerificationStatus> = {};
  for (const [name, source] of tools) {
    if (source.kind !== "manifest") continue;
    const settings = await verifiableSettings(source.manifest);
    if (settings === NATURAL) unverifiable[name] = "unverified";
    else if (settings) items.push({ name, settingsHash: settings });
  }
  if (items.length === 0) return unverifiable;
  try {
    return { ...(await tenantStub(env, tenantId).verificationStatuses(items)), ...unverifiable };
  } catch (error) {
    console.error("verification statuses unavailable", tenantId, String(error));
    return {
      ...Object.fromEntries(items.map(({ name }) => [name, "unverified" as const])),
      ...unverifiable,
    };
  }
}

/**
 * A new operation's tenant facts in one read (issue 21): its tool's verification status and the
 * tenant's Cedar policy set. Asked at every start (a changed set applies to the next call); for a
 * header-keyed write it is the read verificationStatuses made anyway. Throws if the tenant cannot
 * be asked: the start then answers `unavailable` (a policy set is never skipped for being unread).
 */
export async function startFacts(
  env: Env,
  tenantId: string,
  name: string,
  source: ToolSource,
): Promise<{ verified: VerificationStatus | null } & Omit<StartFacts, "statuses">> {
  const settings = source.kind === "manifest" ? await verifiableSettings(source.manifest) : null;
  const items = settings && settings !== NATURAL ? [{ name, settingsHash: settings }] : [];
  const facts = await tenantStub(env, tenantId).startFacts(items);
  const verified = settings === NATURAL ? "unverified" : (facts.statuses[name] ?? null);
  const { policies, quotas, pausedOrigins, freezes, tripwires, grants } = facts;
  return { verified, policies, quotas, pausedOrigins, freezes, tripwires, grants };
}

/** A write with mode "natural": nothing to verify, nothing verified. */
export const NATURAL = "natural";

/** Per isolate, by the manifest's text: the settings hash of a verifiable tool, NATURAL, or null for any other. */
const settingsHashes = new LruCache<string, { hash: string | null; keyBytes: number }>(
  { maxEntries: 512, maxBytes: 8 << 20 },
  (entry) => entry.keyBytes + 100,
);

/** A new operation asked this with two zod parses and a hash each time; a manifest never changes. */
export async function verifiableSettings(manifest: unknown): Promise<string | null> {
  const key = JSON.stringify(manifest);
  const cached = settingsHashes.get(key);
  if (cached) return cached.hash;
  const parsed = Manifest.safeParse(manifest);
  const write = parsed.success && parsed.data.risk !== "read" ? parsed.data : null;
  const hash =
    write?.idempotency.mode === "header"
      ? await verificationSettingsHash(manifest)
      : write?.idempotency.mode === "natural"
        ? NATURAL
        : null;
  settingsHashes.set(key, { hash, keyBytes: key.length });
  return hash;
}

/**
 * One tool's status for a new operation: from the run's tenant facts when they hold a verdict for
 * this very source's settings (no RPC), else asked as before (a snapshot that is stale or absent).
 */
export async function verificationStatusOf(
  env: Env,
  tenantId: string,
  name: string,
  source: ToolSource,
  facts: CallFacts | null,
): Promise<VerificationStatus | null> {
  if (facts && source.kind === "code") return null;
  if (facts && source.kind === "manifest") {
    const settings = await verifiableSettings(source.manifest);
    if (settings === null) return null;
    if (settings === NATURAL) return "unverified";
    if (facts.verification?.settingsHash === settings) return facts.verification.status;
  }
  return (await verificationStatuses(env, tenantId, [[name, source]]))[name] ?? null;
}
