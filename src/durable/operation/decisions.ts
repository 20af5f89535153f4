// What a person or the operation's run decides about it, and the call as an approver sees it: the
// bodies of OperationObject.approvalInput, decide, resolve and cancel. Each finds the operation
// (owned by the tenant), gathers what a send it may start needs (gather.ts), then one transition
// (OperationObject.apply), and answers after the outbox deliveries it queued (a listing right after
// sees the change).
import type { Decision, OperationEvent, OperationState } from "../../domain/operation/index.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { AlarmHost } from "./alarm.ts";
import type * as C from "./contracts.ts";
import { gatherApproval, gatherResend, gatherRetryNow } from "./gather.ts";
import { transition } from "../../domain/operation/index.ts";
import { approverFacts } from "./limits.ts";
import { missing, prunedFor } from "./log.ts";
import { cancelEarly } from "./retention.ts";
import { editCall } from "./edit.ts";
import { approvalInputOf, viewOf } from "./views.ts";

type Reply<T> = Promise<Result<T, C.OperationError>>;
/** OperationObject.apply for an event of an operation that exists (`frozen`: an edit's new version). */
export type Apply = (
  event: OperationEvent,
  secrets: C.Secrets | null,
  frozen?: C.FrozenRow | null,
) => Result<OperationState, C.OperationError>;

export class Decisions {
  constructor(
    private readonly shell: AlarmHost,
    private readonly apply: Apply,
  ) {}

  /** Read-only, for callers holding approvals:decide. */
  async approvalInput(tenantId: string): Reply<C.ApprovalInput> {
    const { env, log } = this.shell;
    const head = log.headFor(tenantId);
    if (!head) return err(missing(log.store, tenantId));
    const input = approvalInputOf(log, head);
    if (!input) return err({ code: "not_awaiting_approval", phase: head.state.phase });
    return ok(await approverFacts(env, head, input));
  }

  /**
   * Decided once: a later decision (or one that lost a race, or came after the expiry) gets the
   * recorded one back with `decided: false` — what a batch reports as skipped (issue 35).
   */
  async decide(tenantId: string, decision: Decision): Reply<C.Decided> {
    const { env, log } = this.shell;
    const head = log.headFor(tenantId);
    if (!head) return err(missing(log.store, tenantId));
    const approval = head.frozen.plan.approval;
    if (!approval) return err({ code: "not_awaiting_approval", phase: head.state.phase });
    let denial: Extract<OperationEvent, { type: "decide" }>["denial"] = null;
    let secrets: C.Secrets | null = null;
    let hold: Extract<OperationEvent, { type: "decide" }>["hold"] = null;
    if (head.state.phase === "awaiting_approval" && decision.verdict === "approve") {
      const gathered = await gatherApproval(env, log, head, approval.toolVersion);
      if (!gathered.ok) return gathered;
      ({ denial, secrets, hold } = gathered.value);
    }
    const step = this.apply({ type: "decide", decision, denial, hold }, hold ? null : secrets);
    // The operation as this decision left it, read before any await: a paid call's first attempt may
    // meet its 402 meanwhile and ask a person again (x402) — that request is not the one decided here.
    const view = viewOf(log);
    await this.shell.outbox.settled();
    if (!step.ok && step.error.code !== "not_awaiting_approval") return step;
    // A step that went through from awaiting_approval either took this decision or expired it.
    const state = view.approval?.state;
    const decided = step.ok && (state === "approved" || state === "rejected");
    // A routed approval's vote that went through and left it waiting for more (issue 35).
    const voted = step.ok && state === "pending" && view.approval?.route != null;
    return ok({ view, decided, voted });
  }

  /**
   * A person approves with edited arguments (issue 35 item 2, edit.ts): the new version is written,
   * or nothing changes. Then, unless four eyes: the editor's approval of the edited hash in the same
   * request (a passkey step-up was made for the old hash: it does not carry over). Under four eyes
   * the edit waits for another person's approval of its hash (`decided: false`).
   */
  async edit(
    tenantId: string,
    decision: Decision,
    edited: Record<string, unknown>,
  ): Reply<C.Decided> {
    const { env, log } = this.shell;
    const done = await editCall(
      env,
      log,
      (e, frozen) => this.apply(e, null, frozen),
      tenantId,
      decision,
      edited,
    );
    await this.shell.outbox.settled();
    if (!done.ok) return done;
    const head = log.headFor(tenantId)!;
    if (done.value === "closed" || (done.value === "edited" && head.frozen.plan.approval?.fourEyes))
      return ok({ view: viewOf(log), decided: false, voted: false });
    // An edited version is a new approval: the named approval hash was the old one's, like the step-up.
    const { stepUp, approvalHash, ...rest } = decision;
    const kept =
      done.value === "same"
        ? { ...(stepUp ? { stepUp } : {}), ...(approvalHash ? { approvalHash } : {}) }
        : {};
    return this.decide(tenantId, { ...rest, ...kept, inputHash: head.frozen.input_hash });
  }

  /** A person settles an unknown outcome; a keyed `resend` sends again with secrets gathered first. */
  async resolve(tenantId: string, verdict: C.Verdict): Reply<C.OperationView> {
    const { env, log } = this.shell;
    const head = log.headFor(tenantId);
    if (!head) return err(missing(log.store, tenantId));
    let secrets: C.Secrets | null = null;
    const { state, frozen } = head;
    if (
      verdict.outcome === "resend" &&
      state.phase === "outcome_unknown" &&
      frozen.plan.safety === "keyed"
    ) {
      const gathered = await gatherResend(env, log, head);
      if (!gathered.ok) return gathered;
      secrets = gathered.value;
    }
    const step = this.apply({ type: "resolve", ...verdict }, secrets);
    await this.shell.outbox.settled();
    return step.ok ? ok(viewOf(log)) : step;
  }

  /** A person pauses a call waiting on a retry, a lock, a quota slot or a resend (issue 34): it sends nothing until resumed. */
  async pause(tenantId: string, by: string): Reply<C.OperationView> {
    return this.act(tenantId, { type: "pause", by });
  }

  /**
   * Resumed where it was: a retry keeps its due time and its alarm asks the run, the freezes and
   * the retry budget again before it sends; a lock wait asks for the lock again.
   */
  async resume(tenantId: string, by: string): Reply<C.OperationView> {
    const head = this.shell.log.headFor(tenantId);
    if (!head) return err(missing(this.shell.log.store, tenantId));
    if (head.state.phase !== "held" || head.state.hold.kind !== "pause")
      return err({
        code: "not_waiting",
        phase: head.state.phase,
        detail: "only a paused call resumes",
      });
    return this.act(tenantId, { type: "release", of: "pause", by });
  }

  /**
   * The next attempt now, same key, after the run, the freezes and the host's retry budget said
   * yes (a budget that says no: typed, nothing sent or changed).
   */
  async retryNow(tenantId: string, by: string): Reply<C.OperationView> {
    const { env, log } = this.shell;
    const head = log.headFor(tenantId);
    if (!head) return err(missing(log.store, tenantId));
    const nowMs = Date.now();
    const check = transition(head.state, { type: "retry_now", by }, head.frozen.plan, nowMs);
    if (!check.ok) return check;
    const gathered = await gatherRetryNow(env, log, head, nowMs);
    if (!gathered.ok) return gathered;
    if (gathered.value.denial) return this.act(tenantId, gathered.value.denial);
    const step = this.apply({ type: "retry_now", by }, gathered.value.secrets);
    await this.shell.outbox.settled();
    return step.ok ? ok(viewOf(log)) : step;
  }

  private async act(tenantId: string, event: OperationEvent): Reply<C.OperationView> {
    const { log } = this.shell;
    if (!log.headFor(tenantId)) return err(missing(log.store, tenantId));
    const step = this.apply(event, null);
    await Promise.all([this.shell.outbox.settled(), this.shell.lockWork()]);
    return step.ok ? ok(viewOf(log)) : step;
  }

  /** Only by the run that created it; one that overtakes its submit is kept (retention.ts cancelEarly). */
  async cancel(tenantId: string, by: string, runId: string): Reply<C.OperationView> {
    const { log } = this.shell;
    const pruned = prunedFor(log.store, tenantId);
    if (pruned) return err(pruned);
    if (!log.head()) return err(cancelEarly(log.store, tenantId, runId, by, Date.now()));
    const head = log.headFor(tenantId);
    if (!head || head.frozen.run_id !== runId) return err({ code: "not_found" });
    const step = this.apply({ type: "cancel", by }, null);
    await this.shell.outbox.settled();
    return step.ok ? ok(viewOf(log)) : step;
  }
}
