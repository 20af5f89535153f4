// ResourceLockObject: one per tenant + resource key. A thin shell around domain/lock.ts: load the
// row, call transition(), write the new state in one transactionSync, then perform the effects
// (alarm at the lease end, grant notices, the "do you still need it?" question). Memory holds
// nothing authoritative: an evicted object resumes from its row. Grant notices are at least once
// (a crash between commit and notice is repaired when the lease runs out and is extended).
import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import {
  EMPTY_LOCK,
  standing,
  transition,
  type HolderAnswer,
  type LockError,
  type LockEffect,
  type LockEvent,
  type LockState,
  type LockStep,
} from "../domain/lock.ts";
import { err, ok, type Result } from "../domain/result.ts";
import type { Env } from "./env.ts";
import { decodeWith, parseJson } from "./store/codec.ts";
import { SqlStore } from "./store/sql-store.ts";
import { operationStub } from "./stubs.ts";

// A resource lock is one row: who it belongs to (tenant + resource, checked on every call) and the
// whole lock state (holder, FIFO queue, last fencing token), so one transition writes one row.
const LOCK_SCHEMA = `
CREATE TABLE IF NOT EXISTS lock (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, resource TEXT NOT NULL, state TEXT NOT NULL, updated_at INTEGER NOT NULL);`;

export type AcquireRequest = {
  tenantId: string;
  resource: string;
  operationId: string;
  leaseMs: number;
};
export type AcquireReply =
  | { state: "held"; fencingToken: number }
  | { state: "queued"; position: number; blockedBy: string };
export type LockView = {
  resource: string;
  holder: {
    operation_id: string;
    fencing_token: number;
    lease_expires_at: string;
    granted_at: string;
  } | null;
  queue: Array<{ operation_id: string; enqueued_at: string }>;
  last_token: number;
};
export type LockObjectError = { code: "not_found"; detail: string } | LockError;

type Row = { tenant_id: string; resource: string; state: LockState };

/** The `state` column: domain/lock.ts's `LockState`, decoded (a row that does not decode is corrupt). */
const LockStateCodec = z.object({
  holder: z
    .object({
      operationId: z.string(),
      fencingToken: z.number(),
      leaseMs: z.number(),
      leaseExpiresAtMs: z.number(),
      grantedAtMs: z.number(),
    })
    .nullable(),
  queue: z.array(
    z.object({ operationId: z.string(), leaseMs: z.number(), enqueuedAtMs: z.number() }),
  ),
  lastToken: z.number(),
}) satisfies z.ZodType<LockState>;

export class ResourceLockObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, LOCK_SCHEMA);

  /** Idempotent: the holder gets its token back (lease renewed); a waiter keeps its place. */
  async acquire(req: AcquireRequest): Promise<Result<AcquireReply, LockObjectError>> {
    const row = this.load();
    if (row && (row.tenant_id !== req.tenantId || row.resource !== req.resource)) return notFound();
    const step = await this.apply(
      { type: "acquire", operationId: req.operationId, leaseMs: req.leaseMs },
      { tenantId: req.tenantId, resource: req.resource },
    );
    if (!step.ok) return step;
    const where = standing(step.value, req.operationId);
    // "none" cannot follow an accepted acquire; answering it as queued would hide a bug, so say so.
    if (where.state === "none")
      return err({ code: "invalid_request", detail: "the lock did not record this acquire" });
    return ok(
      where.state === "held"
        ? { state: "held", fencingToken: where.fencingToken }
        : { state: "queued", position: where.position, blockedBy: where.blockedBy },
    );
  }

  /** The holder releases (the next in line is granted) or a waiter withdraws; anyone else: no-op. */
  async release(req: {
    tenantId: string;
    operationId: string;
  }): Promise<Result<{ was: "held" | "queued" | "none" }, LockObjectError>> {
    const row = this.loadFor(req.tenantId);
    if (!row) return notFound();
    const was = standing(row.state, req.operationId).state;
    const step = await this.apply({ type: "release", operationId: req.operationId }, null);
    return step.ok ? ok({ was }) : step;
  }

  async renew(req: {
    tenantId: string;
    operationId: string;
    leaseMs: number;
  }): Promise<Result<{ fencingToken: number; leaseExpiresAtMs: number }, LockObjectError>> {
    if (!this.loadFor(req.tenantId)) return notFound();
    const step = await this.apply(
      { type: "renew", operationId: req.operationId, leaseMs: req.leaseMs },
      null,
    );
    if (!step.ok) return step;
    const holder = step.value.holder!;
    return ok({ fencingToken: holder.fencingToken, leaseExpiresAtMs: holder.leaseExpiresAtMs });
  }

  async status(tenantId: string): Promise<Result<LockView, LockObjectError>> {
    const row = this.loadFor(tenantId);
    if (!row) return notFound();
    const { holder, queue, lastToken } = row.state;
    return ok({
      resource: row.resource,
      holder: holder && {
        operation_id: holder.operationId,
        fencing_token: holder.fencingToken,
        lease_expires_at: iso(holder.leaseExpiresAtMs),
        granted_at: iso(holder.grantedAtMs),
      },
      queue: queue.map((w) => ({ operation_id: w.operationId, enqueued_at: iso(w.enqueuedAtMs) })),
      last_token: lastToken,
    });
  }

  /** Alarms are at least once: the core re-checks the lease end, and a stale answer is ignored. */
  override async alarm(): Promise<void> {
    if (!this.load()) return;
    await this.apply({ type: "alarm" }, null);
  }

  // ── shell ────────────────────────────────────────────────────────────────────────────────────

  /**
   * One transition = one synchronous transaction writing the lock row; effects run after it.
   * `owner` is given by acquire only: the first acquire creates the row.
   */
  private async apply(
    event: LockEvent,
    owner: { tenantId: string; resource: string } | null,
  ): Promise<Result<LockState, LockObjectError>> {
    const nowMs = Date.now();
    const result = this.store.transaction((): Result<LockStep, LockObjectError> => {
      const row = this.load();
      const step = transition(row?.state ?? EMPTY_LOCK, event, nowMs);
      if (step.ok && step.value.changed) {
        const state = JSON.stringify(step.value.state);
        if (row)
          this.store.run("UPDATE lock SET state = ?, updated_at = ? WHERE k = 1", state, nowMs);
        else if (owner) {
          this.store.ensureSchema();
          this.store.run(
            "INSERT INTO lock (k, tenant_id, resource, state, updated_at) VALUES (1, ?, ?, ?, ?)",
            owner.tenantId,
            owner.resource,
            state,
            nowMs,
          );
        } else return notFound();
      }
      return step;
    });
    if (!result.ok) return result;
    for (const effect of result.value.effects) await this.perform(effect);
    return ok(result.value.state);
  }

  private async perform(effect: LockEffect): Promise<void> {
    switch (effect.kind) {
      case "set_alarm":
        void this.ctx.storage.setAlarm(effect.atMs);
        return;
      case "clear_alarm":
        void this.ctx.storage.deleteAlarm();
        return;
      case "notify_granted": {
        const row = this.load()!;
        try {
          await operationStub(this.env, effect.operationId).onLockGranted(
            row.resource,
            effect.fencingToken,
          );
        } catch (error) {
          // Not lost: the holder still holds the lock, and the next lease expiry repeats the notice.
          console.warn("lock grant notice failed", effect.operationId, error);
        }
        return;
      }
      case "ask_holder": {
        let answer: HolderAnswer;
        try {
          answer = await operationStub(this.env, effect.operationId).lockHolderStatus();
        } catch {
          // No answer is not "gone": the holder may be alive and mid-effect.
          answer = "unreachable";
        }
        await this.apply(
          {
            type: "lease_expired",
            operationId: effect.operationId,
            fencingToken: effect.fencingToken,
            answer,
          },
          null,
        );
        return;
      }
    }
  }

  private load(): Row | null {
    if (!this.store.exists("lock")) return null;
    const row = this.store.one<{ tenant_id: string; resource: string; state: string }>(
      "SELECT tenant_id, resource, state FROM lock WHERE k = 1",
    );
    return row
      ? {
          tenant_id: row.tenant_id,
          resource: row.resource,
          state: decodeWith(LockStateCodec, parseJson(row.state, "lock"), "lock"),
        }
      : null;
  }

  /** Another tenant's id is indistinguishable from a lock that was never used. */
  private loadFor(tenantId: string): Row | null {
    const row = this.load();
    return row && row.tenant_id === tenantId ? row : null;
  }
}

const notFound = (): Result<never, LockObjectError> =>
  err({ code: "not_found", detail: "no such lock" });
const iso = (ms: number) => new Date(ms).toISOString();
