// TenantObject: one per tenant. Holds the tool registry (manifests as registered). Code tools
// from the catalog are offered by name unless a manifest of the same name overrides them.
import { DurableObject } from "cloudflare:workers";
import { err, ok, type Result } from "../domain/result.ts";
import { hostPolicy, type Env } from "../env.ts";
import { compileManifest, type ManifestError } from "../tools/manifest.ts";
import { CODE_TOOLS } from "../tools/code-tools.ts";
import type { ToolSource } from "../tools/spec.ts";
import { SqlStore, TENANT_SCHEMA } from "./store.ts";

export type ToolRecord = { name: string; manifest: unknown; version: number; updated_at: string };
export type TenantError = ManifestError | { code: "not_found"; detail: string };

export class TenantObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, TENANT_SCHEMA);

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
    const row = this.store.exists("tools") ? this.store.one<{ name: string; manifest: string; version: number; updated_at: number }>("SELECT * FROM tools WHERE name = ?", name) : null;
    if (!row) return err({ code: "not_found", detail: `no tool named ${name}` });
    return ok({ name: row.name, manifest: JSON.parse(row.manifest), version: row.version, updated_at: new Date(row.updated_at).toISOString() });
  }

  async listTools(): Promise<ToolRecord[]> {
    if (!this.store.exists("tools")) return [];
    return this.store
      .all<{ name: string; manifest: string; version: number; updated_at: number }>("SELECT * FROM tools ORDER BY name")
      .map((row) => ({ name: row.name, manifest: JSON.parse(row.manifest), version: row.version, updated_at: new Date(row.updated_at).toISOString() }));
  }

  async deleteTool(name: string): Promise<Result<true, TenantError>> {
    if (!(await this.getTool(name)).ok) return err({ code: "not_found", detail: `no tool named ${name}` });
    this.store.run("DELETE FROM tools WHERE name = ?", name);
    return ok(true);
  }

  /** Snapshots the named tools for a new run; every name must resolve. */
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
}
