// RetryBudgetObject: one per tenant + upstream origin (domain/retry-budget.ts budgetKey), and one per
// tenant + user + tool for quotas of that scope. Two things live here:
// - the retry budget's sliding window, in memory only: losing it (eviction, restart) merely resets
//   the window, which lets retries through, the safe direction for a budget whose job is only to
//   damp an outage; callers fail open (retry-budget-client.ts);
// - quota shaping (issue 34 item 4, domain/quota/slots.ts): slots, concurrency places, the FIFO
//   queue and the upstream's pause, in SQLite (one row, written in the RPC's own turn), so a
//   restart loses no grant and grants none twice (keyed by operation id + attempt). The alarm
//   frees places whose operation died holding them and wakes the waiters now at the head.
import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import {
  DEFAULT_RETRY_BUDGET,
  EMPTY_BUDGET,
  noteFirstAttempts,
  spendRetry,
  type RetryBudgetState,
  type RetryVerdict,
} from "../domain/retry-budget.ts";
import {
  acquire,
  EMPTY_QUOTA,
  headOf,
  nextWakeMs,
  pauseUntil,
  release,
  tidy,
  type QuotaAnswer,
  type QuotaAsk,
  type QuotaState,
} from "../domain/quota/slots.ts";
import { retryBudgetConfig } from "../config.ts";
import type { Env } from "./env.ts";
import { decodeWith, parseJson } from "./store/codec.ts";
import { SqlStore } from "./store/sql-store.ts";
import { operationStub } from "./stubs.ts";

const QUOTA_SCHEMA = `
CREATE TABLE IF NOT EXISTS quota (k INTEGER PRIMARY KEY CHECK (k = 1), state TEXT NOT NULL, concurrency INTEGER)`;

const QuotaStateCodec = z.object({
  slots: z.array(z.number()),
  grants: z.record(z.string(), z.object({ atMs: z.number(), holdsUntilMs: z.number().nullable() })),
  queue: z.array(z.object({ grant: z.string(), operationId: z.string(), askedAtMs: z.number() })),
  pause: z.object({ untilMs: z.number(), long: z.boolean(), detail: z.string() }).nullable(),
}) satisfies z.ZodType<QuotaState>;

/** What the retry path learns here at no extra RPC: a retry of a paused origin waits for the pause. */
export type SpendVerdict =
  | RetryVerdict
  | { ok: false; waitMs: number; reason: "rate_limited"; detail: string; long: boolean };

export class RetryBudgetObject extends DurableObject<Env> {
  private window: RetryBudgetState = EMPTY_BUDGET;
  private readonly config = retryBudgetConfig(this.env) ?? DEFAULT_RETRY_BUDGET;
  private readonly store = new SqlStore(this.ctx.storage, QUOTA_SCHEMA, ["quota"]);

  /** Counts first attempts sent (reported in batches, never refused). */
  async noteFirsts(count: number, nowMs: number): Promise<void> {
    this.window = noteFirstAttempts(this.window, count, nowMs, this.config);
  }

  /**
   * Asks for one automatic retry at `nowMs`; `firsts`: first attempts not yet reported, counted
   * first; `budgetOn`: false when the deployment has the budget off (then only a pause defers it).
   */
  async spend(nowMs: number, firsts = 0, budgetOn = true): Promise<SpendVerdict> {
    this.window = noteFirstAttempts(this.window, firsts, nowMs, this.config);
    // The upstream paused this origin: the retry waits for the end of the pause, spending nothing.
    const pause = this.load()?.state.pause;
    if (pause && pause.untilMs > nowMs)
      return {
        ok: false,
        waitMs: pause.untilMs - nowMs,
        reason: "rate_limited",
        detail: pause.detail,
        long: pause.long,
      };
    if (!budgetOn) return { ok: true };
    const step = spendRetry(this.window, nowMs, this.config);
    this.window = step.state;
    return step.verdict;
  }

  /** A first attempt asks for its slot (idempotent per grant key); see domain/quota/slots.ts. */
  async acquireQuota(ask: QuotaAsk): Promise<QuotaAnswer> {
    const step = acquire(this.load()?.state ?? EMPTY_QUOTA, ask);
    this.save(step.state, ask.claim.concurrency ?? null);
    return step.answer;
  }

  /**
   * The attempt holding `grant` ended, or its operation stopped waiting (`forget`: nothing sent, it
   * may ask again anew): its place is free, and the waiters now at the head are woken.
   */
  async releaseQuota(grant: string, nowMs: number, forget = false): Promise<void> {
    const row = this.load();
    if (!row) return;
    const step = release(row.state, grant, row.concurrency ?? 0, nowMs, forget);
    this.save(step.state, row.concurrency);
    this.wake(step.wake);
  }

  /** The upstream asked for a pause (429/503 Retry-After, RateLimit r=0): every grant waits for it. */
  async pauseOrigin(untilMs: number, detail: string, nowMs: number): Promise<void> {
    const row = this.load();
    this.save(
      pauseUntil(row?.state ?? EMPTY_QUOTA, untilMs, detail, nowMs),
      row?.concurrency ?? null,
    );
  }

  /** Frees places whose operation died holding them, then wakes the waiters now at the head. */
  override async alarm(): Promise<void> {
    const row = this.load();
    if (!row) return;
    const nowMs = Date.now();
    const state = tidy(row.state, nowMs);
    this.save(state, row.concurrency);
    if (row.concurrency !== null) this.wake(headOf(state, row.concurrency, nowMs));
  }

  private load(): { state: QuotaState; concurrency: number | null } | null {
    if (!this.store.exists("quota")) return null;
    const row = this.store.one<{ state: string; concurrency: number | null }>(
      "SELECT state, concurrency FROM quota WHERE k = 1",
    );
    if (!row) return null;
    return {
      state: decodeWith(QuotaStateCodec, parseJson(row.state, "quota state"), "quota state"),
      concurrency: row.concurrency,
    };
  }

  private save(state: QuotaState, concurrency: number | null): void {
    this.store.ensureTable("quota");
    this.store.run(
      "INSERT OR REPLACE INTO quota (k, state, concurrency) VALUES (1, ?, ?)",
      JSON.stringify(state),
      concurrency,
    );
    const wakeAtMs = nextWakeMs(state);
    if (wakeAtMs !== null) void this.ctx.storage.setAlarm(wakeAtMs);
  }

  /** Tells each woken operation to ask again (it finds its place at the head); a lost notice costs a recheck. */
  private wake(operationIds: string[]): void {
    for (const id of operationIds)
      this.ctx.waitUntil(
        operationStub(this.env, id)
          .quotaReady()
          .catch(() => {}),
      );
  }
}
