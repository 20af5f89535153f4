// A tenant's Cedar policy set (issue 21 part 2): one row, replaced whole by PUT /v1/policies after
// Cedar validated it against the schema generated from the tenant's tools (its manifests and the
// code tools). Its version is the SHA-256 of its text: an operation records the version that decided.
import { sha256Hex } from "../../domain/canonical-json.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { hostPolicy } from "../../config.ts";
import { cedarSchemaFor } from "../../policies/schema.ts";
import { validationProblem, type PolicySet } from "../../policies/evaluate.ts";
import { resolveTool } from "../../tools/catalog.ts";
import { CODE_TOOLS } from "../../tools/code-tools.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";

export type PolicyRecord = PolicySet & { updated_at: string; schema: string };
type Row = { text: string; version: string; updated_at: number };

/** The Cedar schema of the tenant's tools as they are registered now. */
function tenantSchema(store: SqlStore, env: Env): string {
  const specs: ToolSpec[] = Object.values(CODE_TOOLS);
  const rows = store.exists("tools")
    ? store.all<{ manifest: string }>("SELECT manifest FROM tools ORDER BY name")
    : [];
  for (const row of rows) {
    const spec = resolveTool(
      { kind: "manifest", manifest: JSON.parse(row.manifest) as unknown },
      hostPolicy(env),
    );
    if (spec.ok) specs.push(spec.value);
  }
  const byName = new Map(specs.map((spec) => [spec.name, spec]));
  return cedarSchemaFor([...byName.values()]);
}

export async function putPolicies(
  store: SqlStore,
  env: Env,
  text: string,
): Promise<
  Result<PolicyRecord & { created: boolean }, { code: "invalid_policy"; detail: string }>
> {
  const schema = tenantSchema(store, env);
  const problem = validationProblem(text, schema);
  if (problem) return err({ code: "invalid_policy", detail: problem });
  const version = `cedar_${(await sha256Hex(text)).slice(0, 32)}`;
  const nowMs = Date.now();
  const created = policySetOf(store) === null;
  store.ensureTable("policies");
  store.run(
    "INSERT OR REPLACE INTO policies (k, text, version, updated_at) VALUES (1, ?, ?, ?)",
    text,
    version,
    nowMs,
  );
  return ok({ text, version, updated_at: new Date(nowMs).toISOString(), schema, created });
}

export function getPolicies(store: SqlStore, env: Env): PolicyRecord | null {
  const row = store.exists("policies")
    ? store.one<Row>("SELECT text, version, updated_at FROM policies WHERE k = 1")
    : null;
  if (!row) return null;
  const schema = tenantSchema(store, env);
  return {
    text: row.text,
    version: row.version,
    updated_at: new Date(row.updated_at).toISOString(),
    schema,
  };
}

/** What an operation evaluates (null: the tenant has none, and nothing is evaluated). */
export function policySetOf(store: SqlStore): PolicySet | null {
  if (!store.exists("policies")) return null;
  const row = store.one<Row>("SELECT text, version, updated_at FROM policies WHERE k = 1");
  return row ? { text: row.text, version: row.version } : null;
}
