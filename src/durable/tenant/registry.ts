// A tenant's tool registry: manifests by name (a re-PUT bumps the version) and the verification
// verdict for exactly the settings that were checked. Code tools from the catalog are offered by
// name unless a manifest of the same name overrides them. `verificationStatuses` is the callers'
// side (operations and runs ask it): only manifest writes with mode "header" have a verdict (code
// tools are the deployment's own, reviewed with it); a manifest write with mode "natural" promises
// safe repeats that verify cannot check, so it is always "unverified". A tenant that cannot be
// asked counts as "unverified": under the policy that fails closed.
import type { PolicySet } from "../../policies/evaluate.ts";
import { hostPolicy } from "../../config.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import {
  countedStatus,
  verificationFor,
  type Verification,
  type VerificationStatus,
} from "../../domain/verification.ts";
import type { CallFacts } from "../../domain/tenant-facts.ts";
import { LruCache } from "../../lru.ts";
import { CODE_TOOLS } from "../../tools/code-tools.ts";
import { compileManifest } from "../../tools/manifest/compile.ts";
import { checkCompensationTarget } from "../../tools/manifest/compensate.ts";
import { Manifest } from "../../tools/manifest/schema.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import { verificationSettingsHash } from "../../tools/verify.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { ToolRow } from "../store/tenant-rows.ts";
import { tenantStub } from "../stubs.ts";
import type { TenantError } from "./object.ts";
import { secretRow } from "./secrets.ts";

/** `verification`: the stored verdict when it holds for the tool's current settings, else unverified. */
export type ToolRecord = {
  name: string;
  manifest: unknown;
  version: number;
  updated_at: string;
  verification: Verification;
};

export async function putTool(
  store: SqlStore,
  env: Env,
  name: string,
  manifest: unknown,
): Promise<Result<ToolRecord & { created: boolean }, TenantError>> {
  const compiled = compileManifest(manifest, hostPolicy(env));
  if (!compiled.ok) return compiled;
  if (compiled.value.name !== name)
    return err({
      code: "invalid_manifest",
      detail: `manifest name "${compiled.value.name}" does not match the URL's "${name}"`,
    });
  // Only this tenant's own secrets resolve; deployment bindings never do.
  const unknown = compiled.value.secretNames.filter((secret) => !secretRow(store, secret));
  if (unknown.length > 0)
    return err({
      code: "unknown_secret",
      detail: `no secret named ${unknown.join(", ")} in this tenant; register it first with PUT /v1/secrets/{name}`,
    });
  const compensation = compensationTarget(store, env, compiled.value.compensate);
  if (!compensation.ok) return compensation;
  const settingsHash = (await verificationSettingsHash(manifest))!;
  store.ensureSchema();
  const previous = store.one<{ version: number }>("SELECT version FROM tools WHERE name = ?", name);
  const version = (previous?.version ?? 0) + 1;
  const now = Date.now();
  store.run(
    "INSERT OR REPLACE INTO tools (name, manifest, version, updated_at) VALUES (?, ?, ?, ?)",
    name,
    JSON.stringify(manifest),
    version,
    now,
  );
  // New request or idempotency settings: the old verdict says nothing about them.
  store.run("DELETE FROM verifications WHERE name = ? AND settings_hash != ?", name, settingsHash);
  return ok({
    name,
    manifest,
    version,
    updated_at: new Date(now).toISOString(),
    verification: verificationFor(verificationRow(store, name), settingsHash),
    created: previous === null,
  });
}

/**
 * A `compensate` names a write tool registered before this one (PUT refund_charge, then
 * charge_card): checked against it as it stands now (and again, at compensation time, against the
 * tool as it stands then).
 */
function compensationTarget(
  store: SqlStore,
  env: Env,
  compensation: ToolSpec["compensate"],
): Result<true, TenantError> {
  if (!compensation) return ok(true);
  const row = toolRow(store, compensation.tool);
  const target = row
    ? compileManifest(JSON.parse(row.manifest), hostPolicy(env))
    : CODE_TOOLS[compensation.tool]
      ? ok(CODE_TOOLS[compensation.tool]!)
      : null;
  if (!target)
    return err({
      code: "invalid_compensation",
      detail: `compensate: no tool named ${compensation.tool} in this tenant; register it first (PUT /v1/tools/${compensation.tool}), then this tool`,
    });
  if (!target.ok)
    return err({
      code: "invalid_compensation",
      detail: `compensate: ${compensation.tool} no longer compiles (${target.error.detail})`,
    });
  return checkCompensationTarget(compensation, target.value);
}

export async function getTool(
  store: SqlStore,
  name: string,
): Promise<Result<ToolRecord, TenantError>> {
  const row = toolRow(store, name);
  return row
    ? ok(await toRecord(store, row))
    : err({ code: "not_found", detail: `no tool named ${name}` });
}

/** The list shows each verdict without its evidence (GET /v1/tools/{name} has the exchanges). */
export async function listTools(store: SqlStore): Promise<ToolRecord[]> {
  const rows = store.exists("tools") ? store.all<ToolRow>("SELECT * FROM tools ORDER BY name") : [];
  const records = await Promise.all(rows.map((row) => toRecord(store, row)));
  return records.map((record) => ({
    ...record,
    verification: {
      ...record.verification,
      checks: record.verification.checks.map((check) => ({ ...check, exchanges: [] })),
    },
  }));
}

export async function deleteTool(
  store: SqlStore,
  name: string,
): Promise<Result<true, TenantError>> {
  if (!(await getTool(store, name)).ok)
    return err({ code: "not_found", detail: `no tool named ${name}` });
  store.run("DELETE FROM tools WHERE name = ?", name);
  store.run("DELETE FROM verifications WHERE name = ?", name);
  return ok(true);
}

/**
 * Stores a verdict only if the tool still has the settings it was checked with: a verification
 * that finishes after a re-PUT (or a delete) must not vouch for the new version.
 */
export async function recordVerification(
  store: SqlStore,
  name: string,
  verification: Verification,
): Promise<Result<Verification, TenantError>> {
  for (;;) {
    const row = toolRow(store, name);
    const current = row ? await verificationSettingsHash(JSON.parse(row.manifest)) : null;
    const now = toolRow(store, name);
    // The hash was awaited: if the tool changed meanwhile, judge the newer version.
    if (now?.version !== row?.version) continue;
    if (current === null || current !== verification.settings_hash)
      return err({
        code: "tool_changed",
        detail: `the tool ${name} was ${row ? "replaced with other request or idempotency settings" : "deleted"} while it was being verified; the verdict was not stored, verify again`,
      });
    store.ensureSchema();
    store.run(
      "INSERT OR REPLACE INTO verifications (name, settings_hash, data) VALUES (?, ?, ?)",
      name,
      current,
      JSON.stringify(verification),
    );
    return ok(verification);
  }
}

/** Asked when an operation is created and when a run exports its tools: the verdict for exactly these settings. */
export async function storedStatuses(
  store: SqlStore,
  items: Array<{ name: string; settingsHash: string }>,
): Promise<Record<string, VerificationStatus>> {
  return Object.fromEntries(
    items.map(({ name, settingsHash }) => [
      name,
      countedStatus(verificationFor(verificationRow(store, name), settingsHash)),
    ]),
  );
}
/** Snapshots the named tools for a run; every name must resolve. */
export async function sources(
  store: SqlStore,
  names: string[],
): Promise<Result<Record<string, ToolSource>, TenantError>> {
  const sources: Record<string, ToolSource> = {};
  for (const name of names) {
    const record = await getTool(store, name);
    if (record.ok) sources[name] = { kind: "manifest", manifest: record.value.manifest };
    else if (CODE_TOOLS[name]) sources[name] = { kind: "code", name };
    else return err({ code: "not_found", detail: `no tool named ${name}` });
  }
  return ok(sources);
}

/** Which of `names` this tenant knows at all (a registered manifest or a code tool). Read-only. */
export async function knownTools(store: SqlStore, names: string[]): Promise<string[]> {
  const manifests = store.exists("tools")
    ? names.filter((name) => store.one("SELECT name FROM tools WHERE name = ?", name) !== null)
    : [];
  return names.filter((name) => manifests.includes(name) || CODE_TOOLS[name] !== undefined);
}

function toolRow(store: SqlStore, name: string): ToolRow | null {
  return store.exists("tools")
    ? store.one<ToolRow>("SELECT * FROM tools WHERE name = ?", name)
    : null;
}

export function verificationRow(store: SqlStore, name: string): Verification | null {
  const row = store.exists("verifications")
    ? store.one<{ data: string }>("SELECT data FROM verifications WHERE name = ?", name)
    : null;
  return row ? (JSON.parse(row.data) as Verification) : null;
}

async function toRecord(store: SqlStore, row: ToolRow): Promise<ToolRecord> {
  const manifest = JSON.parse(row.manifest) as unknown;
  return {
    name: row.name,
    manifest,
    version: row.version,
    updated_at: new Date(row.updated_at).toISOString(),
    verification: verificationFor(
      verificationRow(store, row.name),
      await verificationSettingsHash(manifest),
    ),
  };
}

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
): Promise<{ verified: VerificationStatus | null; policies: PolicySet | null }> {
  const settings = source.kind === "manifest" ? await verifiableSettings(source.manifest) : null;
  const items = settings && settings !== NATURAL ? [{ name, settingsHash: settings }] : [];
  const facts = await tenantStub(env, tenantId).startFacts(items);
  const verified = settings === NATURAL ? "unverified" : (facts.statuses[name] ?? null);
  return { verified, policies: facts.policies };
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
