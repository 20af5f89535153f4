// The transactional outbox to the tenant plane (op_outbox): each update is a row written in the
// transition's own transaction, delivered after the commit and by the alarm until the tenant
// acknowledges it, so a crash or a failed RPC delays it, never loses it. Each payload is the whole
// new standing, applied at the tenant as an idempotent upsert ordered by `seq`.
import type { Effect, OperationEvent, OperationState } from "../../domain/operation/index.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { tenantStub } from "../stubs.ts";
import type { ApprovalItem, UnknownItem } from "../tenant/inbox.ts";
import type { Shell } from "./contracts.ts";
import { ask } from "./gather.ts";
import { releaseClaims } from "./limits.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import { toolName, type OperationLog } from "./log.ts";
import { approvalItem } from "./views.ts";

/** An outbox row not acknowledged is delivered again after 5 s, then at doubling gaps up to 10 min. */
export const OUTBOX_RETRY_MS = 5_000;
export const OUTBOX_RETRY_MAX_MS = 600_000;

/**
 * What the tenant plane is told, one outbox row each, named as the events a webhook will carry: the
 * approvals inbox (`approval.*`) and the list of operations waiting for a person (`operation.*`).
 */
export type OutboxKind =
  | "approval.requested"
  | "approval.previewed"
  | "approval.decided"
  | "approval.expired"
  | "approval.cancelled"
  | "operation.outcome_unknown"
  | "operation.settling"
  | "operation.recorded"
  | "operation.resent"
  /** Its reservations of limits across runs given back: recorded with nothing applied (issue 21). */
  | "limits.released";
/** An outbox row's payload: the whole new standing, so a delivery is an idempotent upsert at the tenant. */
export type OutboxPayload =
  | { target: "approval"; item: ApprovalItem }
  | { target: "unknown"; open: boolean; item: UnknownItem }
  | { target: "limits"; claims: LimitClaim[] };
type OutboxRow = { seq: number; kind: OutboxKind; payload: string; attempts: number };

/** The outbox row one effect of a committed transition calls for (null: the tenant plane need not know). */
export function outboxRow(
  log: OperationLog,
  effect: Effect,
  event: OperationEvent,
  state: OperationState,
  nowMs: number,
): { kind: OutboxKind; payload: OutboxPayload } | null {
  if (effect.kind === "inbox") {
    const item = approvalItem(log, effect.state);
    if (!item) return null;
    const kind: OutboxKind =
      effect.state === "pending"
        ? event.type === "preview_finished"
          ? "approval.previewed"
          : "approval.requested"
        : effect.state === "approved" || effect.state === "rejected"
          ? "approval.decided"
          : effect.state === "expired"
            ? "approval.expired"
            : "approval.cancelled";
    return { kind, payload: { target: "approval", item } };
  }
  if (effect.kind === "release_limits") {
    const claims = log.head()?.frozen.plan.limits ?? [];
    return claims.length > 0
      ? { kind: "limits.released", payload: { target: "limits", claims } }
      : null;
  }
  if (effect.kind === "needs_person") {
    const frozen = log.head()!.frozen;
    const item = {
      operation_id: frozen.id,
      run_id: frozen.run_id,
      tool: toolName(frozen),
      since_ms: nowMs,
    };
    const kind: OutboxKind = effect.open
      ? effect.person
        ? "operation.outcome_unknown"
        : "operation.settling"
      : state.phase === "recorded"
        ? "operation.recorded"
        : "operation.resent";
    return { kind, payload: { target: "unknown", open: effect.open, item } };
  }
  return null;
}

/** Written inside the transition's transaction, with the log row `seq` it belongs to. */
export function writeOutbox(
  store: SqlStore,
  seq: number,
  row: { kind: OutboxKind; payload: OutboxPayload },
  nowMs: number,
): void {
  store.ensureTable("op_outbox");
  store.run(
    "INSERT INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, ?, ?, 0, ?, ?)",
    seq,
    row.kind,
    JSON.stringify(row.payload),
    nowMs + OUTBOX_RETRY_MS,
    nowMs,
  );
}

/** Whether anything is still to go: an outbox row, or events riding in a log row (events.ts). */
export function outboxPending(log: OperationLog): boolean {
  const store = log.store;
  if (log.unsentEvents().size > 0) return true;
  return store.exists("op_outbox") && store.one("SELECT seq FROM op_outbox LIMIT 1") !== null;
}

/** When the earliest row is due for redelivery (null: none); a log row's events OUTBOX_RETRY_MS after it. */
export function outboxDueAtMs(log: OperationLog): number | null {
  const store = log.store;
  let at = store.exists("op_outbox")
    ? (store.one<{ at: number | null }>("SELECT MIN(next_at_ms) AS at FROM op_outbox")?.at ?? null)
    : null;
  for (const unsent of log.unsentEvents().values())
    at = Math.min(at ?? Infinity, unsent.atMs + OUTBOX_RETRY_MS);
  return at;
}

/**
 * Delivers the outbox to the tenant, oldest first. An acknowledged row is deleted; the first that
 * fails stays with its next time (backoff) and the alarm is armed for it. Never throws. The
 * tenant applies each delivery as an upsert keyed by operation id and ignores one older than what
 * it holds (`seq`), so a repeated or overtaken delivery changes nothing.
 */
export async function deliverOutbox(shell: Shell): Promise<void> {
  const store = shell.log.store;
  const head = shell.log.head();
  if (!head || !store.exists("op_outbox")) return;
  const rows = store.all<OutboxRow>(
    // Event rows (`event:*`) go to the EVENTS queue instead (events.ts).
    "SELECT seq, kind, payload, attempts FROM op_outbox WHERE kind NOT LIKE 'event:%' ORDER BY seq, kind",
  );
  if (rows.length === 0) return;
  const tenant = head.frozen.tenant_id;
  for (const row of rows) {
    const delivered = await ask(async () => {
      const payload = JSON.parse(row.payload) as OutboxPayload;
      if (payload.target === "limits")
        return releaseClaims(shell.env, tenant, head.frozen.id, payload.claims);
      const stub = tenantStub(shell.env, tenant);
      if (payload.target === "approval") await stub.upsertApproval(payload.item, row.seq);
      else await stub.markUnknown(payload.item, payload.open, row.seq);
    });
    if (delivered.answered) {
      store.run("DELETE FROM op_outbox WHERE seq = ? AND kind = ?", row.seq, row.kind);
      continue;
    }
    const { attempts, delayMs } = backOffRow(store, row);
    console.error(
      JSON.stringify({
        level: "warn",
        event: "toolgate.outbox_delivery_failed",
        operation_id: head.frozen.id,
        kind: row.kind,
        attempts,
        retry_in_ms: delayMs,
        detail: delivered.detail,
      }),
    );
    break;
  }
  // Back to the state's own alarm, or the next redelivery if that comes first.
  shell.alarms.rearm();
}

/** A row not taken: its next try after 5 s, doubling to 10 min per failed attempt. */
export function backOffRow(
  store: SqlStore,
  row: { seq: number; kind: string; attempts: number },
): { attempts: number; delayMs: number } {
  const attempts = row.attempts + 1;
  const delayMs = Math.min(OUTBOX_RETRY_MAX_MS, OUTBOX_RETRY_MS * 2 ** Math.min(attempts - 1, 20));
  store.run(
    "UPDATE op_outbox SET attempts = ?, next_at_ms = ? WHERE seq = ? AND kind = ?",
    attempts,
    Date.now() + delayMs,
    row.seq,
    row.kind,
  );
  return { attempts, delayMs };
}
