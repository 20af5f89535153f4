// TenantObject: one per tenant. Holds the tenant record, its API keys (only SHA-256 hashes of
// the secrets, compared in constant time; revocable), its upstream secrets (write-only, AES-GCM
// under a per-tenant key derived from TOOLGATE_SECRETS_KEY; only operations of this tenant get
// them decrypted, and only the names their tool references) and its tool registry. Code tools
// from the catalog are offered by name unless a manifest of the same name overrides them.
import { DurableObject } from "cloudflare:workers";
import { ulid } from "ulid";
import { sha256Hex } from "../domain/canonical-json.ts";
import { err, ok, type Result } from "../domain/result.ts";
import {
  constantTimeEqual,
  openSecret,
  randomSecret,
  sealSecret,
  secretFingerprint,
} from "../crypto.ts";
import { hostPolicy, retentionMs, type Env } from "../env.ts";
import type { ApiScope } from "../http/schemas.ts";
import {
  countedStatus,
  verificationFor,
  type Verification,
  type VerificationStatus,
} from "../domain/verification.ts";
import { compileManifest } from "../tools/manifest/compile.ts";
import type { ManifestError } from "../tools/manifest/schema.ts";
import { verificationSettingsHash } from "../tools/verify.ts";
import { CODE_TOOLS } from "../tools/code-tools.ts";
import type { ToolSource } from "../tools/spec.ts";
import { SqlStore, TENANT_SCHEMA } from "./store.ts";
import { operationStub } from "./stubs.ts";

/** `verification`: the stored verdict when it holds for the tool's current settings, else unverified. */
export type ToolRecord = {
  name: string;
  manifest: unknown;
  version: number;
  updated_at: string;
  verification: Verification;
};
/** One approval request as the inbox shows it (derived from the operation's log, which is authoritative). */
export type ApprovalItem = {
  operation_id: string;
  run_id: string;
  call_id: string;
  tool: string;
  target: string;
  arguments: Record<string, unknown>;
  state: "pending" | "approved" | "rejected" | "expired" | "cancelled";
  requested_by: string;
  requested_at_ms: number;
  expires_at_ms: number;
  input_hash: string;
  policy_version: string;
  /** `truncated`: the body is the first 16 KiB of its JSON text; the operation has all of it. */
  preview: {
    status: number | null;
    body: unknown;
    detail: string | null;
    truncated: boolean;
  } | null;
  decided_by: string | null;
  decided_at_ms: number | null;
  reason: string | null;
};
/** An operation waiting for a person's verdict on an unknown outcome, as the tenant lists it. */
export type UnknownItem = { operation_id: string; run_id: string; tool: string; since_ms: number };
export type ApprovalPage = {
  items: Array<
    Omit<ApprovalItem, "requested_at_ms" | "expires_at_ms" | "decided_at_ms"> & {
      requested_at: string;
      expires_at: string;
      decided_at: string | null;
    }
  >;
  next_cursor: string | null;
};
export type SecretRecord = {
  name: string;
  fingerprint: string;
  created_at: string;
  updated_at: string;
};
export type SecretsError =
  { code: "unknown_secret"; detail: string } | { code: "misconfigured"; detail: string };
export type TenantError =
  | ManifestError
  | SecretsError
  | { code: "not_found"; detail: string }
  | { code: "invalid_request"; detail: string }
  /** A verification finished after the tool's checked settings were replaced (or it was deleted). */
  | { code: "tool_changed"; detail: string };
type ToolRow = { name: string; manifest: string; version: number; updated_at: number };
type SecretRow = {
  name: string;
  iv: string;
  ciphertext: string;
  fingerprint: string;
  created_at: number;
  updated_at: number;
};

/** When a request left the inbox: decided, else (expired or cancelled) no later than its expiry. */
const closedAtMs = (item: ApprovalItem): number => item.decided_at_ms ?? item.expires_at_ms;

/** An RPC's answer, or that there was none (the callee threw or could not be reached). */
async function ask<T>(
  question: () => Promise<T>,
): Promise<{ answered: true; value: T } | { answered: false }> {
  try {
    return { answered: true, value: await question() };
  } catch {
    return { answered: false };
  }
}

export class TenantObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, TENANT_SCHEMA);

  async init(
    tenantId: string,
    name: string,
  ): Promise<Result<{ tenant_id: string; name: string }, TenantError>> {
    this.store.ensureSchema();
    if (this.store.one("SELECT id FROM tenant"))
      return err({ code: "invalid_request", detail: "tenant exists" });
    this.store.run(
      "INSERT INTO tenant (id, name, created_at) VALUES (?, ?, ?)",
      tenantId,
      name,
      Date.now(),
    );
    return ok({ tenant_id: tenantId, name });
  }

  async issueKey(
    tenantId: string,
    name: string,
    scopes: ApiScope[],
  ): Promise<
    Result<{ key_id: string; key: string; name: string; scopes: ApiScope[] }, TenantError>
  > {
    if (!this.tenant()) return err({ code: "not_found", detail: "no such tenant" });
    const keyId = `key_${ulid()}`;
    const secret = randomSecret();
    this.store.run(
      "INSERT INTO api_keys (id, name, scopes, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)",
      keyId,
      name,
      JSON.stringify(scopes),
      await sha256Hex(secret),
      Date.now(),
    );
    return ok({ key_id: keyId, key: `tgk.${tenantId}.${keyId}.${secret}`, name, scopes });
  }

  async revokeKey(keyId: string): Promise<Result<true, TenantError>> {
    const row = this.tenant()
      ? this.store.one<{ id: string }>(
          "SELECT id FROM api_keys WHERE id = ? AND revoked_at IS NULL",
          keyId,
        )
      : null;
    if (!row) return err({ code: "not_found", detail: "no such key" });
    this.store.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", Date.now(), keyId);
    return ok(true);
  }

  async verifyKey(
    keyId: string,
    secret: string,
  ): Promise<Result<{ scopes: ApiScope[]; name: string }, TenantError>> {
    const row = this.tenant()
      ? this.store.one<{ scopes: string; secret_hash: string; name: string }>(
          "SELECT scopes, secret_hash, name FROM api_keys WHERE id = ? AND revoked_at IS NULL",
          keyId,
        )
      : null;
    // Hash and compare even for unknown keys, so timing does not reveal which key ids exist.
    const matches = await constantTimeEqual(
      await sha256Hex(secret),
      row?.secret_hash ?? "0".repeat(64),
    );
    return row && matches
      ? ok({ scopes: JSON.parse(row.scopes) as ApiScope[], name: row.name })
      : err({ code: "not_found", detail: "no such key" });
  }

  /** A key that is still valid (not revoked): its name and scopes. The console re-checks it on every request. */
  async keyInfo(keyId: string): Promise<Result<{ name: string; scopes: ApiScope[] }, TenantError>> {
    const row = this.tenant()
      ? this.store.one<{ name: string; scopes: string }>(
          "SELECT name, scopes FROM api_keys WHERE id = ? AND revoked_at IS NULL",
          keyId,
        )
      : null;
    return row
      ? ok({ name: row.name, scopes: JSON.parse(row.scopes) as ApiScope[] })
      : err({ code: "not_found", detail: "no such key" });
  }

  async putTool(
    name: string,
    manifest: unknown,
  ): Promise<Result<ToolRecord & { created: boolean }, TenantError>> {
    const compiled = compileManifest(manifest, hostPolicy(this.env));
    if (!compiled.ok) return compiled;
    if (compiled.value.name !== name)
      return err({
        code: "invalid_manifest",
        detail: `manifest name "${compiled.value.name}" does not match the URL's "${name}"`,
      });
    // Only this tenant's own secrets resolve; deployment bindings never do.
    const unknown = compiled.value.secretNames.filter((secret) => !this.secretRow(secret));
    if (unknown.length > 0)
      return err({
        code: "unknown_secret",
        detail: `no secret named ${unknown.join(", ")} in this tenant; register it first with PUT /v1/secrets/{name}`,
      });
    const settingsHash = (await verificationSettingsHash(manifest))!;
    this.store.ensureSchema();
    const previous = this.store.one<{ version: number }>(
      "SELECT version FROM tools WHERE name = ?",
      name,
    );
    const version = (previous?.version ?? 0) + 1;
    const now = Date.now();
    this.store.run(
      "INSERT OR REPLACE INTO tools (name, manifest, version, updated_at) VALUES (?, ?, ?, ?)",
      name,
      JSON.stringify(manifest),
      version,
      now,
    );
    // New request or idempotency settings: the old verdict says nothing about them.
    this.store.run(
      "DELETE FROM verifications WHERE name = ? AND settings_hash != ?",
      name,
      settingsHash,
    );
    return ok({
      name,
      manifest,
      version,
      updated_at: new Date(now).toISOString(),
      verification: verificationFor(this.verificationRow(name), settingsHash),
      created: previous === null,
    });
  }

  async getTool(name: string): Promise<Result<ToolRecord, TenantError>> {
    const row = this.store.exists("tools")
      ? this.store.one<ToolRow>("SELECT * FROM tools WHERE name = ?", name)
      : null;
    return row
      ? ok(await this.toRecord(row))
      : err({ code: "not_found", detail: `no tool named ${name}` });
  }

  /** The list shows each verdict without its evidence (GET /v1/tools/{name} has the exchanges). */
  async listTools(): Promise<ToolRecord[]> {
    const rows = this.store.exists("tools")
      ? this.store.all<ToolRow>("SELECT * FROM tools ORDER BY name")
      : [];
    const records = await Promise.all(rows.map((row) => this.toRecord(row)));
    return records.map((record) => ({
      ...record,
      verification: {
        ...record.verification,
        checks: record.verification.checks.map((check) => ({ ...check, exchanges: [] })),
      },
    }));
  }

  async deleteTool(name: string): Promise<Result<true, TenantError>> {
    if (!(await this.getTool(name)).ok)
      return err({ code: "not_found", detail: `no tool named ${name}` });
    this.store.run("DELETE FROM tools WHERE name = ?", name);
    this.store.run("DELETE FROM verifications WHERE name = ?", name);
    return ok(true);
  }

  /**
   * Stores a verdict only if the tool still has the settings it was checked with: a verification
   * that finishes after a re-PUT (or a delete) must not vouch for the new version.
   */
  async recordVerification(
    name: string,
    verification: Verification,
  ): Promise<Result<Verification, TenantError>> {
    for (;;) {
      const row = this.toolRow(name);
      const current = row ? await verificationSettingsHash(JSON.parse(row.manifest)) : null;
      const now = this.toolRow(name);
      // The hash was awaited: if the tool changed meanwhile, judge the newer version.
      if (now?.version !== row?.version) continue;
      if (current === null || current !== verification.settings_hash)
        return err({
          code: "tool_changed",
          detail: `the tool ${name} was ${row ? "replaced with other request or idempotency settings" : "deleted"} while it was being verified; the verdict was not stored, verify again`,
        });
      this.store.ensureSchema();
      this.store.run(
        "INSERT OR REPLACE INTO verifications (name, settings_hash, data) VALUES (?, ?, ?)",
        name,
        current,
        JSON.stringify(verification),
      );
      return ok(verification);
    }
  }

  /** Asked when an operation is created and when a run exports its tools: the verdict for exactly these settings. */
  async verificationStatuses(
    items: Array<{ name: string; settingsHash: string }>,
  ): Promise<Record<string, VerificationStatus>> {
    return Object.fromEntries(
      items.map(({ name, settingsHash }) => [
        name,
        countedStatus(verificationFor(this.verificationRow(name), settingsHash)),
      ]),
    );
  }

  async putSecret(
    tenantId: string,
    name: string,
    value: string,
  ): Promise<Result<SecretRecord & { created: boolean }, TenantError>> {
    if (!this.tenant()) return err({ code: "not_found", detail: "no such tenant" });
    const master = this.secretsKey();
    if (!master.ok) return master;
    const [sealed, fingerprint] = await Promise.all([
      sealSecret(master.value, tenantId, name, value),
      secretFingerprint(master.value, tenantId, value),
    ]);
    const previous = this.secretRow(name);
    const now = Date.now();
    this.store.ensureSchema();
    this.store.run(
      "INSERT OR REPLACE INTO secrets (name, iv, ciphertext, fingerprint, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
      name,
      sealed.iv,
      sealed.ciphertext,
      fingerprint,
      previous?.created_at ?? now,
      now,
    );
    return ok({ ...toSecretRecord(this.secretRow(name)!), created: previous === null });
  }

  async listSecrets(): Promise<SecretRecord[]> {
    return this.store.exists("secrets")
      ? this.store.all<SecretRow>("SELECT * FROM secrets ORDER BY name").map(toSecretRecord)
      : [];
  }

  async deleteSecret(name: string): Promise<Result<true, TenantError>> {
    if (!this.secretRow(name)) return err({ code: "not_found", detail: `no secret named ${name}` });
    this.store.run("DELETE FROM secrets WHERE name = ?", name);
    return ok(true);
  }

  /** The decrypted values of exactly `names`, for one attempt of one of this tenant's operations. */
  async secretsFor(
    tenantId: string,
    names: string[],
  ): Promise<Result<Record<string, string>, SecretsError>> {
    const master = this.secretsKey();
    if (!master.ok) return master;
    const values: Record<string, string> = {};
    for (const name of names) {
      const row = this.tenant()?.id === tenantId ? this.secretRow(name) : null;
      if (!row)
        return err({
          code: "unknown_secret",
          detail: `the tenant secret ${name} is not defined (it was deleted after the tool was registered)`,
        });
      try {
        values[name] = await openSecret(master.value, tenantId, name, row);
      } catch {
        // Typed, never a rejection: a caller that sees a thrown RPC cannot tell "nothing was sent".
        return err({
          code: "unknown_secret",
          detail: `the tenant secret ${name} could not be decrypted (TOOLGATE_SECRETS_KEY changed, or the stored value is damaged); register it again with PUT /v1/secrets/${name}`,
        });
      }
    }
    return ok(values);
  }

  /**
   * Delivered by operations from their outbox (at least once, possibly out of order): one row per
   * approval request, rewritten as it is decided. `seq` orders one operation's deliveries: an older
   * one than the row holds changes nothing.
   */
  async upsertApproval(item: ApprovalItem, seq: number): Promise<void> {
    this.store.ensureSchema();
    const held = this.store.one<{ data: string }>(
      "SELECT data FROM approvals WHERE operation_id = ?",
      item.operation_id,
    );
    if (held && seq < ((JSON.parse(held.data) as { seq?: number }).seq ?? -1)) return;
    this.store.run(
      "INSERT OR REPLACE INTO approvals (operation_id, state, requested_at, data) VALUES (?, ?, ?, ?)",
      item.operation_id,
      item.state,
      item.requested_at_ms,
      JSON.stringify({ ...item, seq }),
    );
    // A closed request leaves the inbox with retention, like its operation (pending ones never do).
    if (item.state !== "pending" && (await this.ctx.storage.getAlarm()) === null)
      await this.ctx.storage.setAlarm(closedAtMs(item) + retentionMs(this.env));
  }

  /**
   * Retention for the inbox and for the closed rows of the unknown-outcomes list: closed ones older
   * than the period go; the alarm follows the next one.
   */
  override async alarm(): Promise<void> {
    if (!this.store.exists("approvals")) return;
    const nowMs = Date.now();
    const keepMs = retentionMs(this.env);
    const closed = this.store
      .all<{ operation_id: string; data: string }>(
        "SELECT operation_id, data FROM approvals WHERE state != 'pending'",
      )
      .map((row) => ({ id: row.operation_id, dueAtMs: closedAtMs(JSON.parse(row.data)) + keepMs }));
    for (const row of closed)
      if (row.dueAtMs <= nowMs)
        this.store.run("DELETE FROM approvals WHERE operation_id = ?", row.id);
    this.unknownsTable();
    this.store.run("DELETE FROM unknowns WHERE open = 0 AND closed_at <= ?", nowMs - keepMs);
    const unknownDue = this.store.one<{ at: number | null }>(
      "SELECT MIN(closed_at) AS at FROM unknowns WHERE open = 0",
    )?.at;
    const next = Math.min(
      ...closed.filter((row) => row.dueAtMs > nowMs).map((row) => row.dueAtMs),
      ...(unknownDue == null ? [] : [unknownDue + keepMs]),
    );
    if (Number.isFinite(next)) await this.ctx.storage.setAlarm(next);
  }

  /** Newest first; `pending` = still waiting for a person, `decided` = everything else. Cursor = the last item's (time, id). */
  async listApprovals(
    state: "pending" | "decided",
    cursor: string | null,
    limit: number,
  ): Promise<ApprovalPage> {
    if (!this.store.exists("approvals")) return { items: [], next_cursor: null };
    const [beforeMs, beforeId] = cursor
      ? [Number(cursor.split(":")[0]), cursor.split(":")[1] ?? ""]
      : [Number.MAX_SAFE_INTEGER, ""];
    const rows = this.store.all<{ data: string; requested_at: number; operation_id: string }>(
      `SELECT data, requested_at, operation_id FROM approvals WHERE ${state === "pending" ? "state = 'pending'" : "state != 'pending'"}
       AND (requested_at < ? OR (requested_at = ? AND operation_id < ?)) ORDER BY requested_at DESC, operation_id DESC LIMIT ?`,
      beforeMs,
      beforeMs,
      cursor ? beforeId : "\uffff",
      limit + 1,
    );
    const items = rows.slice(0, limit).map((row) => {
      const { requested_at_ms, expires_at_ms, decided_at_ms, ...stored } = JSON.parse(
        row.data,
      ) as ApprovalItem & { seq?: number };
      const { seq: _seq, ...rest } = stored;
      const iso = (ms: number) => new Date(ms).toISOString();
      return {
        ...rest,
        // Rows written before the inbox capped previews had no flag: they were never cut.
        preview: rest.preview
          ? { ...rest.preview, truncated: rest.preview.truncated ?? false }
          : null,
        requested_at: iso(requested_at_ms),
        expires_at: iso(expires_at_ms),
        decided_at: decided_at_ms === null ? null : iso(decided_at_ms),
      };
    });
    const last = rows[limit - 1];
    return {
      items,
      next_cursor: rows.length > limit && last ? `${last.requested_at}:${last.operation_id}` : null,
    };
  }

  /**
   * Delivered by operations from their outbox (at least once, possibly out of order): an operation
   * started or stopped waiting for a person's verdict on an unknown outcome. A closed row stays as a
   * tombstone (until retention), so an older delivery (`seq`) can never reopen it.
   */
  async markUnknown(item: UnknownItem, open: boolean, seq: number): Promise<void> {
    this.unknownsTable();
    const held = this.store.one<{ seq: number }>(
      "SELECT seq FROM unknowns WHERE operation_id = ?",
      item.operation_id,
    );
    if (held && seq < held.seq) return;
    const nowMs = Date.now();
    this.store.run(
      "INSERT OR REPLACE INTO unknowns (operation_id, run_id, tool, since, seq, open, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      item.operation_id,
      item.run_id,
      item.tool,
      item.since_ms,
      seq,
      open ? 1 : 0,
      open ? null : nowMs,
    );
    if (!open && (await this.ctx.storage.getAlarm()) === null)
      await this.ctx.storage.setAlarm(nowMs + retentionMs(this.env));
  }

  /**
   * Operations whose outcome only a person can settle, oldest first (the details live with each
   * operation). Each candidate is checked with its operation before it counts toward `limit`: a row
   * whose operation has moved on (a close not delivered yet, or lost before the outbox existed) is
   * closed here and skipped, so stale rows can never fill the page and hide one that really waits.
   * An operation that cannot be asked is listed (it may still wait).
   */
  async listUnknowns(
    limit: number,
  ): Promise<Array<{ operation_id: string; run_id: string; tool: string; since: string }>> {
    const tenantId = this.tenant()?.id;
    if (!tenantId || !this.store.exists("unknowns")) return [];
    this.unknownsTable();
    type Row = { operation_id: string; run_id: string; tool: string; since: number; seq: number };
    const listed: Row[] = [];
    let after: Row | null = null;
    while (listed.length < limit) {
      const batch: Row[] = this.store.all<Row>(
        `SELECT operation_id, run_id, tool, since, seq FROM unknowns WHERE open = 1
         AND (since > ? OR (since = ? AND operation_id > ?)) ORDER BY since, operation_id LIMIT ?`,
        after?.since ?? -1,
        after?.since ?? -1,
        after?.operation_id ?? "",
        limit - listed.length,
      );
      if (batch.length === 0) break;
      const waits = await Promise.all(
        batch.map(async (row) => {
          const view = await ask(() => operationStub(this.env, row.operation_id).get(tenantId, 0));
          if (!view.answered) return true;
          return view.value.ok && view.value.value.phase === "outcome_unknown";
        }),
      );
      batch.forEach((row, index) => {
        if (waits[index]) listed.push(row);
        // Only if no delivery changed the row meanwhile (the questions above were awaited).
        else
          this.store.run(
            "UPDATE unknowns SET open = 0, closed_at = ? WHERE operation_id = ? AND seq = ? AND open = 1",
            Date.now(),
            row.operation_id,
            row.seq,
          );
      });
      after = batch.at(-1)!;
    }
    return listed.map(({ seq: _seq, since, ...row }) => ({
      ...row,
      since: new Date(since).toISOString(),
    }));
  }

  /** The unknowns table, with the columns added after its first version (once per instance). */
  private unknownsTable(): void {
    this.store.ensureSchema();
    if (this.unknownsMigrated) return;
    const columns = this.ctx.storage.sql.exec("SELECT * FROM unknowns LIMIT 0").columnNames;
    if (!columns.includes("seq"))
      for (const column of [
        "seq INTEGER NOT NULL DEFAULT 0",
        "open INTEGER NOT NULL DEFAULT 1",
        "closed_at INTEGER",
      ])
        this.store.run(`ALTER TABLE unknowns ADD COLUMN ${column}`);
    this.unknownsMigrated = true;
  }
  private unknownsMigrated = false;

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
    const manifests = this.store.exists("tools")
      ? names.filter(
          (name) => this.store.one("SELECT name FROM tools WHERE name = ?", name) !== null,
        )
      : [];
    return names.filter((name) => manifests.includes(name) || CODE_TOOLS[name] !== undefined);
  }

  private toolRow(name: string): ToolRow | null {
    return this.store.exists("tools")
      ? this.store.one<ToolRow>("SELECT * FROM tools WHERE name = ?", name)
      : null;
  }

  private verificationRow(name: string): Verification | null {
    const row = this.store.exists("verifications")
      ? this.store.one<{ data: string }>("SELECT data FROM verifications WHERE name = ?", name)
      : null;
    return row ? (JSON.parse(row.data) as Verification) : null;
  }

  private async toRecord(row: ToolRow): Promise<ToolRecord> {
    const manifest = JSON.parse(row.manifest) as unknown;
    return {
      name: row.name,
      manifest,
      version: row.version,
      updated_at: new Date(row.updated_at).toISOString(),
      verification: verificationFor(
        this.verificationRow(row.name),
        await verificationSettingsHash(manifest),
      ),
    };
  }

  private secretRow(name: string): SecretRow | null {
    return this.store.exists("secrets")
      ? this.store.one<SecretRow>("SELECT * FROM secrets WHERE name = ?", name)
      : null;
  }

  private secretsKey(): Result<string, SecretsError> {
    const key = this.env.TOOLGATE_SECRETS_KEY;
    return key
      ? ok(key)
      : err({
          code: "misconfigured",
          detail:
            "TOOLGATE_SECRETS_KEY is not set for this deployment (wrangler secret put TOOLGATE_SECRETS_KEY)",
        });
  }

  private tenant(): { id: string } | null {
    return this.store.exists("tenant")
      ? this.store.one<{ id: string }>("SELECT id FROM tenant")
      : null;
  }
}

const toSecretRecord = (row: SecretRow): SecretRecord => ({
  name: row.name,
  fingerprint: row.fingerprint,
  created_at: new Date(row.created_at).toISOString(),
  updated_at: new Date(row.updated_at).toISOString(),
});
