// OperationObject: one per logical operation. A thin shell around domain/operation: each RPC finds
// its operation (owned by the tenant), gathers what a send needs (gather.ts), then apply(): one
// transactionSync appending one log row (state + sealed trace + outbox rows), then the effects
// (effects.ts perform). A person's or the run's decisions (decide, resolve, cancel) are in decisions.ts.
// The attempt is durable before fetch with no await in between (the output gate holds the request
// until the write is confirmed); results are applied by compare-and-set on the attempt number.
// Nothing here throws across the stub, and an alarm whose work fails re-arms itself with backoff
// (alarm.ts alarmOrRearm). A settled operation's receipts (receipts.ts, issue 37) are signed after
// the `recorded` commit, in the background; the alarm and any read sign what a crash lost.
import { DurableObject } from "cloudflare:workers";
import {
  transition,
  type Decision,
  type OperationEvent,
  type OperationState,
  type Step,
  type TraceEvent,
} from "../../domain/operation/index.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { verifyChain, type ChainCheck } from "../../domain/trace-chain.ts";
import { hostPolicy } from "../../config.ts";
import type { Env } from "../env.ts";
import { compileTool } from "../../tools/catalog.ts";
import { OPERATION_SCHEMA } from "../store/operation-rows.ts";
import { SqlStore } from "../store/sql-store.ts";
import type * as C from "./contracts.ts";
import { holderStatus, startUnderLease } from "./lease-client.ts";
import { missing, OperationLog, proposedHash, prunedFor } from "./log.ts";
import { OperationOutbox } from "./notices.ts";
import { indexEntryOf } from "./index-entry.ts";
import { afterCommit, NOTHING_WRITTEN, writeStep, type Written } from "./commit.ts";
import { cancelledEarly } from "./retention.ts";
import { Sender } from "./send.ts";
import { prepareStart, startUnavailable } from "./start.ts";
import { limitHoldOf, prunedHold, type LimitHold } from "./limits.ts";
import { Alarms, alarmOrRearm, wakeHeld } from "./alarm.ts";
import { perform, type EffectHost } from "./effects.ts";
import { acquireQuota, withdrawQuota } from "./quota-client.ts";
import { Decisions } from "./decisions.ts";
import { Waiters } from "./wait.ts";
import { wakeForCredential } from "./credential.ts";
import * as Undo from "./compensation.ts";
import { report, type Reported } from "./trace.ts";
import { Receipts } from "./receipts.ts";
import type { SignedReceipt } from "../../domain/receipt.ts";
import { conflictReplyOf, peekOf, replyOf, viewOf } from "./views.ts";

type Reply<T> = Promise<Result<T, C.OperationError>>;

export class OperationObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, OPERATION_SCHEMA);
  private readonly log = new OperationLog(this.store, this.env);
  private readonly sender = new Sender(this.env, this.log, (event, frozen) =>
    this.apply(event, frozen ?? null),
  );
  private readonly waiters = new Waiters(this.log);
  /** Its signed receipts (receipts.ts): due once recorded, signed after the commit, off the reply path. */
  private readonly receipts = new Receipts(this.log, this.env);
  private readonly alarms = new Alarms(this.ctx.storage, this.log, this.env, () =>
    this.receipts.pending(),
  );
  /** Lock requests and releases, in order; replies wait for them so the envelope shows the standing. */
  private lockWork: Promise<void> = Promise.resolve();
  /** Sweeps answered "absent" (issue 21): a start in flight across one reserves again. */
  private limitSweeps = 0;
  /** Its notices to the tenant plane; replies wait for the inbox's, so a listing right after sees them. */
  private readonly outbox = new OperationOutbox(
    () => this.shell,
    (promise) => this.ctx.waitUntil(promise),
  );
  /** What the modules beside it may use: the log, apply, the alarm, the background work. */
  private readonly shell: EffectHost = {
    env: this.env,
    log: this.log,
    apply: (event, secrets) => this.apply(event, null, secrets ?? null),
    alarms: this.alarms,
    sender: this.sender,
    outbox: this.outbox,
    receipts: this.receipts,
    lockWork: () => this.lockWork,
    queueLock: (work) => void (this.lockWork = this.lockWork.then(work)),
    facts: null,
  };
  private readonly decisions = new Decisions(this.shell, (e, secrets, frozen) =>
    this.apply(e, frozen ?? null, secrets),
  );

  async submit(req: C.SubmitRequest): Reply<C.OperationReply> {
    const rowsBefore = this.store.rowsWritten;
    // Pruned: the stored outcome is gone, and running it again could repeat the effect.
    const pruned = prunedFor(this.store, req.tenantId);
    if (pruned) return err(pruned);
    const existing = this.log.head();
    if (req.facts) this.shell.facts = req.facts; // a lock granted later sends with them (lease-client.ts)
    // Same logical operation, different frozen input: a changed amount or recipient is a new decision.
    // (Against the model's own input: a person's edit does not change which call this is.)
    if (existing && proposedHash(existing.frozen) !== req.input.hash)
      return ok(conflictReplyOf(existing, req));
    if (!existing) {
      const spec = compileTool(req.source, hostPolicy(this.env));
      if (!spec.ok) return err({ code: "invalid_tool", detail: spec.error.detail });
      const sweeps = this.limitSweeps;
      const used = Undo.compensationSpec(spec.value, req); // undo: a person approves by default
      const prepared = await prepareStart(this.env, req, used).catch(startUnavailable);
      if (!prepared.ok) return prepared;
      const { frozen, secrets, limitDenied, policyDenied, freeze } = prepared.value;
      // The awaits let other calls in: one of them may have started this operation meanwhile, or a
      // limit's sweep was told it had not (and released its reservation): then reserve again.
      if (this.log.head() || this.limitSweeps !== sweeps) return this.submit(req);
      // Only the log: the other tables are created where first needed (cancel, lock grant, pruning).
      this.store.ensureTable("op_log");
      const cancelledBy = cancelledEarly(this.store, req.tenantId, req.runId);
      const [inputHash, callId, tool] = [req.input.hash, req.callId, spec.value.name];
      const denied = { limitDenied, policyDenied, frozen: freeze };
      const start = { type: "start", inputHash, callId, tool, cancelledBy, ...denied } as const;
      const started = this.apply(start, frozen, secrets);
      if (!started.ok) return started;
    } else this.sender.recoverOrphan();
    await Promise.all([this.sender.previewing, this.outbox.settled(), this.lockWork]);
    await this.waiters.waitFor({ ms: req.waitMs, holdForPeople: req.holdForPeople ?? true });
    await this.outbox.settled();
    return ok(replyOf(this.log.head()!, req, this.store.rowsWritten - rowsBefore));
  }

  /**
   * Read-only, and never creates anything: how the operation stands, or that there is none (or
   * that it was pruned, with its input hash). The run asks this before refusing a call by a budget
   * or a cancel: a call identical to an existing operation is a replay, never refused.
   */
  async peek(tenantId: string): Reply<C.OperationPeek> {
    const head = this.log.headFor(tenantId);
    return head ? ok(peekOf(head)) : err(missing(this.store, tenantId));
  }

  /** The tenant index's row for this operation (issue 20: a rebuild; null: not this tenant's). */
  async indexEntry(tenantId: string) {
    return this.log.headFor(tenantId) ? indexEntryOf(this.log) : null;
  }

  async get(tenantId: string, waitMs: number): Reply<C.OperationView> {
    if (!this.log.headFor(tenantId)) return err(missing(this.store, tenantId));
    this.sender.recoverOrphan();
    await this.waiters.waitFor({ ms: waitMs, holdForPeople: true });
    await this.outbox.settled();
    return ok(viewOf(this.log));
  }

  /**
   * The call as an approver must see it (ApprovalInput). Read-only, for callers holding
   * approvals:decide; never copied into the inbox row or the trace, which stay redacted.
   */
  async approvalInput(tenantId: string): Reply<C.ApprovalInput> {
    return this.decisions.approvalInput(tenantId);
  }

  /**
   * A person's decision on a call awaiting approval. Decided once: a later decision (or one that
   * lost a race) gets the recorded one back. Approval is not authorization: before the first
   * attempt the run checks scopes, deadline, cancellation and that the tool is still this version.
   */
  async decide(tenantId: string, decision: Decision): Reply<C.Decided> {
    return this.decisions.decide(tenantId, decision);
  }

  /** Approve with edited arguments (issue 35 item 2): a new frozen version first (decisions.ts edit). */
  async edit(
    tenantId: string,
    decision: Decision,
    edited: Record<string, unknown>,
  ): Reply<C.Decided> {
    return this.decisions.edit(tenantId, decision, edited);
  }

  async resolve(tenantId: string, verdict: C.Verdict): Reply<C.OperationView> {
    return this.decisions.resolve(tenantId, verdict);
  }

  /** The stored events, in order: annotated, redacted and hash-chained when they were appended. */
  async traceFor(tenantId: string): Reply<TraceEvent[]> {
    return this.log.headFor(tenantId) ? ok(this.log.events()) : err(missing(this.store, tenantId));
  }

  /** Checks the hash chain of the stored log: where it breaks, if it does (GET …?verify=1). */
  async verify(tenantId: string): Reply<ChainCheck> {
    if (!this.log.headFor(tenantId)) return err(missing(this.store, tenantId));
    return ok(verifyChain(this.log.events()));
  }

  /** The recorded result went to the caller in a turn response (trace.ts report). */
  async reported(tenantId: string, turnId: string, format: string): Reply<Reported> {
    const head = this.log.headFor(tenantId);
    return head ? ok(report(this.log, head, turnId, format)) : err(missing(this.store, tenantId));
  }

  /**
   * Cancelled by the run `runId`, which may cancel only an operation it created: another run's
   * (a tenant-scoped key shared across runs) is "not found" to it. A cancel that overtakes its
   * operation's submit is kept for that run's submit only (retention.ts cancelEarly).
   */
  async cancel(tenantId: string, by: string, runId: string): Reply<C.OperationView> {
    return this.decisions.cancel(tenantId, by, runId);
  }

  // ── holds (issue 34): a person's pause, resume and retry-now; the tenant's wake after a lift ──

  async pause(tenantId: string, by: string): Reply<C.OperationView> {
    return this.decisions.pause(tenantId, by);
  }
  async resume(tenantId: string, by: string): Reply<C.OperationView> {
    return this.decisions.resume(tenantId, by);
  }
  async retryNow(tenantId: string, by: string): Reply<C.OperationView> {
    return this.decisions.retryNow(tenantId, by);
  }
  /** Told by its tenant that the freeze holding it was lifted: asks everything again (alarm.ts wakeHeld). */
  async wakeHeld(tenantId: string): Promise<void> {
    if (this.log.headFor(tenantId)?.state.phase === "held") await wakeHeld(this.shell);
  }

  /** Undo (issue 22, compensation.ts): the original as its run reads it, and the link to its compensation. */
  async compensationSource(tenantId: string): Reply<Undo.CompensationSource> {
    return Undo.compensationSourceOf(this.log, tenantId);
  }
  async linkCompensation(tenantId: string, compensationId: string): Reply<true> {
    const linked = Undo.linkCompensation(this.log, tenantId, compensationId);
    // The link is a receipt of its own, chained onto the settled one (issue 37).
    if (linked.ok) this.produceReceipts();
    return linked;
  }

  /**
   * The operation's signed receipts, oldest first (issue 37): any due and missing are produced
   * first. `pending`: one is due that could not be signed now (the tenant's key unreachable).
   * Kept after the log is pruned; another tenant's (or none) is an empty chain.
   */
  async receiptChain(
    tenantId: string,
  ): Promise<{ receipts: SignedReceipt[]; pending: string | null }> {
    const head = this.log.headFor(tenantId);
    const produced = head ? await this.receipts.produce() : null;
    const receipts = this.receipts.chain(tenantId);
    const pending = produced && !produced.ok && this.receipts.pending() ? produced.error : null;
    return { receipts, pending };
  }

  /** Asked by a limit's sweep (issue 21): does this operation hold its reservation of `name` for `subject`? */
  async limitHold(tenantId: string, name: string, subject: string): Promise<LimitHold> {
    const head = this.log.head();
    if (!head) this.limitSweeps++;
    // Pruned (settled, then removed by retention): recorded by then, at the latest.
    const pruned = head ? null : prunedFor(this.store, tenantId);
    if (pruned) return prunedHold(pruned.status, pruned.pruned_at_ms);
    if (head && head.frozen.tenant_id !== tenantId) return { kind: "absent" };
    return limitHoldOf(head, name, subject);
  }

  // ── resource locks: the lock object asks and tells the operations that use it ──────────────

  /** Asked by a ResourceLockObject whose lease for this operation expired: does it still need it? */
  async lockHolderStatus(): Promise<"active" | "waiting" | "settled" | "gone"> {
    return holderStatus(this.log.head());
  }

  /** Told by a ResourceLockObject that this operation now holds `resource` (FIFO turn reached). */
  async onLockGranted(resource: string, fencingToken: number): Promise<void> {
    if (this.log.head()?.frozen.plan.resource !== resource) return;
    await startUnderLease(this.shell, fencingToken);
  }

  /**
   * Never left to the platform's retries of a throwing alarm (a few, over about two minutes): if
   * anything here fails, the alarm is set again with backoff and the error only logged.
   */
  override async alarm(): Promise<void> {
    await alarmOrRearm(this.shell);
  }

  /**
   * Told by a quota object that a place under its cap is free for this operation: ask again. One
   * recorded meanwhile gives its place back, so no one queues behind it (one that is sending keeps
   * it: its attempt gives it back when it ends).
   */
  async quotaReady(): Promise<void> {
    const head = this.log.head();
    if (head?.state.phase === "awaiting_quota") await acquireQuota(this.shell);
    else if (head?.state.phase === "recorded") withdrawQuota(this.env, head.frozen);
    // Held before its first send (issue 34): it asks anew after the hold.
    else if (head?.state.phase === "held" && head.state.resume.phase === "unsent")
      withdrawQuota(this.env, head.frozen, true);
  }

  /**
   * In the background, never on the reply path; then the alarm back to the state's own time (it
   * was set for the receipt: alarm.ts). Not signed now (the tenant's key out of reach): the alarm
   * tries again soon. Lost to a crash: the alarm set with the commit, or the next read of it.
   */
  private produceReceipts(): void {
    this.ctx.waitUntil(
      this.receipts.produce().then((done) => {
        if (done.ok) return this.alarms.rearm();
        console.error("receipt not signed yet; the alarm tries again", done.error);
        this.alarms.armAt(Date.now() + this.alarms.fallbackDelayMs());
      }),
    );
  }

  /** Told by its user's credential object that they connected (issue 36): ask for the token again. */
  async credentialReady(): Promise<void> {
    await wakeForCredential(this.shell);
  }

  // ── shell ────────────────────────────────────────────────────────────────────────────────────

  /**
   * One transition = one synchronous transaction appending one log row (state + trace events) and
   * the outbox rows it calls for; effects run only after it. `frozen` is given for the `start`
   * event, and for an `edit` (the call's new version, written in the same row; the transition
   * decides on the version before it).
   */
  private apply(
    event: OperationEvent,
    frozen: C.FrozenRow | null,
    secrets: C.Secrets | null = null,
  ): Result<OperationState, C.OperationError> {
    const nowMs = Date.now();
    let written: Written = NOTHING_WRITTEN;
    let entered: OperationState["phase"] | null = null;
    const result = this.store.transaction((): Result<Step, C.OperationError> => {
      const head = this.log.head();
      const row = head?.frozen ?? frozen;
      if (!row) return err({ code: "not_found" });
      const step = transition(head?.state ?? null, event, row.plan, nowMs);
      if (step.ok && step.value.changed) {
        if (step.value.state.phase !== head?.state.phase) entered = step.value.state.phase;
        written = writeStep(this.log, head, frozen, event, step.value, nowMs);
      }
      return step;
    });
    if (!result.ok) return result;
    const state = result.value.state;
    afterCommit(this.env, this.log, written.appended, entered, (p) => this.ctx.waitUntil(p));
    if (entered === "recorded") this.produceReceipts();
    const armed = perform(this.shell, result.value.effects, state, secrets);
    // A redelivery is armed with the commit (the alarm never waits past the oldest row's time).
    if ((written.outboxed || written.evented) && !armed) this.alarms.rearm();
    if (written.outboxed) void this.outbox.deliverInbox();
    if (written.evented) void this.outbox.sendEvents();
    if (result.value.changed) this.waiters.notify();
    return ok(result.value.state);
  }
}
