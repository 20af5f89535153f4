// LimitObject: one per (tenant, limit across runs, subject key) — issue 21. A thin shell around
// domain/limit/window.ts: it loads the reservations, asks the core, and writes what it returns in
// one transaction. Single-threaded per object and no await inside a reserve, so concurrent reserves
// never overshoot. A reservation counts until one window after its operation was recorded, which
// the sweep learns by asking the operation (sweep.ts; it also releases reservations that never
// reached their operation's log). A row is deleted only once no window this limit was ever asked
// with can count it (audit N4: two definitions of one name, or a window shortened, never make the
// longer window forget). A new object first adopts the held reservations of the bucket its subject
// had before subjects were namespaced (audit N7). Nothing here throws across the stub.
import { DurableObject } from "cloudflare:workers";
import { legacySubject } from "../../domain/limit/claims.ts";
import {
  decideRelease,
  decideReserve,
  decideResize,
  firstAskAtMs,
  forgettable,
  usageOf,
  type Reservation,
} from "../../domain/limit/window.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Env } from "../env.ts";
import { SqlStore } from "../store/sql-store.ts";
import { limitStub } from "../stubs.ts";
import type {
  HandedOver,
  LimitError,
  LimitUsage,
  ReserveReply,
  ReserveRequest,
  UseRow,
} from "./contracts.ts";
import { sweep } from "./sweep.ts";
import { subjectHashOf, Trip, TRIP_RETRY_MS, TRIP_SCHEMA, TRIP_TABLES } from "./trip.ts";

// A limit across runs (issue 21): one meta row (whose it is, the last definition it was asked with,
// the longest window it was ever asked with) and one row per operation that reserved, keyed by
// operation id (so reserving again is a no-op). `confirmed`: the operation was seen holding it;
// `touched`: reserved again while held (a sweep that asked before that must not release it);
// `recorded_at_ms`: when its operation was recorded, once the sweep learned it (null: not yet — it
// counts); `ask_at_ms`: when the sweep asks the operation next.
const LIMIT_SCHEMA = `
CREATE TABLE IF NOT EXISTS limit_meta (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, name TEXT NOT NULL, subject TEXT NOT NULL, max REAL NOT NULL, window_ms INTEGER NOT NULL, longest_window_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS reservation (operation_id TEXT PRIMARY KEY, amount REAL NOT NULL, at_ms INTEGER NOT NULL, state TEXT NOT NULL, confirmed INTEGER NOT NULL DEFAULT 0, touched INTEGER NOT NULL DEFAULT 0, recorded_at_ms INTEGER, ask_at_ms INTEGER NOT NULL DEFAULT 0);`;

/** Added to older objects' tables on their next write (SqlStore.ensureColumn). */
const LIMIT_ADDED_COLUMNS = {
  limit_meta: ["longest_window_ms INTEGER NOT NULL DEFAULT 0"],
  reservation: ["recorded_at_ms INTEGER", "ask_at_ms INTEGER NOT NULL DEFAULT 0"],
} as const;

type Meta = {
  tenant_id: string;
  name: string;
  subject: string;
  max: number;
  window_ms: number;
  longest_window_ms: number;
};
type Row = {
  operation_id: string;
  amount: number;
  at_ms: number;
  state: string;
  recorded_at_ms: number | null;
};

export class LimitObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, LIMIT_SCHEMA + TRIP_SCHEMA, TRIP_TABLES);
  /** A tripwire's trip (trip.ts): only a counter keyed `tripwire:<id>` writes its tables. */
  private readonly trip = new Trip(this.store, this.env);
  /**
   * Every row of `reservation` (the counting ones, and the rest until they are forgotten), read
   * once per instance and kept in step with each write below: a reserve reads no row, however many
   * the window holds (it read them all before). Dropped on a rollback; this object is its table's
   * only writer, so nothing else can make it stale.
   */
  private cached: Map<string, Reservation> | null = null;
  private migrated = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store.onRollback(() => {
      this.cached = null;
      this.migrated = false;
    });
  }

  async reserve(req: ReserveRequest): Promise<Result<ReserveReply, LimitError>> {
    const known = this.meta();
    if (known && known.tenant_id !== req.tenantId) return err({ code: "not_found" });
    if (!known) await this.adopt(req.tenantId, req.name, req.subject);
    const subjectHash = req.trip ? await subjectHashOf(req.subject) : "";
    // A tripped counter first asks whether its freeze was lifted (a lost tell; no RPC otherwise).
    if (req.trip && known) await this.trip.recheckLift();
    const nowMs = Date.now();
    const reply = this.store.transaction((): ReserveReply => {
      this.migrate(nowMs);
      // Read again only after the adoption's await (another first reserve may have written it).
      const meta = known ?? this.meta();
      const longest = Math.max(meta?.longest_window_ms ?? 0, meta?.window_ms ?? 0, req.windowMs);
      if (
        !meta ||
        meta.max !== req.max ||
        meta.window_ms !== req.windowMs ||
        meta.longest_window_ms !== longest
      )
        this.store.run(
          "INSERT OR REPLACE INTO limit_meta (k, tenant_id, name, subject, max, window_ms, longest_window_ms) VALUES (1, ?, ?, ?, ?, ?, ?)",
          req.tenantId,
          req.name,
          req.subject,
          req.max,
          req.windowMs,
          longest,
        );
      const rows = this.rows(req.operationId);
      const decision = (req.resize ? decideResize : decideReserve)(
        req.trip ? this.trip.sinceArmed(rows, req.operationId) : rows,
        req,
        nowMs,
      );
      if (decision.kind === "refused") return decision;
      const resized =
        req.resize && !decision.already && this.all().get(req.operationId)?.state === "held";
      if (resized) {
        // An edit's new amount (issue 35 item 2): the row keeps its time and sweep schedule.
        this.store.run(
          "UPDATE reservation SET amount = ?, touched = touched + 1 WHERE operation_id = ?",
          decision.row.amount,
          req.operationId,
        );
        this.all().set(req.operationId, decision.row);
      } else if (decision.already)
        this.store.run(
          "UPDATE reservation SET touched = touched + 1 WHERE operation_id = ? AND confirmed = 0",
          req.operationId,
        );
      else {
        const askAtMs = firstAskAtMs(nowMs, req.windowMs);
        this.store.run(
          "INSERT OR REPLACE INTO reservation (operation_id, amount, at_ms, state, confirmed, touched, recorded_at_ms, ask_at_ms) VALUES (?, ?, ?, 'held', 0, 0, NULL, ?)",
          decision.row.operationId,
          decision.row.amount,
          decision.row.atMs,
          askAtMs,
        );
        this.all().set(decision.row.operationId, decision.row);
        this.forget(longest, nowMs);
        this.armSweep(askAtMs);
      }
      const { kind, already, over, usage } = decision;
      // A tripwire's counter: the trip (if this reservation crossed it) commits with it.
      const tripped = req.trip
        ? this.trip.onReserve(
            req.tenantId,
            req.subject,
            req.trip,
            subjectHash,
            req.operationId,
            already,
            over,
            nowMs,
          )
        : null;
      if (tripped) return { kind: "tripped", freeze: tripped.freeze, made: tripped.made };
      return { kind, already, over, usage };
    });
    // "tripped" is answered only once its freeze exists at the tenant (made here, or by the alarm).
    if (reply.kind === "tripped" && !reply.made) {
      const made = await this.trip.makeFreeze();
      if (!made) void this.ctx.storage.setAlarm(Date.now() + TRIP_RETRY_MS);
      return ok({ ...reply, made });
    }
    return ok(reply);
  }

  /**
   * failure_rate (issue 34): an operation this tripwire counted was recorded (its outbox, at least
   * once); `failed`: it definitely failed. May trip, then makes the freeze. Idempotent.
   */
  async outcome(
    tenantId: string,
    operationId: string,
    failed: boolean,
  ): Promise<Result<true, LimitError>> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return ok(true);
    const subjectHash = await subjectHashOf(meta.subject);
    const nowMs = Date.now();
    const tripped = this.store.transaction(() =>
      this.trip.onOutcome(operationId, failed, meta.window_ms, subjectHash, nowMs),
    );
    if (tripped && !(await this.trip.makeFreeze()))
      await this.ctx.storage.setAlarm(Date.now() + TRIP_RETRY_MS);
    return ok(true);
  }

  /** The tenant lifted this counter's trip freeze: the tripwire re-arms, counting from now. */
  async untrip(tenantId: string, freezeId: string): Promise<Result<boolean, LimitError>> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return err({ code: "not_found" });
    return ok(this.store.transaction(() => this.trip.untrip(freezeId, Date.now())));
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
    const usage = usageOf(this.rows(null), meta.max, meta.window_ms, nowMs);
    return ok({
      name: meta.name,
      subject: meta.subject,
      max: meta.max,
      window_ms: meta.window_ms,
      used: usage.used,
      remaining: usage.remaining,
      held: usage.held,
      waiting: usage.waiting,
      next_free_at: usage.nextFreeAtMs === null ? null : new Date(usage.nextFreeAtMs).toISOString(),
    });
  }

  /**
   * Every reservation this counter keeps (a standing grant's uses, issue 35): each operation once,
   * with its amount, when it reserved and whether it still counts. Another tenant's ask gets none.
   */
  async uses(tenantId: string): Promise<UseRow[]> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return [];
    return [...this.all().values()]
      .sort((a, b) => a.atMs - b.atMs)
      .map(({ operationId, amount, atMs, state }) => ({ operationId, amount, atMs, state }));
  }

  /**
   * Asked by the object that replaces this one (same tenant, limit and subject, its key namespaced
   * by kind): the reservations held here, which it counts from then on. Read-only; an object never
   * used answers nothing and keeps no storage.
   */
  async handOver(tenantId: string): Promise<HandedOver[]> {
    const meta = this.meta();
    if (!meta || meta.tenant_id !== tenantId) return [];
    return [...this.all().values()]
      .filter((row) => row.state === "held")
      .map(({ operationId, amount, atMs }) => ({ operationId, amount, atMs }));
  }

  /** Each reservation whose operation is not known recorded is asked about when due. */
  override async alarm(): Promise<void> {
    this.sweepAtMs = null;
    const meta = this.meta();
    if (!meta) return;
    this.store.transaction(() => this.migrate(Date.now()));
    // A trip whose freeze is not made yet (the object died between the trip and the tenant's answer).
    if (this.trip.pending() && !(await this.trip.makeFreeze()))
      this.armSweep(Date.now() + TRIP_RETRY_MS);
    const next = await sweep(this.env, this.store, meta, (operationId) => this.reread(operationId));
    // `next` counts every row still to ask, those reserved while the sweep awaited included.
    this.sweepAtMs = null;
    if (next !== null) this.armSweep(next);
  }

  private sweepAtMs: number | null = null;
  /** The sweep runs at `atMs` or earlier (an alarm already set for later is moved). */
  private armSweep(atMs: number): void {
    if (this.sweepAtMs !== null && this.sweepAtMs <= atMs) return;
    this.sweepAtMs = atMs;
    void this.ctx.storage.setAlarm(atMs);
  }

  private adopting: Promise<void> | null = null;
  /**
   * Before its first reservation: the held reservations of the object this subject had before
   * subjects were namespaced, so a deploy loses no live reservation. Their operations are asked at
   * once (their plans name the bare subject: operation/limits.ts limitHoldOf). One RPC per object,
   * ever; concurrent first reserves share it. Throws if it cannot be asked (the start answers
   * `unavailable`, nothing reserved).
   */
  private adopt(tenantId: string, name: string, subject: string): Promise<void> {
    const legacy = legacySubject(subject);
    if (legacy === null) return Promise.resolve();
    this.adopting ??= (async () => {
      const handed = await limitStub(this.env, tenantId, name, legacy).handOver(tenantId);
      if (handed.length === 0) return;
      const nowMs = Date.now();
      this.store.transaction(() => {
        this.migrate(nowMs);
        for (const row of handed)
          this.store.run(
            "INSERT OR IGNORE INTO reservation (operation_id, amount, at_ms, state, confirmed, touched, recorded_at_ms, ask_at_ms) VALUES (?, ?, ?, 'held', 0, 0, NULL, ?)",
            row.operationId,
            row.amount,
            row.atMs,
            nowMs,
          );
      });
      this.cached = null;
      this.armSweep(nowMs);
    })().catch((error: unknown) => {
      this.adopting = null;
      throw error;
    });
    return this.adopting;
  }

  /** The schema, and the columns older objects lack; their rows are then asked about at once. */
  private migrate(nowMs: number): void {
    if (this.migrated) return;
    this.store.ensureSchema();
    let added = false;
    for (const [table, columns] of Object.entries(LIMIT_ADDED_COLUMNS))
      for (const column of columns) added = this.store.ensureColumn(table, column) || added;
    this.migrated = true;
    if (added) {
      this.cached = null;
      this.armSweep(nowMs);
    }
  }

  /** Deletes the rows no window this limit was asked with can count again. */
  private forget(longestWindowMs: number, nowMs: number): void {
    const all = this.all();
    const doomed = [...all.values()].filter((row) => forgettable(row, longestWindowMs, nowMs));
    for (let i = 0; i < doomed.length; i += 50) {
      const ids = doomed.slice(i, i + 50).map((row) => row.operationId);
      this.store.run(
        `DELETE FROM reservation WHERE operation_id IN (${ids.map(() => "?").join(", ")})`,
        ...ids,
      );
      for (const id of ids) all.delete(id);
    }
  }

  private meta(): Meta | null {
    if (!this.store.exists("limit_meta")) return null;
    const longest = this.store.hasColumn("limit_meta", "longest_window_ms")
      ? "longest_window_ms"
      : "0 AS longest_window_ms";
    return this.store.one<Meta>(
      `SELECT tenant_id, name, subject, max, window_ms, ${longest} FROM limit_meta WHERE k = 1`,
    );
  }

  /** The held rows (the core says which count now), plus `operationId`'s own row whatever its state. */
  private rows(operationId: string | null): Reservation[] {
    const out: Reservation[] = [];
    for (const row of this.all().values())
      if (row.state === "held" || row.operationId === operationId) out.push(row);
    return out;
  }

  private all(): Map<string, Reservation> {
    if (this.cached) return this.cached;
    const rows = this.store.exists("reservation")
      ? this.store.all<Row>(`SELECT ${this.columns()} FROM reservation`)
      : [];
    this.cached = new Map(rows.map((row) => [row.operation_id, rowOf(row)]));
    return this.cached;
  }

  /** One row as the table now holds it (after a write the sweep made). */
  private reread(operationId: string): void {
    if (!this.cached) return;
    const row = this.store.one<Row>(
      `SELECT ${this.columns()} FROM reservation WHERE operation_id = ?`,
      operationId,
    );
    if (row) this.cached.set(operationId, rowOf(row));
    else this.cached.delete(operationId);
  }

  private columns(): string {
    const recorded = this.store.hasColumn("reservation", "recorded_at_ms")
      ? "recorded_at_ms"
      : "NULL AS recorded_at_ms";
    return `operation_id, amount, at_ms, state, ${recorded}`;
  }
}

const rowOf = (row: Row): Reservation => ({
  operationId: row.operation_id,
  amount: row.amount,
  atMs: row.at_ms,
  state: row.state === "released" ? "released" : "held",
  recordedAtMs: row.recorded_at_ms,
});
