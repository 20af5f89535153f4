// A tenant's quotas (issue 34 item 4): definitions stored by id (PUT /v1/quotas/{id}), one per key
// (domain/quota/definition.ts quotaConflict: a contradicting second id is refused, nothing stored),
// and the origins its upstreams paused (a 429/503 Retry-After or RateLimit answer, noted by the
// operation that met it). Both travel to operations in the run's tenant facts (facts.ts), so a new
// write asks no quota object unless a quota or a pause concerns its call.
import {
  manifestQuota,
  quotaConflict,
  QuotaDefinition,
  QuotaNumbers,
  type StoredQuota,
} from "../../domain/quota/definition.ts";
import { z } from "zod";
import { decodeManifest } from "../store/tenant-rows.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { decodeWith, parseJson } from "../store/codec.ts";
import type { TenantError } from "./contracts.ts";

export type QuotaRecord = StoredQuota & { updated_at: string };
/** The part of a stored manifest read here: its `quota`, decoded (a row that does not decode is corrupt). */
const ManifestQuota = z.object({ quota: QuotaNumbers.optional() });
/** At most this many paused origins travel in the facts (the latest-ending first). */
const MAX_PAUSES = 200;

export function storedQuotas(store: SqlStore): QuotaRecord[] {
  if (!store.exists("quotas")) return [];
  return store
    .all<{ id: string; definition: string; updated_at: number }>(
      "SELECT id, definition, updated_at FROM quotas ORDER BY id",
    )
    .map((row) => ({
      id: row.id,
      definition: decodeWith(QuotaDefinition, parseJson(row.definition, "quota"), "quota"),
      updated_at: new Date(row.updated_at).toISOString(),
    }));
}

export function putQuota(
  store: SqlStore,
  id: string,
  definition: QuotaDefinition,
): Result<QuotaRecord & { created: boolean }, TenantError> {
  const stored = storedQuotas(store);
  const conflict = quotaConflict(id, definition, [...stored, ...manifestQuotas(store)]);
  if (conflict) return err({ code: "quota_conflict", detail: conflict.detail, quota: conflict.id });
  const nowMs = Date.now();
  store.ensureTable("quotas");
  store.run(
    "INSERT OR REPLACE INTO quotas (id, definition, updated_at) VALUES (?, ?, ?)",
    id,
    JSON.stringify(definition),
    nowMs,
  );
  const created = !stored.some((q) => q.id === id);
  return ok({ id, definition, updated_at: new Date(nowMs).toISOString(), created });
}

/** The quotas the tenant's tool manifests declare (their `quota`, per user and tool). */
function manifestQuotas(store: SqlStore): StoredQuota[] {
  if (!store.exists("tools")) return [];
  return store
    .all<{ name: string; manifest: string }>("SELECT name, manifest FROM tools")
    .flatMap((row) => {
      const { quota } = decodeWith(ManifestQuota, decodeManifest(row.manifest), "tool manifest");
      return quota ? [manifestQuota(row.name, quota)] : [];
    });
}

/** A tool PUT whose manifest `quota` contradicts a stored quota of the same tool (null: none). */
export function quotaConflictOfManifest(
  store: SqlStore,
  tool: string,
  quota: QuotaNumbers,
): Extract<TenantError, { code: "quota_conflict" }> | null {
  const own = manifestQuota(tool, quota);
  const conflict = quotaConflict(own.id, own.definition, storedQuotas(store));
  return conflict && { code: "quota_conflict", detail: conflict.detail, quota: conflict.id };
}

export function deleteQuota(store: SqlStore, id: string): Result<true, TenantError> {
  const removed = store.exists("quotas") ? store.run("DELETE FROM quotas WHERE id = ?", id) : 0;
  return removed > 0 ? ok(true) : err({ code: "not_found", detail: `no quota ${id}` });
}

/** An upstream paused `origin` until `untilMs` (the later of two pauses wins). */
export function noteOriginPause(store: SqlStore, origin: string, untilMs: number): void {
  const nowMs = Date.now();
  store.ensureTable("origin_pauses");
  store.transaction(() => {
    store.run("DELETE FROM origin_pauses WHERE until_ms <= ?", nowMs);
    store.run(
      "INSERT INTO origin_pauses (origin, until_ms) VALUES (?, ?) ON CONFLICT (origin) DO UPDATE SET until_ms = max(until_ms, excluded.until_ms)",
      origin,
      untilMs,
    );
  });
}

/** What the facts carry: the definitions and the origins paused now (at most MAX_PAUSES, latest first). */
export function quotaFacts(
  store: SqlStore,
  nowMs: number,
): { quotas: StoredQuota[]; pausedOrigins: Record<string, number> } {
  const quotas = storedQuotas(store).map(({ id, definition }) => ({ id, definition }));
  const pauses = store.exists("origin_pauses")
    ? store.all<{ origin: string; until_ms: number }>(
        "SELECT origin, until_ms FROM origin_pauses WHERE until_ms > ? ORDER BY until_ms DESC LIMIT ?",
        nowMs,
        MAX_PAUSES,
      )
    : [];
  return { quotas, pausedOrigins: Object.fromEntries(pauses.map((p) => [p.origin, p.until_ms])) };
}
