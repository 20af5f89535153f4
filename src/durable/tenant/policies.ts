// A tenant's Cedar policy set (issue 21 part 2): one row, replaced whole by PUT /v1/policies after
// Cedar validated it against the schema generated from the tenant's tools (its manifests and the
// code tools), removed by DELETE. Its version is the SHA-256 of its text: an operation records the
// version that decided. The set depends on the tools' schemas, so every tool PUT or DELETE checks it
// again (issue 31): a change that breaks it is refused, or, forced, stored with the set marked
// `invalid` — which refuses every call (policies/evaluate.ts) until the set is PUT again.
import { sha256Hex } from "../../domain/canonical-json.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { hostPolicy } from "../../config.ts";
import { cedarSchemaFor } from "../../policies/schema.ts";
import type { PolicySet } from "../../domain/policy-request.ts";
import { validationProblem } from "../../policies/evaluate.ts";
import { compileManifestTool } from "../../tools/catalog.ts";
import { CODE_TOOLS } from "../../tools/code-tools.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { decodeManifest } from "../store/tenant-rows.ts";
import type { TenantError } from "./contracts.ts";

/** `invalid`: why and since when every call is refused (null: the set validated against the tools). */
export type PolicyRecord = Omit<PolicySet, "invalid"> & {
  updated_at: string;
  schema: string;
  invalid: { reason: string; since: string } | null;
};
/** `invalid`, `invalid_at`: columns added by issue 31 (absent in older tables until first marked). */
type Row = {
  text: string;
  version: string;
  updated_at: number;
  invalid?: string | null;
  invalid_at?: number | null;
};

/** What a forced tool change answers when it marked the set invalid (the caller must hear it). */
export type PolicySetInvalid = { code: "policy_set_invalid"; detail: string };

/** A tool about to change: its new spec, or null when it is deleted. */
export type ToolChange = { name: string; spec: ToolSpec | null };

/** The Cedar schema of the tenant's tools as they are registered now (with `change` applied). */
function tenantSchema(store: SqlStore, env: Env, change: ToolChange | null = null): string {
  const byName = new Map<string, Pick<ToolSpec, "name" | "inputJsonSchema">>(
    Object.values(CODE_TOOLS).map((spec) => [spec.name, spec]),
  );
  const rows = store.exists("tools")
    ? store.all<{ manifest: string }>("SELECT manifest FROM tools ORDER BY name")
    : [];
  for (const row of rows) {
    const spec = compileManifestTool(decodeManifest(row.manifest), hostPolicy(env));
    if (spec.ok) byName.set(spec.value.name, spec.value);
  }
  if (change?.spec) byName.set(change.name, change.spec);
  else if (change) {
    // A deleted manifest that overrode a code tool of the same name: the code tool is offered again.
    const code = CODE_TOOLS[change.name];
    if (code) byName.set(change.name, code);
    else byName.delete(change.name);
  }
  return cedarSchemaFor([...byName.values()]);
}

function storedRow(store: SqlStore): Row | null {
  return store.exists("policies") ? store.one<Row>("SELECT * FROM policies WHERE k = 1") : null;
}

export async function putPolicies(
  store: SqlStore,
  env: Env,
  text: string,
): Promise<Result<PolicyRecord & { created: boolean }, TenantError>> {
  const version = `cedar_${(await sha256Hex(text)).slice(0, 32)}`;
  // Validated and stored with no await between: a tool change cannot slip in between the two.
  const schema = tenantSchema(store, env);
  const problem = validationProblem(text, schema);
  if (problem) return err({ code: "invalid_policy", detail: problem });
  const nowMs = Date.now();
  const created = storedRow(store) === null;
  store.ensureTable("policies");
  // The whole row is replaced: a set marked invalid is valid again once a set that validates is PUT.
  store.run(
    "INSERT OR REPLACE INTO policies (k, text, version, updated_at) VALUES (1, ?, ?, ?)",
    text,
    version,
    nowMs,
  );
  const updated_at = new Date(nowMs).toISOString();
  return ok({ text, version, updated_at, schema, invalid: null, created });
}

export function getPolicies(store: SqlStore, env: Env): PolicyRecord | null {
  const row = storedRow(store);
  if (!row) return null;
  return {
    text: row.text,
    version: row.version,
    updated_at: new Date(row.updated_at).toISOString(),
    schema: tenantSchema(store, env),
    invalid: row.invalid
      ? { reason: row.invalid, since: new Date(row.invalid_at ?? row.updated_at).toISOString() }
      : null,
  };
}

/** DELETE /v1/policies: calls are no longer Cedar-gated (runs' facts within their bound, attempts at once). */
export function deletePolicies(store: SqlStore): Result<true, TenantError> {
  if (!storedRow(store)) return err({ code: "not_found", detail: "no policy set" });
  store.run("DELETE FROM policies WHERE k = 1");
  return ok(true);
}

/** What an operation evaluates (null: the tenant has none, and nothing is evaluated). */
export function policySetOf(store: SqlStore): PolicySet | null {
  const row = storedRow(store);
  if (!row) return null;
  return {
    text: row.text,
    version: row.version,
    ...(row.invalid ? { invalid: row.invalid } : {}),
  };
}

/**
 * Before a tool PUT or DELETE (`how`: the request, for the record): the stored set checked against
 * the tools as they will be. Breaks it: refused (`tool_breaks_policy_set`, Cedar's message, nothing
 * stored), or with `force` the answer is `mark`, a function the caller runs in the transaction that
 * stores the change. A set already invalid stays so until it is PUT again. Synchronous: the caller
 * runs it after its last await, so nothing changes between this check and the write.
 */
export function policiesAfter(
  store: SqlStore,
  env: Env,
  change: ToolChange,
  how: string,
  force: boolean,
): Result<{ mark: (() => void) | null; warning: PolicySetInvalid | null }, TenantError> {
  const row = storedRow(store);
  if (!row || row.invalid) return ok({ mark: null, warning: null });
  const problem = validationProblem(row.text, tenantSchema(store, env, change));
  if (!problem) return ok({ mark: null, warning: null });
  if (!force)
    return err({
      code: "tool_breaks_policy_set",
      detail: `this change would break the tenant's Cedar policy set ${row.version}: ${problem}. Nothing was stored. Change the policy set first (PUT /v1/policies), or send the change with ?force=1 to store it and mark the set invalid (then every call is refused until the set is PUT again).`,
    });
  const reason = `${how} with ?force=1 broke it: ${problem}`;
  // Older tables lack the columns: added now, outside the caller's transaction.
  store.ensureColumn("policies", "invalid TEXT");
  store.ensureColumn("policies", "invalid_at INTEGER");
  const mark = () =>
    void store.run(
      "UPDATE policies SET invalid = ?, invalid_at = ? WHERE k = 1",
      reason,
      Date.now(),
    );
  const warning: PolicySetInvalid = {
    code: "policy_set_invalid",
    detail: `stored, and the tenant's Cedar policy set ${row.version} is now marked invalid (${reason}): every call is refused until the set is PUT again (PUT /v1/policies)`,
  };
  return ok({ mark, warning });
}
