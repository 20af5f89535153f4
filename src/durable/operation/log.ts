// OperationLog: reads the operation's log (op_log). The head is the newest row plus the frozen call
// (row 1, or the row of a person's latest edit while it awaited approval — issue 35 item 2 — each
// version immutable, so read once per instance, deep-frozen); the stored tool is compiled by the
// catalog, and an error (never a throw) if it no longer compiles. `forget()` drops these caches when pruned;
// a pruned log leaves its tombstone (`prunedFor`, `missing`: what a caller is answered).
import type { OperationState, TraceEvent } from "../../domain/operation/index.ts";
import { redactionFor, type Redaction } from "../../domain/redact.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ChainLink } from "../../domain/trace-chain.ts";
import { hostPolicy } from "../../config.ts";
import type { Env } from "../env.ts";
import { compileTool } from "../../tools/catalog.ts";
import {
  decodeFrozenRow,
  decodeInput,
  decodeState,
  decodeTrace,
  UNSENT_EVENTS_COLUMN,
  UNSENT_NOTICES_COLUMN,
} from "../store/operation-rows.ts";
import { deepFreeze } from "../store/codec.ts";
import type { SqlStore } from "../store/sql-store.ts";
import type { FrozenInput } from "../../domain/identity.ts";
import type { FrozenRow, Head, Loaded, OperationError } from "./contracts.ts";

/**
 * One log row's notices not yet taken: its events for the EVENTS queue and its inbox updates and
 * limit releases (each a JSON array; null: none, or taken), and the row's time.
 */
export type Unsent = { events: string | null; notices: string | null; atMs: number };
/** What a step's row carries out (outgoing()): its events, and its notices as outbox rows encode them. */
export type Outgoing = {
  events: readonly unknown[];
  notices: ReadonlyArray<{ kind: string; payload: string }>;
};

export class OperationLog {
  private frozenRow: FrozenRow | null = null;
  /**
   * The newest row (seq, state) and the chain's last link, as this instance appended or first read
   * them: only this object writes its log, and only through append(), so they hold until a rollback
   * (SqlStore.onRollback) or a prune (forget). `undefined`: not known, read it.
   */
  private newest: { seq: number; state: OperationState } | null | undefined = undefined;
  private link: ChainLink | null | undefined = undefined;
  /**
   * Rows with notices not taken (seq → their JSON and time; a part taken is null here before the
   * row is cleared: see taken()); undefined: not read yet.
   */
  private unsent: Map<number, Unsent> | undefined = undefined;
  /** The frozen input decoded (row 1 never changes). */
  private input: FrozenInput | null = null;
  private redactionCache: { id: string; redaction: Redaction } | null = null;
  /** See deliveries(). */
  private reportedKeys: Set<string> | null = null;
  /** The events of the row append() is writing, while it asks what to announce (see events()). */
  private appending: TraceEvent[] | null = null;
  /**
   * Every row's events (their JSON), kept as appended when this instance wrote row 1: a new
   * operation's receipt reads the whole trace (issue 37) without reading back the rows it wrote.
   */
  private written: string[] | undefined = undefined;

  constructor(
    readonly store: SqlStore,
    private readonly env: Env,
  ) {
    store.onRollback(() => this.forget());
  }

  /**
   * The newest log row; read once per instance, then kept as appended (a new operation's ~12
   * head reads per write were each a row read and a JSON.parse). The frozen call is immutable.
   */
  head(): Head | null {
    if (this.newest === undefined) {
      const last = this.store.exists("op_log")
        ? this.store.one<{ seq: number; state: string }>(
            "SELECT seq, state FROM op_log ORDER BY seq DESC LIMIT 1",
          )
        : null;
      this.newest = last ? { seq: last.seq, state: decodeState(last.state) } : null;
    }
    if (!this.newest) return null;
    // The newest version: row 1, or the row of a person's latest edit (issue 35 item 2).
    this.frozenRow ??= decodeFrozenRow(
      this.store.one<{ frozen: string }>(
        "SELECT frozen FROM op_log WHERE frozen IS NOT NULL ORDER BY seq DESC LIMIT 1",
      )!.frozen,
    );
    return { seq: this.newest.seq, state: this.newest.state, frozen: this.frozenRow };
  }

  headFor(tenantId: string): Head | null {
    const head = this.head();
    return head && head.frozen.tenant_id === tenantId ? head : null;
  }

  /**
   * Appends one log row: the state after it and its sealed events (`frozen` for row 1 and for a
   * person's edit: the call's new version).
   * `outgoing` builds what the row carries out (its tenant-plane events, inbox updates and limit
   * releases); it runs once head() is this row (inside the caller's transaction: a rollback forgets
   * it all).
   */
  append(
    seq: number,
    nowMs: number,
    state: OperationState,
    events: TraceEvent[],
    frozen: FrozenRow | null,
    outgoing: () => Outgoing = () => NO_OUTGOING,
  ): void {
    if (frozen) {
      this.frozenRow = deepFreeze(frozen);
      this.input = null;
      this.redactionCache = null;
    }
    if (frozen && seq === 1) {
      // Row 1, written by this instance: nothing was delivered or left unsent yet.
      this.reportedKeys = new Set();
      this.unsent = new Map();
      this.written = [];
    }
    this.newest = { seq, state };
    const last = events.at(-1);
    if (last && typeof last.seq === "number" && typeof last.hash === "string")
      this.link = { seq: last.seq, hash: last.hash };
    else if (events.length > 0) this.link = undefined;
    // What the world is told reads the log as it will stand: this step's own events included (the
    // approval.decided event names who decided and why from them), though its row is not written yet.
    this.appending = events;
    let out: Outgoing;
    try {
      out = outgoing();
    } finally {
      this.appending = null;
    }
    const values = [seq, nowMs, JSON.stringify(state), JSON.stringify(events)];
    const frozenText = frozen ? JSON.stringify(frozen) : null;
    // Kept as the row's text (each read decodes fresh objects, as from SQLite); before the insert:
    // a failed one rolls the transaction back, which forgets them all.
    this.written?.push(values[3] as string);
    if (out.events.length + out.notices.length === 0) {
      this.store.run(
        "INSERT INTO op_log (seq, at_ms, state, events, frozen) VALUES (?, ?, ?, ?, ?)",
        ...values,
        frozenText,
      );
      return;
    }
    this.unsentNotices();
    const unsent: Unsent = {
      events: out.events.length > 0 ? JSON.stringify(out.events) : null,
      notices: out.notices.length > 0 ? JSON.stringify(out.notices) : null,
      atMs: nowMs,
    };
    const columns = ["seq", "at_ms", "state", "events", "frozen"];
    const bound: SqlStorageValue[] = [...values, frozenText];
    if (unsent.events !== null) {
      this.store.ensureColumn("op_log", UNSENT_EVENTS_COLUMN);
      columns.push("unsent_events");
      bound.push(unsent.events);
    }
    if (unsent.notices !== null) {
      this.store.ensureColumn("op_log", UNSENT_NOTICES_COLUMN);
      columns.push("unsent_notices");
      bound.push(unsent.notices);
    }
    this.store.run(
      `INSERT INTO op_log (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`,
      ...bound,
    );
    this.unsent!.set(seq, unsent);
  }

  /** The rows with notices not taken yet (read once per instance, then kept). */
  unsentNotices(): ReadonlyMap<number, Unsent> {
    if (this.unsent === undefined) {
      const has = (column: string) =>
        this.store.exists("op_log") && this.store.hasColumn("op_log", column);
      const parts = [
        has("unsent_events") ? "unsent_events" : null,
        has("unsent_notices") ? "unsent_notices" : null,
      ].filter((part) => part !== null);
      const rows =
        parts.length === 0
          ? []
          : this.store.all<{
              seq: number;
              at_ms: number;
              unsent_events?: string | null;
              unsent_notices?: string | null;
            }>(
              `SELECT seq, at_ms, ${parts.join(", ")} FROM op_log WHERE ${parts.map((part) => `${part} IS NOT NULL`).join(" OR ")}`,
            );
      this.unsent = new Map(
        rows.map((row) => [
          row.seq,
          {
            events: row.unsent_events ?? null,
            notices: row.unsent_notices ?? null,
            atMs: row.at_ms,
          },
        ]),
      );
    }
    return this.unsent;
  }

  /**
   * The sink took (or the outbox now holds: `moved`) one part of these rows' notices. A row is
   * cleared once both parts are: one UPDATE for the two (a part taken first waits for the other;
   * a crash between sends it again, with the same ids, and its sink keeps it once). A part moved to
   * `op_outbox` is cleared at once (inside that transaction: it must not be sent from both).
   */
  taken(seqs: readonly number[], part: "events" | "notices", moved = false): void {
    for (const seq of seqs) {
      const unsent = this.unsentNotices().get(seq);
      if (!unsent) continue;
      const other = part === "events" ? unsent.notices : unsent.events;
      if (other === null) {
        const both = ["unsent_events", "unsent_notices"].filter((column) =>
          this.store.hasColumn("op_log", column),
        );
        this.store.run(
          `UPDATE op_log SET ${both.map((column) => `${column} = NULL`).join(", ")} WHERE seq = ?`,
          seq,
        );
        this.unsent!.delete(seq);
        continue;
      }
      if (moved) this.store.run(`UPDATE op_log SET unsent_${part} = NULL WHERE seq = ?`, seq);
      this.unsent!.set(seq, { ...unsent, [part]: null });
    }
  }

  events(): TraceEvent[] {
    const appending = this.appending ?? [];
    if (!this.store.exists("op_log")) return [...appending];
    return [
      ...this.store
        .all<{ events: string }>("SELECT events FROM op_log ORDER BY seq")
        .flatMap((row) => decodeTrace(row.events)),
      ...appending,
    ];
  }

  /**
   * The events as this instance appended them when it wrote row 1 (else read, as events()): for
   * what is built right after a commit (the receipt, the OTLP push) without reading the rows back.
   * Whoever checks what is stored (verify) reads events().
   */
  eventsAsWritten(): TraceEvent[] {
    if (!this.written) return this.events();
    return [...this.written.flatMap((text) => decodeTrace(text)), ...(this.appending ?? [])];
  }

  /** This instance wrote row 1: nothing else of the operation was written before it (issue 37). */
  createdHere(): boolean {
    return this.written !== undefined;
  }

  /** The newest sealed event: the next one chains onto it. */
  lastLink(): ChainLink | null {
    if (this.link !== undefined) return this.link;
    const row = this.store.one<{ events: string }>(
      "SELECT events FROM op_log WHERE events != '[]' ORDER BY seq DESC LIMIT 1",
    );
    const last = row ? decodeTrace(row.events).at(-1) : undefined;
    this.link =
      last && typeof last.seq === "number" && typeof last.hash === "string"
        ? { seq: last.seq, hash: last.hash }
        : null;
    return this.link;
  }

  /** When the last row was written (null: no log). */
  lastAtMs(): number | null {
    const last = this.store.exists("op_log")
      ? this.store.one<{ at_ms: number }>("SELECT at_ms FROM op_log ORDER BY seq DESC LIMIT 1")
      : null;
    return last?.at_ms ?? null;
  }

  /**
   * The (turn, format) pairs already reported: read from the log once per instance, then kept (a
   * scan of the whole log per report made every replay cost O(log length) rows).
   */
  deliveries(): Set<string> {
    this.reportedKeys ??= new Set(
      this.events().flatMap((event) =>
        event.type === "reported" ? [`${event.turn_id} ${event.format}`] : [],
      ),
    );
    return this.reportedKeys;
  }

  /** The tool's pointers applied to this call's frozen input (the input itself stays unredacted). */
  redaction(row: FrozenRow): Redaction {
    if (this.redactionCache?.id !== row.id)
      this.redactionCache = {
        id: row.id,
        redaction: redactionFor(row.redact ?? [], decodeInput(row.input)),
      };
    return this.redactionCache.redaction;
  }

  /** The stored tool, compiled under today's deployment; an error (never a throw) if it no longer compiles. */
  loadFixed(): Result<Loaded, string> {
    const frozen = this.head()!.frozen;
    // The catalog keeps the compiled tool (by the frozen source's identity: no stringify per call).
    const spec = compileTool(frozen.source, hostPolicy(this.env));
    if (!spec.ok)
      return err(`the stored tool no longer compiles in this deployment: ${spec.error.detail}`);
    this.input ??= {
      value: decodeInput(frozen.input),
      canonical: frozen.input,
      hash: frozen.input_hash,
    };
    return ok({ spec: spec.value, input: this.input, plan: frozen.plan });
  }

  /** The log is gone (pruned): nothing read from it may be kept. */
  forget(): void {
    this.newest = undefined;
    this.written = undefined;
    this.unsent = undefined;
    this.link = undefined;
    this.reportedKeys = null;
    this.frozenRow = null;
    this.input = null;
    this.redactionCache = null;
  }
}

const NO_OUTGOING: Outgoing = { events: [], notices: [] };

/** The model's input hash: the operation's identity, whatever a person's edit made of it (issue 35). */
export const proposedHash = (frozen: FrozenRow): string =>
  frozen.edit?.proposed_hash ?? frozen.input_hash;

/** The tool's name from the stored source itself, so it is known even when the tool no longer compiles. */
export function toolName(frozen: FrozenRow): string {
  if (frozen.source.kind === "code") return frozen.source.name;
  const name = (frozen.source.manifest as { name?: unknown } | null)?.name;
  return typeof name === "string" ? name : "(unnamed tool)";
}

/** The tombstone a prune left (op_pruned), if it is this tenant's: what the operation was. */
export function prunedFor(
  store: SqlStore,
  tenantId: string,
): Extract<OperationError, { code: "pruned" }> | null {
  if (!store.exists("op_pruned")) return null;
  const row = store.one<{
    id: string;
    tenant_id: string;
    input_hash: string;
    status: string;
    pruned_at_ms: number;
  }>("SELECT id, tenant_id, input_hash, status, pruned_at_ms FROM op_pruned WHERE k = 1");
  return row && row.tenant_id === tenantId
    ? {
        code: "pruned",
        operation_id: row.id,
        pruned_at_ms: row.pruned_at_ms,
        status: row.status,
        input_hash: row.input_hash,
      }
    : null;
}

/** Not found for this tenant, or pruned (then with what it was). */
export function missing(store: SqlStore, tenantId: string): OperationError {
  return prunedFor(store, tenantId) ?? { code: "not_found" };
}
