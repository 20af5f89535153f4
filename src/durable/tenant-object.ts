// TenantObject: one per tenant. Holds the tenant record, its API keys (only SHA-256 hashes of
// the secrets, compared in constant time; revocable) and its tool registry. Code tools from the
// catalog are offered by name unless a manifest of the same name overrides them.
import { DurableObject } from "cloudflare:workers";
import { ulid } from "ulid";
import { sha256Hex } from "../domain/canonical-json.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { constantTimeEqual, randomSecret } from "../crypto.ts";
import { hostPolicy, type Env } from "../env.ts";
import type { ApiScope } from "../http/schemas.ts";
import { compileManifest, type ManifestError } from "../tools/manifest.ts";
import { CODE_TOOLS } from "../tools/code-tools.ts";
import type { ToolSource } from "../tools/spec.ts";
import { SqlStore, TENANT_SCHEMA } from "./store.ts";

export type ToolRecord = { name: string; manifest: unknown; version: number; updated_at: string };
export type TenantError = ManifestError | { code: "not_found"; detail: string } | { code: "invalid_request"; detail: string };
type ToolRow = { name: string; manifest: string; version: number; updated_at: number };

export class TenantObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, TENANT_SCHEMA);

  async init(tenantId: string, name: string): Promise<Result<{ tenant_id: string; name: string }, TenantError>> {
    this.store.ensureSchema();
    if (this.store.one("SELECT id FROM tenant")) return err({ code: "invalid_request", detail: "tenant exists" });
    this.store.run("INSERT INTO tenant (id, name, created_at) VALUES (?, ?, ?)", tenantId, name, Date.now());
    return ok({ tenant_id: tenantId, name });
  }

  async issueKey(tenantId: string, name: string, scopes: ApiScope[]): Promise<Result<{ key_id: string; key: string; name: string; scopes: ApiScope[] }, TenantError>> {
    if (!this.tenant()) return err({ code: "not_found", detail: "no such tenant" });
    const keyId = `key_${ulid()}`;
    const secret = randomSecret();
    this.store.run("INSERT INTO api_keys (id, name, scopes, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)", keyId, name, JSON.stringify(scopes), await sha256Hex(secret), Date.now());
    return ok({ key_id: keyId, key: `tgk.${tenantId}.${keyId}.${secret}`, name, scopes });
  }

  async revokeKey(keyId: string): Promise<Result<true, TenantError>> {
    const row = this.tenant() ? this.store.one<{ id: string }>("SELECT id FROM api_keys WHERE id = ? AND revoked_at IS NULL", keyId) : null;
    if (!row) return err({ code: "not_found", detail: "no such key" });
    this.store.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", Date.now(), keyId);
    return ok(true);
  }

  async verifyKey(keyId: string, secret: string): Promise<Result<{ scopes: ApiScope[] }, TenantError>> {
    const row = this.tenant() ? this.store.one<{ scopes: string; secret_hash: string }>("SELECT scopes, secret_hash FROM api_keys WHERE id = ? AND revoked_at IS NULL", keyId) : null;
    // Hash and compare even for unknown keys, so timing does not reveal which key ids exist.
    const matches = await constantTimeEqual(await sha256Hex(secret), row?.secret_hash ?? "0".repeat(64));
    return row && matches ? ok({ scopes: JSON.parse(row.scopes) as ApiScope[] }) : err({ code: "not_found", detail: "no such key" });
  }

  async putTool(name: string, manifest: unknown): Promise<Result<ToolRecord & { created: boolean }, TenantError>> {
    const compiled = compileManifest(manifest, hostPolicy(this.env));
    if (!compiled.ok) return compiled;
    if (compiled.value.name !== name) return err({ code: "invalid_manifest", detail: `manifest name "${compiled.value.name}" does not match the URL's "${name}"` });
    this.store.ensureSchema();
    const previous = this.store.one<{ version: number }>("SELECT version FROM tools WHERE name = ?", name);
    const version = (previous?.version ?? 0) + 1;
    const now = Date.now();
    this.store.run("INSERT OR REPLACE INTO tools (name, manifest, version, updated_at) VALUES (?, ?, ?, ?)", name, JSON.stringify(manifest), version, now);
    return ok({ name, manifest, version, updated_at: new Date(now).toISOString(), created: previous === null });
  }

  async getTool(name: string): Promise<Result<ToolRecord, TenantError>> {
    const row = this.store.exists("tools") ? this.store.one<ToolRow>("SELECT * FROM tools WHERE name = ?", name) : null;
    return row ? ok(toRecord(row)) : err({ code: "not_found", detail: `no tool named ${name}` });
  }

  async listTools(): Promise<ToolRecord[]> {
    return this.store.exists("tools") ? this.store.all<ToolRow>("SELECT * FROM tools ORDER BY name").map(toRecord) : [];
  }

  async deleteTool(name: string): Promise<Result<true, TenantError>> {
    if (!(await this.getTool(name)).ok) return err({ code: "not_found", detail: `no tool named ${name}` });
    this.store.run("DELETE FROM tools WHERE name = ?", name);
    return ok(true);
  }

  /** Snapshots the named tools for a run; every name must resolve. */
  async sources(names: string[]): Promise<Result<Record<string, ToolSource>, TenantError>> {
    const sources: Record<string, ToolSource> = {};
    for (const name of names) {
      const record = await this.getTool(name);
      if (record.ok) sources[name] = { kind: "manifest", manifest: record.value.manifest };
      else if (CODE_TOOLS[name]) sources[name] = { kind: "code", name };
      else return err({ code: "not_found", detail: `no tool named ${name}` });
    }
    return ok(sources);
  }

  /** Which of `names` this tenant knows at all (a registered manifest or a code tool). Read-only. */
  async knownTools(names: string[]): Promise<string[]> {
    const manifests = this.store.exists("tools") ? names.filter((name) => this.store.one("SELECT name FROM tools WHERE name = ?", name) !== null) : [];
    return names.filter((name) => manifests.includes(name) || CODE_TOOLS[name] !== undefined);
  }

  private tenant(): { id: string } | null {
    return this.store.exists("tenant") ? this.store.one<{ id: string }>("SELECT id FROM tenant") : null;
  }
}

const toRecord = (row: ToolRow): ToolRecord => ({ name: row.name, manifest: JSON.parse(row.manifest), version: row.version, updated_at: new Date(row.updated_at).toISOString() });
