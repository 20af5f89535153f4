// LimitObject: one per (tenant, limit across runs, subject) — issue 21. A thin shell around
// domain/limit/window.ts: it loads the reservations that count (held, inside the window) and this
// operation's own row, asks the core, and writes what it returns in one transaction. Single-threaded
// per object and no await inside a reserve, so concurrent reserves never overshoot. Reservations
// that never reached their operation's log (a crash between reserve and the start's commit) are
// swept by the alarm, which asks the operation (sweep.ts). Nothing here throws across the stub.
import { DurableObject } from "cloudflare:workers";
import {
  decideRelease,
  decideReserve,
  usageOf,
  type Reservation,
} from "../../domain/limit/window.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Env } from "../env.ts";
import { LIMIT_SCHEMA } from "../store/limit-rows.ts";
import { SqlStore } from "../store/sql-store.ts";
import type { LimitError, LimitUsage, ReserveReply, ReserveRequest } from "./contracts.ts";
import { sweepUnconfirmed, SWEEP_AFTER_MS } from "./sweep.ts";

type Meta = { tenant_id: string; name: string; subject: string; max: number; window_ms: number };
type Row = { operation_id: string; amount: number; at_ms: number; state: string };

export class LimitObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, LIMIT_SCHEMA);
  /**
   * Every row of `reservation` (the window's rows, and released ones until they age out), read once
   * per instance and kept in step with each write below: a reserve reads no row, however many the
   * window holds (it read them all before). Dropped on a rollback; this object is its table's only
   * writer, so nothing else can make it stale.
   */
  private cached: Map<string, Reservation> | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store.onRollback(() => (this.cached = null));
  }

  async reserve(req: ReserveRequest): Promise<Result<ReserveReply, LimitError>> {
    const meta = this.meta();
    if (meta && meta.tenant_id !== req.tenantId) return err({ code: "not_found" });
    const nowMs = Date.now();
    return ok(
      this.store.transaction((): ReserveReply => {
        this.store.ensureSchema();
        if (!meta || meta.max !== req.max || meta.window_ms !== req.windowMs)
          this.store.run(
            "INSERT OR REPLACE INTO limit_meta (k, tenant_id, name, subject, max, window_ms) VALUES (1, ?, ?, ?, ?, ?)",
            req.tenantId,
            req.name,
            req.subject,
            req.max,
            req.windowMs,
          );
        const decision = decideReserve(this.rows(req.windowMs, nowMs, req.operationId), req, nowMs);
        if (decision.kind === "refused") return decision;
        if (decision.already)
          this.store.run(
            "UPDATE reservation SET touched = touched + 1 WHERE operation_id = ? AND confirmed = 0",
            req.operationId,
          );
        else {
          this.store.run(
            "INSERT OR REPLACE INTO reservation (operation_id, amount, at_ms, state, confirmed, touched) VALUES (?, ?, ?, 'held', 0, 0)",
            decision.row.operationId,
            decision.row.amount,
            decision.row.atMs,
          );
          // Rows that left the window never count again (deleted only when there are some: the
          // DELETE reads the whole table).
          const cutoff = nowMs - req.windowMs;
          const all = this.all();
          all.set(decision.row.operationId, decision.row);
          const expired = [...all.values()].filter((row) => row.atMs <= cutoff);
          if (expired.length > 0) {
            this.store.run("DELETE FROM reservation WHERE at_ms <= ?", cutoff);
            for (const row of expired) all.delete(row.operationId);
          }
          this.armSweep(nowMs);
        }
        const { kind, already, over, usage } = decision;
        return { kind, already, over, usage };
      }),
    );
  }

  /** Nothing was applied: the reservation no longer counts. Idempotent. */
  async release(tenantId: string, operationId: string): Promise<Result<true, LimitError>> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return ok(true);
    const mine = this.all().get(operationId);
    const released = decideRelease(mine ? [mine] : [], operationId);
    if (released) {
      this.store.run(
        "UPDATE reservation SET state = 'released' WHERE operation_id = ?",
        operationId,
      );
      this.all().set(operationId, released);
    }
    return ok(true);
  }

  async usage(tenantId: string): Promise<Result<LimitUsage, LimitError>> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return err({ code: "not_found" });
    const nowMs = Date.now();
    const usage = usageOf(this.rows(meta.window_ms, nowMs, null), meta.max, meta.window_ms, nowMs);
    return ok({
      name: meta.name,
      subject: meta.subject,
      max: meta.max,
      window_ms: meta.window_ms,
      used: usage.used,
      remaining: usage.remaining,
      held: usage.held,
      next_free_at: usage.nextFreeAtMs === null ? null : new Date(usage.nextFreeAtMs).toISOString(),
    });
  }

  /** Reservations never confirmed by their operation are asked about, then kept or released. */
  override async alarm(): Promise<void> {
    this.sweepArmed = false;
    const meta = this.meta();
    if (!meta) return;
    const next = await sweepUnconfirmed(
      this.env,
      this.store,
      meta.tenant_id,
      meta.name,
      meta.subject,
      (operationId) => this.reread(operationId),
    );
    if (next !== null) {
      this.sweepArmed = true;
      await this.ctx.storage.setAlarm(next);
    }
  }

  private sweepArmed = false;
  /** The sweep runs a while after a new reservation (once armed, this instance does not push it later). */
  private armSweep(nowMs: number): void {
    if (this.sweepArmed) return;
    this.sweepArmed = true;
    void this.ctx.storage.setAlarm(nowMs + SWEEP_AFTER_MS);
  }

  private meta(): Meta | null {
    if (!this.store.exists("limit_meta")) return null;
    return this.store.one<Meta>(
      "SELECT tenant_id, name, subject, max, window_ms FROM limit_meta WHERE k = 1",
    );
  }

  /** The held rows inside the window, plus `operationId`'s own row whatever its state. */
  private rows(windowMs: number, nowMs: number, operationId: string | null): Reservation[] {
    const out: Reservation[] = [];
    for (const row of this.all().values())
      if ((row.state === "held" && row.atMs > nowMs - windowMs) || row.operationId === operationId)
        out.push(row);
    return out;
  }

  private all(): Map<string, Reservation> {
    if (this.cached) return this.cached;
    const rows = this.store.exists("reservation")
      ? this.store.all<Row>("SELECT operation_id, amount, at_ms, state FROM reservation")
      : [];
    this.cached = new Map(rows.map((row) => [row.operation_id, rowOf(row)]));
    return this.cached;
  }

  /** One row as the table now holds it (after a write the sweep made). */
  private reread(operationId: string): void {
    if (!this.cached) return;
    const row = this.store.one<Row>(
      "SELECT operation_id, amount, at_ms, state FROM reservation WHERE operation_id = ?",
      operationId,
    );
    if (row) this.cached.set(operationId, rowOf(row));
    else this.cached.delete(operationId);
  }
}

const rowOf = (row: Row): Reservation => ({
  operationId: row.operation_id,
  amount: row.amount,
  atMs: row.at_ms,
  state: row.state === "released" ? "released" : "held",
});
