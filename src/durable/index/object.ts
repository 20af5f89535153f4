// IndexObject: one per tenant, the tenant index (issue 20, DESIGN "The tenant plane"): fed in
// batches by the EVENTS queue consumer (src/events/consumer.ts), read by GET /v1/runs,
// /v1/operations, /v1/overview and the console's overview. Never written on a turn's path and never
// read by the engine: losing it loses lists and charts, never an outcome. Rebuildable from the
// objects (rebuild.ts). Its own SQLite: one tenant's volume cannot slow another tenant's queries.
import { DurableObject } from "cloudflare:workers";
import type { ToolgateEvent } from "../../domain/journal/events.ts";
import { indexPatch, type IndexOp } from "../../domain/index-feed.ts";
import type { Env } from "../env.ts";
import { SqlStore } from "../store/sql-store.ts";
import { overview, type Overview } from "./overview.ts";
import * as Q from "./queries.ts";
import { retentionMs } from "../../config.ts";
import { rebuilding, rebuildStep, type RebuildReport } from "./rebuild.ts";
import {
  dropRows,
  ensureIndexColumns,
  INDEX_SCHEMA,
  tombstoneKeepMs,
  upsertOp,
  upsertRun,
} from "./write.ts";

export class IndexObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, INDEX_SCHEMA);
  /** The rebuild step under way (a call and the alarm never run two at once). */
  private step: Promise<RebuildReport> | null = null;

  /** One queue batch of this tenant's events, in one transaction (idempotent: a redelivery changes nothing). */
  async ingest(tenantId: string, events: ToolgateEvent[]): Promise<{ ok: true }> {
    this.store.ensureSchema();
    ensureIndexColumns(this.store);
    // Older than a tombstone is kept: it may name a pruned row whose tombstone is gone (write.ts).
    const oldestMs = Date.now() - tombstoneKeepMs(retentionMs(this.env));
    this.store.transaction(() => {
      // One operation's steps in this batch are written once (write.ts upsertOp folds them in order).
      const ops = new Map<string, IndexOp[]>();
      for (const event of events) {
        if (event.tenant_id !== tenantId || event.at_ms < oldestMs) continue;
        const patch = indexPatch(event);
        if (patch.run) upsertRun(this.store, tenantId, patch.run);
        if (patch.op)
          ops.set(patch.op.operation_id, [...(ops.get(patch.op.operation_id) ?? []), patch.op]);
      }
      for (const steps of ops.values()) upsertOp(this.store, ...steps);
    });
    return { ok: true };
  }

  /** Retention pruned these operations or runs: their rows go (and stay gone). */
  async drop(ids: { operations: string[]; runs: string[] }): Promise<{ ok: true }> {
    this.store.ensureSchema();
    ensureIndexColumns(this.store);
    const keepMs = tombstoneKeepMs(retentionMs(this.env));
    this.store.transaction(() => dropRows(this.store, ids, Date.now(), keepMs));
    return { ok: true };
  }

  async listOperations(query: Q.OpQuery): Promise<Q.Page<Q.OpItem> | null> {
    return this.ready() ? Q.listOperations(this.store, query) : { items: [], next_cursor: null };
  }

  async listRuns(query: Q.RunQuery): Promise<Q.Page<Q.RunItem> | null> {
    return this.ready()
      ? Q.listRuns(this.store, query, Date.now())
      : { items: [], next_cursor: null };
  }

  async overview(sinceMs: number): Promise<Overview> {
    if (this.ready()) {
      ensureIndexColumns(this.store);
      return overview(this.store, sinceMs);
    }
    return {
      since: new Date(sinceMs).toISOString(),
      queues: { awaiting_approval: 0, outcome_unknown: 0 },
      runs: 0,
      operations: {},
      tools: [],
      series: [],
      shadow: { operations: {}, tools: [] },
    };
  }

  /**
   * The rows again from the objects (rebuild.ts): starts a rebuild, or takes the next step of the
   * one under way, and reports it. Rows are replaced in place, never emptied first; rows the feed
   * writes meanwhile are merged by the same rules (newest wins).
   */
  async rebuild(tenantId: string): Promise<RebuildReport> {
    this.store.ensureSchema();
    ensureIndexColumns(this.store);
    this.step ??= rebuildStep(this.env, this.store, this.ctx.storage, tenantId, Date.now()).finally(
      () => (this.step = null),
    );
    return this.step;
  }

  /** The next step of a rebuild under way (its only use of the alarm). */
  override async alarm(): Promise<void> {
    const tenantId = rebuilding(this.store);
    if (tenantId) await this.rebuild(tenantId);
  }

  /** Read paths never create storage: an index never fed answers empty. */
  private ready(): boolean {
    return this.store.exists("idx_ops") && this.store.exists("idx_runs");
  }
}
