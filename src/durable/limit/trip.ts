// A tripwire's side of its counter (issue 34 item 2): the LimitObject keyed `tripwire:<id>` +
// subject counts like any limit across runs; this module keeps its trip. A reserve that would go
// above the threshold (or, for failure_rate, an outcome that makes the share go above it) trips it
// in the SAME transaction (`trip_state`); from then every reserve answers "tripped" (`trip_held`:
// which operations it told so, so a repeated reserve answers the same) until the freeze is lifted.
// The freeze is made at the tenant with the trip's deterministic id (createFreeze, once), before
// any "tripped" is answered: a call never holds on a freeze that does not exist yet. Made neither
// by the crossing reserve nor a later one (a crash in between), the alarm makes it. A lift
// (`untrip`, told by the tenant) re-arms the tripwire: it counts afresh from the lift. The tell is
// the fast path: while tripped, each reserve first asks the tenant whether the freeze was lifted
// (`recheckLift`), so a lost tell never leaves a tripwire stopping calls for ever.
import { sha256Hex } from "../../domain/canonical-json.ts";
import type { Reservation } from "../../domain/limit/window.ts";
import {
  tripFreezeOf,
  tripsOnRate,
  type RateOutcome,
  type TripSpec,
} from "../../domain/tripwire.ts";
import type { Freeze } from "../../domain/freeze.ts";
import type { Env } from "../env.ts";
import { decodeFreeze, decodeTripSpec } from "../store/freeze-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantStub } from "../stubs.ts";

export const TRIP_SCHEMA = `
CREATE TABLE IF NOT EXISTS trip_state (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, subject TEXT NOT NULL, spec TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0, tripped INTEGER NOT NULL DEFAULT 0, freeze TEXT, freeze_made INTEGER NOT NULL DEFAULT 0, armed_since_ms INTEGER NOT NULL DEFAULT 0, tripped_by TEXT);
CREATE TABLE IF NOT EXISTS trip_held (operation_id TEXT PRIMARY KEY, freeze_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trip_outcome (operation_id TEXT PRIMARY KEY, failed INTEGER NOT NULL, at_ms INTEGER NOT NULL);`;

/** Made only by a tripwire's counter (an ordinary limit never writes them: lazy in its store). */
export const TRIP_TABLES = ["trip_state", "trip_held", "trip_outcome"] as const;

type StateRow = {
  tenant_id: string;
  subject: string;
  spec: string;
  n: number;
  tripped: number;
  freeze: string | null;
  freeze_made: number;
  armed_since_ms: number;
  tripped_by: string | null;
};
/**
 * `trip_state` decoded (store/freeze-rows.ts). A spec or freeze that does not decode throws: the
 * reserve fails, so the call starts nothing (`unavailable`) — a trip nobody can read never lets a
 * call by uncounted, and never answers "tripped" on a freeze it cannot name.
 */
type State = Omit<StateRow, "spec" | "freeze"> & {
  spec: TripSpec;
  freeze: Freeze | null;
  /** The stored text of `freeze`: what the compare-and-set on "made" compares. */
  freezeText: string | null;
};
const stateOf = (row: StateRow): State => ({
  ...row,
  spec: decodeTripSpec(row.spec),
  freeze: row.freeze === null ? null : decodeFreeze(row.freeze, "trip_state freeze"),
  freezeText: row.freeze,
});

/** What a reserve on a tripwire's counter answers beside the reservation. */
export type TripAnswer = { freeze: Freeze; made: boolean } | null;

/** A freeze not yet made is asked again this much later by the alarm. */
export const TRIP_RETRY_MS = 5_000;

export class Trip {
  constructor(
    private readonly store: SqlStore,
    private readonly env: Env,
  ) {}

  private state(): State | null {
    if (!this.store.exists("trip_state")) return null;
    const row = this.store.one<StateRow>("SELECT * FROM trip_state WHERE k = 1");
    return row && stateOf(row);
  }

  /** The reservations that count toward the next trip: those made since the last lift. */
  sinceArmed(rows: Reservation[], operationId: string): Reservation[] {
    const since = this.state()?.armed_since_ms ?? 0;
    return since === 0
      ? rows
      : rows.filter((row) => row.atMs >= since || row.operationId === operationId);
  }

  /**
   * Inside the reserve's transaction, after its row is written: whether this call is stopped, and
   * the trip it makes when `over` (the reservation went above the threshold). `already`: this
   * operation reserved before — it gets the answer it got then.
   */
  onReserve(
    tenantId: string,
    subject: string,
    spec: TripSpec,
    subjectHash: string,
    operationId: string,
    already: boolean,
    over: boolean,
    nowMs: number,
  ): TripAnswer {
    this.ensure(tenantId, subject, spec);
    const held = this.store.one<{ freeze_id: string }>(
      "SELECT freeze_id FROM trip_held WHERE operation_id = ?",
      operationId,
    );
    const state = this.state()!;
    if (already) return held ? this.answerFor(state, held.freeze_id) : null;
    if (state.tripped === 0) {
      if (!over || spec.measure === "failure_rate") return null;
      this.trip(state, spec, subjectHash, operationId, nowMs);
    }
    const now = this.state()!;
    const freeze = now.freeze!;
    this.store.run(
      "INSERT OR IGNORE INTO trip_held (operation_id, freeze_id) VALUES (?, ?)",
      operationId,
      freeze.id,
    );
    return { freeze, made: now.freeze_made === 1 };
  }

  private answerFor(state: State, freezeId: string): TripAnswer {
    const { freeze } = state;
    if (!freeze || freeze.id !== freezeId) return null;
    return { freeze, made: state.freeze_made === 1 };
  }

  /**
   * The state row, written only when absent or when the tripwire's definition changed: a covered
   * call writes its reservation, not this row again.
   */
  private ensure(tenantId: string, subject: string, spec: TripSpec): void {
    for (const table of TRIP_TABLES) this.store.ensureTable(table);
    const stored = this.store.one<{ spec: string }>("SELECT spec FROM trip_state WHERE k = 1");
    if (stored?.spec === JSON.stringify(spec)) return;
    this.store.run(
      "INSERT INTO trip_state (k, tenant_id, subject, spec) VALUES (1, ?, ?, ?) ON CONFLICT (k) DO UPDATE SET spec = excluded.spec",
      tenantId,
      subject,
      JSON.stringify(spec),
    );
  }

  /** The trip itself: the next trip number, its freeze (deterministic id), not yet made. */
  private trip(
    state: State,
    spec: TripSpec,
    subjectHash: string,
    byOperation: string,
    nowMs: number,
  ): void {
    const n = state.n + 1;
    const freeze = tripFreezeOf(spec, state.subject, subjectHash, n, nowMs);
    this.store.run(
      "UPDATE trip_state SET n = ?, tripped = 1, freeze = ?, freeze_made = 0, tripped_by = ? WHERE k = 1",
      n,
      JSON.stringify(freeze),
      byOperation,
    );
  }

  /**
   * failure_rate (issue 34): one operation's recorded outcome, kept once (a repeated delivery
   * changes nothing); the share is asked then, and trips in this transaction.
   */
  onOutcome(
    operationId: string,
    failed: boolean,
    windowMs: number,
    subjectHash: string,
    nowMs: number,
  ): boolean {
    const state = this.state();
    if (!state) return false;
    const { spec } = state;
    if (spec.measure !== "failure_rate") return false;
    this.store.run(
      "INSERT OR IGNORE INTO trip_outcome (operation_id, failed, at_ms) VALUES (?, ?, ?)",
      operationId,
      failed ? 1 : 0,
      nowMs,
    );
    this.store.run("DELETE FROM trip_outcome WHERE at_ms <= ?", nowMs - windowMs);
    if (state.tripped === 1) return false;
    const outcomes = this.store
      .all<{ failed: number; at_ms: number }>("SELECT failed, at_ms FROM trip_outcome")
      .map((row): RateOutcome => ({ failed: row.failed === 1, atMs: row.at_ms }));
    if (!tripsOnRate(outcomes, spec, windowMs, state.armed_since_ms, nowMs).trips) return false;
    this.trip(state, spec, subjectHash, operationId, nowMs);
    return true;
  }

  /** The tenant lifted this trip's freeze: the tripwire counts afresh from now. Idempotent. */
  untrip(freezeId: string, nowMs: number): boolean {
    const state = this.state();
    if (!state || state.tripped === 0) return false;
    if (state.freeze?.id !== freezeId) return false;
    this.store.run(
      "UPDATE trip_state SET tripped = 0, armed_since_ms = ? WHERE k = 1",
      Math.max(nowMs, state.armed_since_ms + 1),
    );
    return true;
  }

  private rechecking: Promise<void> | null = null;
  /**
   * While tripped (its freeze made), before a reserve answers "tripped": asks the tenant whether
   * the freeze was lifted, and re-arms if so — so a lift whose tell (`untrip`) was lost does not
   * stop calls for ever. Not tripped: no RPC. The tenant unreachable: stays tripped (fail closed).
   * Concurrent reserves share one ask.
   */
  recheckLift(): Promise<void> {
    const state = this.state();
    if (state?.tripped !== 1 || state.freeze_made !== 1 || !state.freeze) return Promise.resolve();
    const { freeze, tenant_id: tenantId } = state;
    this.rechecking ??= (async () => {
      try {
        const lifted = await tenantStub(this.env, tenantId).tripLifted(tenantId, freeze.id);
        if (!lifted.ok) throw new Error(lifted.error.code);
        if (lifted.value) this.store.transaction(() => this.untrip(freeze.id, Date.now()));
      } catch (error) {
        console.error(
          "tripwire: the tenant was not asked about its lift",
          freeze.id,
          String(error),
        );
      }
    })().finally(() => {
      this.rechecking = null;
    });
    return this.rechecking;
  }

  private making: Promise<boolean> | null = null;
  /**
   * Makes the trip's freeze at the tenant if it is not made yet (the tenant makes one id once), and
   * marks it made. Concurrent callers share one ask. False: not made (asked again by the alarm).
   */
  makeFreeze(): Promise<boolean> {
    this.making ??= this.askTenant().finally(() => {
      this.making = null;
    });
    return this.making;
  }

  private async askTenant(): Promise<boolean> {
    const state = this.state();
    if (!state?.freeze) return true;
    if (state.freeze_made === 1) return true;
    const { freeze, spec } = state;
    try {
      const made = await tenantStub(this.env, state.tenant_id).tripFreeze(state.tenant_id, {
        freeze,
        tripwireId: spec.tripwireId,
        subject: state.subject,
        measure: spec.measure,
        threshold: spec.threshold,
        trippedBy: state.tripped_by,
      });
      if (!made.ok) throw new Error(made.error.code);
    } catch (error) {
      console.error("tripwire: its freeze could not be made yet", freeze.id, String(error));
      return false;
    }
    this.store.run(
      "UPDATE trip_state SET freeze_made = 1 WHERE k = 1 AND freeze = ?",
      state.freezeText,
    );
    return true;
  }

  /** Whether a freeze is still to be made (the alarm's part). */
  pending(): boolean {
    const state = this.state();
    return state !== null && state.freeze !== null && state.freeze_made === 0;
  }
}

/** The subject's hash in a trip's freeze id (ids stay short and carry no customer id). */
export const subjectHashOf = (subject: string): Promise<string> => sha256Hex(subject);
