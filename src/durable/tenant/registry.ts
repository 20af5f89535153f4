// A tenant's tool registry: manifests by name (a re-PUT bumps the version) and the verification
// verdict for exactly the settings that were checked. Code tools from the catalog are offered by
// name unless a manifest of the same name overrides them. A change is checked against the tenant's
// Cedar policy set first (policies.ts policiesAfter: refused, or forced and the set marked invalid).
// The callers' side (operations and runs asking for verdicts, which settings are verifiable) is
// verification-client.ts.
import { quotaConflictOfManifest } from "./quotas.ts";
import { hostPolicy } from "../../config.ts";
import { contextRequired, type ContextRequired } from "../../domain/context-needs.ts";
import { limitConflict, type RegisteredLimits } from "../../domain/limit/definition.ts";
import { show } from "../../domain/invalid-input.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import {
  verificationFor,
  verificationStatus,
  verificationView,
  type Verification,
  type VerificationStatus,
  type VerificationView,
} from "../../domain/verification.ts";
import { CODE_TOOLS } from "../../tools/code-tools.ts";
import { compileManifestTool } from "../../tools/catalog.ts";
import { checkCompensationTarget } from "../../tools/manifest/compensate.ts";
import { compileAcrossRuns } from "../../tools/manifest/limits.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import { verificationSettingsHash } from "../../tools/verify.ts";
import type { Env } from "../env.ts";
import { getProvider, unknownProvider } from "./oauth-providers.ts";
import type { SqlStore } from "../store/sql-store.ts";
import {
  decodeManifest,
  decodeManifestLimits,
  decodeVerification,
  type ToolRow,
} from "../store/tenant-rows.ts";
import type { TenantError } from "./object.ts";
import { policiesAfter, type PolicySetInvalid } from "./policies.ts";
import { secretRow } from "./secrets.ts";

/** `verification`: the stored verdict when it holds for the tool's current settings, else unverified. */
export type ToolRecord = {
  name: string;
  manifest: unknown;
  version: number;
  updated_at: string;
  /** The stored verdict as every reader shows it (domain/verification.ts verificationView). */
  verification: VerificationView;
};

/** `force`: store a change that breaks the tenant's policy set, and mark the set invalid. */
export async function putTool(
  store: SqlStore,
  env: Env,
  name: string,
  manifest: unknown,
  force = false,
): Promise<
  Result<
    ToolRecord & { created: boolean; warnings: Array<ContextRequired | PolicySetInvalid> },
    TenantError
  >
> {
  const compiled = compileManifestTool(manifest, hostPolicy(env));
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
  // Acting as the user (issue 36): the provider must be this tenant's.
  const auth = compiled.value.auth;
  if (auth && !getProvider(store, auth.provider).ok) return err(unknownProvider(auth.provider));
  const compensation = compensationTarget(store, env, compiled.value.compensate);
  if (!compensation.ok) return compensation;
  const settingsHash = (await verificationSettingsHash(manifest))!;
  // After the last await, so no other PUT stores a contradicting definition in between.
  const limits = compiled.value.limitsAcrossRuns;
  const conflict = limits.length > 0 && limitConflict(name, limits, registeredLimits(store));
  if (conflict) return err({ code: "limit_conflict", ...conflict });
  // A manifest quota is the tool's (user, tool) quota: it may not contradict a PUT /v1/quotas one.
  const quota = compiled.value.quota;
  const quotaClash = quota && quotaConflictOfManifest(store, name, quota);
  if (quotaClash) return err(quotaClash);
  const change = { name, spec: compiled.value };
  const policies = policiesAfter(store, env, change, `PUT /v1/tools/${name}`, force);
  if (!policies.ok) return policies;
  store.ensureSchema();
  const previous = store.one<ToolRow>("SELECT * FROM tools WHERE name = ?", name);
  const version = (previous?.version ?? 0) + 1;
  // What runs must carry, and what this version reads that the one it replaces did not.
  const replaced = previous
    ? compileManifestTool(decodeManifest(previous.manifest), hostPolicy(env))
    : null;
  const required = contextRequired(
    compiled.value,
    previous && replaced?.ok ? { spec: replaced.value, version: previous.version } : null,
  );
  const now = Date.now();
  store.transaction(() => {
    store.run(
      "INSERT OR REPLACE INTO tools (name, manifest, version, updated_at) VALUES (?, ?, ?, ?)",
      name,
      JSON.stringify(manifest),
      version,
      now,
    );
    // New request or idempotency settings: the old verdict says nothing about them.
    store.run(
      "DELETE FROM verifications WHERE name = ? AND settings_hash != ?",
      name,
      settingsHash,
    );
    policies.value.mark?.();
  });
  return ok({
    name,
    manifest,
    version,
    updated_at: new Date(now).toISOString(),
    verification: verificationView(verificationFor(verificationRow(store, name), settingsHash)),
    created: previous === null,
    warnings: [
      ...(required ? [required] : []),
      ...(policies.value.warning ? [policies.value.warning] : []),
    ],
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
    ? compileManifestTool(decodeManifest(row.manifest), hostPolicy(env))
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

/**
 * Every registered tool's limits across runs (audit N4: one definition per name): the stored
 * manifests, and the code tools no manifest overrides. A stored manifest whose limits no longer
 * compile defines nothing (no run can be given it).
 */
function registeredLimits(store: SqlStore): RegisteredLimits[] {
  const rows = store.exists("tools")
    ? store.all<{ name: string; manifest: string }>("SELECT name, manifest FROM tools")
    : [];
  const out: RegisteredLimits[] = [];
  for (const row of rows) {
    const manifest = decodeManifestLimits(row.manifest);
    if (manifest.limits_across_runs === undefined) continue;
    const limits = compileAcrossRuns(manifest.limits_across_runs, manifest.input_schema);
    if (limits.ok) out.push({ tool: row.name, limits: limits.value });
  }
  for (const [name, spec] of Object.entries(CODE_TOOLS))
    if (!rows.some((row) => row.name === name))
      out.push({ tool: name, limits: spec.limitsAcrossRuns });
  return out;
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

/** `force`: delete a tool the tenant's policy set names, and mark the set invalid. */
export function deleteTool(
  store: SqlStore,
  env: Env,
  name: string,
  force = false,
): Result<{ warnings: PolicySetInvalid[] }, TenantError> {
  if (!toolRow(store, name)) return err({ code: "not_found", detail: `no tool named ${name}` });
  const change = { name, spec: null };
  const policies = policiesAfter(store, env, change, `DELETE /v1/tools/${name}`, force);
  if (!policies.ok) return policies;
  store.transaction(() => {
    store.run("DELETE FROM tools WHERE name = ?", name);
    store.run("DELETE FROM verifications WHERE name = ?", name);
    policies.value.mark?.();
  });
  return ok({ warnings: policies.value.warning ? [policies.value.warning] : [] });
}

/**
 * Stores a verdict only if the tool still has the settings it was checked with: a verification
 * that finishes after a re-PUT (or a delete) must not vouch for the new version.
 */
export async function recordVerification(
  store: SqlStore,
  name: string,
  verification: Verification,
): Promise<Result<VerificationView, TenantError>> {
  for (;;) {
    const row = toolRow(store, name);
    const current = row ? await verificationSettingsHash(decodeManifest(row.manifest)) : null;
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
    return ok(verificationView(verification));
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
      verificationStatus(verificationFor(verificationRow(store, name), settingsHash)),
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
    else return err({ code: "not_found", detail: unknownTool(store, name) });
  }
  return ok(sources);
}

/** A run's tool outside the tenant's set: the name given, and the names there are (the first 20). */
function unknownTool(store: SqlStore, name: string): string {
  const registered = store.exists("tools")
    ? store.all<{ name: string }>("SELECT name FROM tools ORDER BY name").map((row) => row.name)
    : [];
  const known = [...new Set([...registered, ...Object.keys(CODE_TOOLS)])].sort();
  const listed = known.slice(0, 20).map(show).join(", ");
  const more = known.length > 20 ? ` and ${known.length - 20} more (GET /v1/tools)` : "";
  return `no tool named ${show(name)}; this tenant's tools: ${listed}${more}`;
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
  return row ? decodeVerification(row.data) : null;
}

async function toRecord(store: SqlStore, row: ToolRow): Promise<ToolRecord> {
  const manifest = decodeManifest(row.manifest);
  return {
    name: row.name,
    manifest,
    version: row.version,
    updated_at: new Date(row.updated_at).toISOString(),
    verification: verificationView(
      verificationFor(verificationRow(store, row.name), await verificationSettingsHash(manifest)),
    ),
  };
}
