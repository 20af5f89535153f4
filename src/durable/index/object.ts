// IndexObject: one per tenant, the tenant index (issue 20, DESIGN "The tenant plane"): fed in
// batches by the EVENTS queue consumer (src/events/consumer.ts), read by GET /v1/runs,
// /v1/operations, /v1/overview and the console's overview. Never written on a turn's path and never
// read by the engine: losing it loses lists and charts, never an outcome. Rebuildable from the
// objects (rebuild.ts). Its own SQLite: one tenant's volume cannot slow another tenant's queries.
import { DurableObject } from "cloudflare:workers";
import type { ToolgateEvent } from "../../domain/events.ts";
import { indexPatch } from "../../domain/index-feed.ts";
import type { Env } from "../env.ts";
import { SqlStore } from "../store/sql-store.ts";
import { overview, type Overview } from "./overview.ts";
import * as Q from "./queries.ts";
import { rebuildIndex, type RebuildReport } from "./rebuild.ts";
import { clearDerived, dropRows, INDEX_SCHEMA, upsertOp, upsertRun } from "./write.ts";

export class IndexObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, INDEX_SCHEMA);

  /** One queue batch of this tenant's events, in one transaction (idempotent: a redelivery changes nothing). */
  async ingest(tenantId: string, events: ToolgateEvent[]): Promise<{ ok: true }> {
    this.store.ensureSchema();
    this.store.transaction(() => {
      for (const event of events) {
        if (event.tenant_id !== tenantId) continue;
        const patch = indexPatch(event);
        if (patch.run) upsertRun(this.store, tenantId, patch.run);
        if (patch.op) upsertOp(this.store, patch.op);
      }
    });
    return { ok: true };
  }

  /** Retention pruned these operations or runs: their rows go (and stay gone). */
  async drop(ids: { operations: string[]; runs: string[] }): Promise<{ ok: true }> {
    this.store.ensureSchema();
    this.store.transaction(() => dropRows(this.store, ids, Date.now()));
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
    if (this.ready()) return overview(this.store, sinceMs);
    return {
      since: new Date(sinceMs).toISOString(),
      queues: { awaiting_approval: 0, outcome_unknown: 0 },
      runs: 0,
      operations: {},
      tools: [],
      series: [],
    };
  }

  /**
   * Every derived row again from the objects: each known run's `indexEntry`, then each of its
   * operations'. Rows the feed writes meanwhile are merged by the same rules (newest wins).
   */
  async rebuild(tenantId: string): Promise<RebuildReport> {
    this.store.ensureSchema();
    this.store.transaction(() => clearDerived(this.store));
    return rebuildIndex(this.env, this.store, tenantId);
  }

  /** Read paths never create storage: an index never fed answers empty. */
  private ready(): boolean {
    return this.store.exists("idx_ops") && this.store.exists("idx_runs");
  }
}
