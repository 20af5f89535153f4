// The run's rows read through their codecs (store/run-rows.ts): the run, its usage, turn groups and turns,
// and why a tenant finds no run here (never created, or pruned: 410). Reads only; every write
// stays in the caller's one transaction.
import { jurisdictionOf } from "../../domain/jurisdiction.ts";
import { redactContext } from "../../domain/redact.ts";
import { err, type Result } from "../../domain/result.ts";
import type { TurnGroup } from "../../domain/turn/admit.ts";
import type { RunState, TurnRecord } from "../../domain/turn/turn.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import {
  decodeRun,
  decodeTurn,
  decodeTurnGroup,
  decodeUsage,
  TURN_COLUMNS,
} from "../store/run-rows.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { notFound, type RunError, type RunView } from "./contracts.ts";

/** The usage row as stored (every column), read once per write to it (SqlStore.memo). */
export function usageRow(store: SqlStore): Record<string, SqlStorageValue> | null {
  return store.memo("usage", "usage", () => store.one("SELECT * FROM usage"));
}

/** The turn row just written (admission), so its settlement does not read it back. */
export function rememberTurn(store: SqlStore, row: Record<string, SqlStorageValue>): void {
  store.remember("turns", `turn:${String(row["id"])}`, row);
}

export class RunRows {
  constructor(
    private readonly store: SqlStore,
    private readonly sourceOf: (hash: string) => ToolSource | null,
  ) {}

  load(): RunState | null {
    if (!this.store.exists("run")) return null;
    return this.store.memo("run", "run", () => {
      const row = this.store.one<{ data: string }>("SELECT data FROM run");
      return row ? decodeRun(row.data) : null;
    });
  }

  /** Why this tenant finds no run here: retention removed it (410), or there never was one. */
  missing(tenantId: string): Result<never, RunError> {
    const pruned = this.store.exists("run_pruned")
      ? this.store.one<{ run_id: string; tenant_id: string; pruned_at_ms: number }>(
          "SELECT run_id, tenant_id, pruned_at_ms FROM run_pruned WHERE k = 1",
        )
      : null;
    return pruned && pruned.tenant_id === tenantId
      ? err({ code: "run_pruned", run_id: pruned.run_id, pruned_at_ms: pruned.pruned_at_ms })
      : notFound("run");
  }

  loadFor(tenantId: string): RunState | null {
    const run = this.load();
    return run && run.tenantId === tenantId ? run : null;
  }

  /** Kept as one row, updated in the same transaction as each turn (O(1), not a scan). */
  usage() {
    return decodeUsage(usageRow(this.store));
  }

  group(key: string): TurnGroup | null {
    const row = this.store.one(
      "SELECT key, turn_stop, usage_hash, calls FROM turn_groups WHERE key = ?",
      key,
    );
    return row ? decodeTurnGroup(row) : null;
  }

  turn(turnId: string): TurnRecord | null {
    // Any write to `turns` drops the memo (SqlStore.run): only the row as last written is kept.
    const row = this.store.memo("turns", `turn:${turnId}`, () =>
      this.store.one(`SELECT ${TURN_COLUMNS} FROM turns WHERE id = ?`, turnId),
    );
    return row ? decodeTurn(row, this.sourceOf) : null;
  }

  turns(): TurnRecord[] {
    return this.store
      .all(`SELECT ${TURN_COLUMNS} FROM turns ORDER BY seq`)
      .map((row) => decodeTurn(row, this.sourceOf));
  }

  /** The run as the API shows it: its context redacted by the offered tools' rules. */
  view(run: RunState, offered: ReadonlyMap<string, ToolSpec>): RunView {
    const usage = this.usage();
    return {
      run_id: run.runId,
      status: run.cancelledAtMs === null ? "active" : "cancelled",
      user: run.user,
      tools: Object.keys(run.tools),
      context: redactContext(run.context, [...offered.values()]),
      budgets: run.budgets,
      usage: { turns: usage.turns, tool_calls: usage.toolCalls, cost: usage.cost },
      created_at: new Date(run.createdAtMs).toISOString(),
      expires_at: new Date(run.expiresAtMs).toISOString(),
      mode: run.mode ?? "live",
      // Where its objects live (from its id's tag; null: no jurisdiction) and its own notify endpoint.
      jurisdiction: jurisdictionOf(run.runId),
      notify_webhook_id: run.notifyWebhookId ?? null,
    };
  }
}
