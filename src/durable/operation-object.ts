// OperationObject: one per logical operation. A thin shell around domain/operation.ts: load the
// row, call transition(), persist state + trace in one transactionSync, then perform the effects.
// The attempt is durable before fetch with no await in between (the output gate holds the request
// until the write is confirmed); results are applied by compare-and-set on the attempt number.
// Memory holds only what cannot be stored: whether this instance has a request in flight. Nothing
// here throws across the stub: a stored tool that no longer compiles is an observation, not an error.
// Tenant secrets are fetched for each attempt before its row is written (never cached, never
// stored); approvals mirror into the tenant's inbox, which is derived from this log, through a
// transactional outbox: each update is a row written in the transition's own transaction, delivered
// after the commit and by the alarm until the tenant acknowledges it (a crash or a failed RPC delays
// it, never loses it). No RPC failure before a send is a throw: it is a typed answer, a deferral or a
// `not_sent` observation, and an alarm whose work fails re-arms itself with backoff.
// Trace events are annotated, redacted by the tool's `redact` pointers and hash-chained inside the
// transaction that appends them (domain/trace.ts); each attempt and decision is one JSON log line; a
// recorded operation's spans are pushed to OTEL_EXPORTER_OTLP_ENDPOINT in the background. A settled
// operation is pruned by its own alarm after the retention period, leaving a tombstone: the same
// operation id (a re-proposal) then answers `pruned`, never a second execution.
import { DurableObject } from "cloudflare:workers";
import { needsApproval, type Decision } from "../domain/operation/index.ts";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import type { RepeatSafety } from "../domain/classify.ts";
import { envelopeFor, refusal, type Envelope } from "../domain/envelope.ts";
import type { LookupObservation, Observation } from "../domain/observation.ts";
import {
  isSettled,
  LOCK_RECHECK_MS,
  nextDueAtMs,
  stateAlarmAtMs,
  transition,
  WATCHDOG_GRACE_MS,
  type Effect,
  type OperationPlan,
  type OperationEvent,
  type OperationState,
  type Step,
  type TraceEvent,
  type TransitionError,
} from "../domain/operation/index.ts";
import { otlpTrace } from "../domain/otlp.ts";
import { redactDocument, redactionFor, scrub, type Redaction } from "../domain/redact.ts";
import { presentPointers } from "../domain/redact.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { backoffSinceMs } from "../domain/retry-deferral.ts";
import { idempotencyTrust } from "../domain/verification.ts";
import { logLine, reportedEvent, traceStep } from "../domain/trace.ts";
import { seal, verifyChain, type ChainCheck, type ChainLink } from "../domain/trace-chain.ts";
import { configFor, hostPolicy, requireVerifiedIdempotency, retentionMs } from "../config.ts";
import type { Env } from "./env.ts";
import { resolveTool } from "../tools/catalog.ts";
import { sendAttempt, sendLookup, sendPreview, type Preview } from "../tools/http-tool.ts";
import type { ToolSource, ToolSpec } from "../tools/spec.ts";
import type { FrozenInput } from "../domain/turn/turn.ts";
import { OPERATION_SCHEMA } from "./store/operation-rows.ts";
import { SqlStore } from "./store/sql-store.ts";
import { collectorFor, pushSpans } from "./otlp-push.ts";
import { askRetryBudget, budgetKeyFor, noteFirstAttempt } from "./retry-budget-client.ts";
import { lockStub, runStub, tenantStub } from "./stubs.ts";
import type { ApprovalItem, UnknownItem } from "./tenant/inbox.ts";
import { verificationStatuses } from "./tenant/registry.ts";

/** Deliveries of one recorded result kept in its trace (later replays are answered, not traced). */
export const MAX_REPORTED_EVENTS = 100;
/** An outbox row not acknowledged is delivered again after 5 s, then at doubling gaps up to 10 min. */
export const OUTBOX_RETRY_MS = 5_000;
export const OUTBOX_RETRY_MAX_MS = 600_000;
/** What the approvals inbox keeps of a preview's body (the operation keeps all of it). */
export const INBOX_PREVIEW_BYTES = 16 * 1024;

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
  | "operation.recorded"
  | "operation.resent";
/** An outbox row's payload: the whole new standing, so a delivery is an idempotent upsert at the tenant. */
export type OutboxPayload =
  | { target: "approval"; item: ApprovalItem }
  | { target: "unknown"; open: boolean; item: UnknownItem };

export type SubmitRequest = {
  tenantId: string;
  runId: string;
  callId: string;
  source: ToolSource;
  /** The call's input as frozen by the run: value, canonical JSON text and its hash, as one value. */
  input: FrozenInput;
  operationId: string;
  idempotencyKey: string;
  /** The run's end user: who asked, for the approvals inbox and four eyes. */
  userId: string;
  waitMs: number;
};
/**
 * `executedBy`: the call that created the operation (a replay from another call did not execute it).
 * `terminal`: recorded, so this envelope will never change and callers may keep it.
 */
export type OperationReply = {
  envelope: Envelope;
  settled: boolean;
  terminal: boolean;
  inputHash: string;
  executedBy: string;
  rowsWritten: number;
  /** When it was recorded (null: not yet): a cached copy is good only until retention prunes it. */
  recordedAtMs: number | null;
};
export type OperationView = {
  operation_id: string;
  tool: string;
  run_id: string;
  call_id: string;
  phase: OperationState["phase"];
  input_hash: string;
  idempotency_key: string;
  /** How the tool can be repeated: only `keyed` may be resent after an unknown outcome (the console's resolve form). */
  repeat_safety: RepeatSafety;
  created_at: string;
  result: Envelope;
  /** The result arrived after the operation was cancelled; it was not reported to the closed turn. */
  late: boolean;
  /** Present when the call needed a person's decision. */
  approval: ApprovalView | null;
};
export type ApprovalView = {
  state: "pending" | "approved" | "rejected" | "expired" | "cancelled";
  requested_by: string;
  requested_at: string;
  expires_at: string;
  input_hash: string;
  policy_version: string;
  four_eyes: boolean;
  /** The tool's preview answer, when it has one (null while it runs or when it has none). */
  preview: Preview | null;
  decided_by: string | null;
  decided_at: string | null;
  reason: string | null;
};
/**
 * What a person deciding an approval sees: the frozen arguments and target as they will be sent,
 * hidden fields included, and which fields (`hidden`, the tool's `redact` pointers present in
 * them) every other copy — trace, inbox, logs, exports — shows as "[redacted]".
 */
export type ApprovalInput = {
  arguments: Record<string, unknown>;
  target: string;
  hidden: string[];
  input_hash: string;
  policy_version: string;
};
export type OperationError =
  | { code: "not_found" }
  | TransitionError
  | { code: "invalid_tool"; detail: string }
  /**
   * Settled (as `status`, the recorded outcome's) and pruned after the retention period: it will
   * not run again (HTTP 410). `input_hash`: what it was, so an identical request can be told apart.
   */
  | {
      code: "pruned";
      operation_id: string;
      pruned_at_ms: number;
      status: string;
      input_hash: string;
    }
  /** The run could not be asked before a send; nothing was decided or sent (HTTP 503, try again). */
  | { code: "unavailable"; detail: string };
/** What `peek` saw: the operation as it stands, never created or changed by asking. */
export type OperationPeek = {
  phase: OperationState["phase"];
  run_id: string;
  input_hash: string;
  envelope: Envelope;
};
export type Verdict = {
  outcome: "succeeded" | "failed" | "resend";
  result: unknown;
  reason: string;
  by: string;
};

/** The call as frozen at validation (row 1 of the log); it never changes afterwards. */
type FrozenRow = {
  id: string;
  tenant_id: string;
  run_id: string;
  call_id: string;
  source: ToolSource;
  input: string;
  input_hash: string;
  plan: OperationPlan;
  created_at: number;
  /** The tool's risk, redaction pointers and trace opt-ins, frozen with the call (absent in older rows). */
  risk?: string;
  redact?: string[];
  trace_content?: { arguments: boolean; result: boolean };
};
type Head = { seq: number; state: OperationState; frozen: FrozenRow };
type Fixed = { spec: ToolSpec; input: FrozenInput };
type Loaded = Fixed & { plan: OperationPlan };
/** The tenant secrets one attempt may use, fetched before its row is written (no await between row and fetch). */
type Secrets = Result<Record<string, string>, string>;
/** An RPC's answer, or why there was none (the callee threw or could not be reached). */
type Asked<T> = { answered: true; value: T } | { answered: false; detail: string };
type OutboxRow = { seq: number; kind: OutboxKind; payload: string; attempts: number };

/** Asks without throwing: a rejected RPC becomes a value the caller must handle. */
async function ask<T>(question: () => Promise<T>): Promise<Asked<T>> {
  try {
    return { answered: true, value: await question() };
  } catch (error) {
    return { answered: false, detail: String(error) };
  }
}
const UNAVAILABLE_DETAIL =
  "toolgate could not ask the run whether this call may still run; nothing was decided or sent. Try again shortly.";

export class OperationObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, OPERATION_SCHEMA);
  private inFlight: Promise<void> | null = null;
  private abort: AbortController | null = null;
  private fixed: Fixed | null = null;
  private readonly listeners = new Set<() => void>();
  /** The approver's preview request, while it runs (bounded by the tool's timeout). */
  private previewing: Promise<void> = Promise.resolve();
  /** Lock requests and releases, in order; replies wait for them so the envelope shows the standing. */
  private lockWork: Promise<void> = Promise.resolve();
  /** Outbox deliveries, in order; replies wait for them so a listing right after sees the change. */
  private inboxWrites: Promise<void> = Promise.resolve();
  /** See deliveries(). */
  private reportedKeys: Set<string> | null = null;

  async submit(req: SubmitRequest): Promise<Result<OperationReply, OperationError>> {
    const rowsBefore = this.store.rowsWritten;
    // Pruned: the stored outcome is gone, and running it again could repeat the effect.
    const pruned = this.prunedFor(req.tenantId);
    if (pruned) return err(pruned);
    const existing = this.head();
    if (existing && existing.frozen.input_hash !== req.input.hash) {
      // Same logical operation, different frozen input: a changed amount or recipient is a new decision.
      const envelope = refusal(
        "rejected",
        req.operationId,
        "idempotency_conflict",
        "This operation was already requested with different arguments; toolgate will not change it. Do not retry; tell the user what was already done.",
      );
      return ok({
        envelope,
        settled: true,
        terminal: false,
        inputHash: req.input.hash,
        executedBy: existing.frozen.call_id,
        rowsWritten: 0,
        recordedAtMs: null,
      });
    }
    if (!existing) {
      const spec = resolveTool(req.source, hostPolicy(this.env));
      if (!spec.ok) return err({ code: "invalid_tool", detail: spec.error.detail });
      const rule = spec.value.approval;
      const input = req.input.value;
      const asks = needsApproval(rule, input);
      // The approval binds to this exact tool source (its hash is the policy version).
      const policyVersion = asks ? await sha256Hex(canonicalJson(req.source)) : null;
      const [secrets, verified] = await Promise.all([
        // Unanswered: the attempt asks again itself, and ends `not_sent` if that fails too.
        asks
          ? null
          : ask(() => this.secretsFor(req.tenantId, spec.value)).then((asked) =>
              asked.answered ? asked.value : null,
            ),
        verificationStatuses(this.env, req.tenantId, [[spec.value.name, req.source]]),
      ]);
      // The awaits let other calls in: one of them may have started this operation meanwhile.
      if (this.head()) return this.submit(req);
      // Frozen with the plan: a tool whose key is not verified is flagged, or (policy on) never resent.
      const trust = idempotencyTrust(
        spec.value.risk,
        spec.value.idempotency.mode,
        spec.value.buildReconcile !== null,
        verified[spec.value.name] ?? null,
        requireVerifiedIdempotency(this.env),
      );
      const nowMs = Date.now();
      const plan: OperationPlan = {
        operationId: req.operationId,
        idempotencyKey: req.idempotencyKey,
        safety: trust.safety,
        retry: spec.value.retry,
        timeoutMs: spec.value.timeoutMs,
        hasLookup: trust.hasLookup,
        ...(trust.unverified ? { unverified: trust.unverified } : {}),
        settleMs: spec.value.reconcileSettleMs,
        approval:
          policyVersion === null
            ? null
            : {
                inputHash: req.input.hash,
                policyVersion,
                requestedBy: req.userId,
                fourEyes: rule.fourEyes,
                expiresAtMs: nowMs + rule.expiresInMs,
                preview: spec.value.buildPreview !== null,
              },
        resource: spec.value.risk === "read" ? null : spec.value.resourceKey(input),
      };
      // Only the log: the other tables are created where first needed (cancel, lock grant, pruning).
      this.store.ensureTable("op_log");
      const frozen: FrozenRow = {
        id: req.operationId,
        tenant_id: req.tenantId,
        run_id: req.runId,
        call_id: req.callId,
        source: req.source,
        input: req.input.canonical,
        input_hash: req.input.hash,
        plan,
        created_at: nowMs,
        risk: spec.value.risk,
        redact: spec.value.redact,
        trace_content: spec.value.traceContent,
      };
      const cancelledBy = this.cancelledEarly(req.tenantId, req.runId);
      const started = this.apply(
        {
          type: "start",
          inputHash: req.input.hash,
          callId: req.callId,
          tool: spec.value.name,
          cancelledBy,
        },
        frozen,
        secrets,
      );
      if (!started.ok) return started;
    } else {
      this.recoverOrphan();
    }
    await Promise.all([this.previewing, this.inboxWrites, this.lockWork]);
    await this.waitFor(Date.now() + req.waitMs);
    await this.inboxWrites;
    return ok(this.reply(req, this.store.rowsWritten - rowsBefore));
  }

  /**
   * Read-only, and never creates anything: how the operation stands, or that there is none (or
   * that it was pruned, with its input hash). The run asks this before refusing a call by a budget
   * or a cancel: a call identical to an existing operation is a replay, never refused.
   */
  async peek(tenantId: string): Promise<Result<OperationPeek, OperationError>> {
    const head = this.headFor(tenantId);
    if (!head) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    return ok({
      phase: head.state.phase,
      run_id: head.frozen.run_id,
      input_hash: head.frozen.input_hash,
      envelope: envelopeFor(head.frozen.id, head.state, head.frozen.plan.safety),
    });
  }

  async get(tenantId: string, waitMs: number): Promise<Result<OperationView, OperationError>> {
    if (!this.headFor(tenantId)) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    this.recoverOrphan();
    await this.waitFor(Date.now() + waitMs);
    await this.inboxWrites;
    return ok(this.view());
  }

  /**
   * The call as an approver must see it (ApprovalInput). Read-only, for callers holding
   * approvals:decide; never copied into the inbox row or the trace, which stay redacted.
   */
  async approvalInput(tenantId: string): Promise<Result<ApprovalInput, OperationError>> {
    const head = this.headFor(tenantId);
    if (!head) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    const approval = head.frozen.plan.approval;
    if (!approval) return err({ code: "not_awaiting_approval", phase: head.state.phase });
    const input = JSON.parse(head.frozen.input) as Record<string, unknown>;
    const loaded = this.loadFixed();
    return ok({
      arguments: input,
      target: loaded.ok ? loaded.value.spec.describeTarget(input) : "(the tool no longer compiles)",
      hidden: presentPointers(head.frozen.redact ?? [], input),
      input_hash: approval.inputHash,
      policy_version: approval.policyVersion,
    });
  }

  /**
   * A person's decision on a call awaiting approval. Decided once: a later decision (or one that
   * lost a race) gets the recorded one back. Approval is not authorization: before the first
   * attempt the run checks scopes, deadline, cancellation and that the tool is still this version.
   */
  async decide(
    tenantId: string,
    decision: Decision,
  ): Promise<Result<OperationView, OperationError>> {
    const head = this.headFor(tenantId);
    if (!head) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    const approval = head.frozen.plan.approval;
    if (!approval) return err({ code: "not_awaiting_approval", phase: head.state.phase });
    let denial: Extract<OperationEvent, { type: "decide" }>["denial"] = null;
    let secrets: Secrets | null = null;
    if (head.state.phase === "awaiting_approval" && decision.verdict === "approve") {
      const loaded = this.loadFixed();
      if (!loaded.ok)
        denial = {
          status: "failed",
          code: "permanent_failure",
          message: `toolgate could not run this tool (${loaded.error}). It was not executed. Do not retry; tell the user.`,
        };
      else {
        const spec = loaded.value.spec;
        const [verdict, resolved] = await Promise.all([
          ask(() =>
            runStub(this.env, head.frozen.run_id).authorize(
              tenantId,
              spec.name,
              approval.policyVersion,
            ),
          ),
          ask(() => this.secretsFor(tenantId, spec)),
        ]);
        // Unasked is not allowed: still awaiting approval (its expiry alarm stands), decide again.
        if (!verdict.answered) {
          console.error("approval: the run could not be asked", head.frozen.id, verdict.detail);
          return err({ code: "unavailable", detail: UNAVAILABLE_DETAIL });
        }
        denial = verdict.value.ok ? null : verdict.value.error;
        // Unanswered secrets: the attempt asks again itself (and ends `not_sent` if it cannot).
        secrets = resolved.answered ? resolved.value : null;
      }
    }
    const step = this.apply({ type: "decide", decision, denial }, null, secrets);
    await this.inboxWrites;
    if (!step.ok && step.error.code !== "not_awaiting_approval") return step;
    return ok(this.view());
  }

  async resolve(
    tenantId: string,
    verdict: Verdict,
  ): Promise<Result<OperationView, OperationError>> {
    const head = this.headFor(tenantId);
    if (!head) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    let secrets: Secrets | null = null;
    if (
      verdict.outcome === "resend" &&
      head.state.phase === "outcome_unknown" &&
      head.frozen.plan.safety === "keyed"
    ) {
      // A resend is a new execution: the run must still allow it, exactly as before a retry.
      const loaded = this.loadFixed();
      const [allowed, resolved] = await Promise.all([
        ask(() =>
          runStub(this.env, head.frozen.run_id).authorize(
            head.frozen.tenant_id,
            toolName(head.frozen),
          ),
        ),
        loaded.ok ? ask(() => this.secretsFor(tenantId, loaded.value.spec)) : null,
      ]);
      // Unasked is not allowed: it still waits for a person, who may send the verdict again.
      if (!allowed.answered) {
        console.error("resend: the run could not be asked", head.frozen.id, allowed.detail);
        return err({ code: "unavailable", detail: UNAVAILABLE_DETAIL });
      }
      if (!allowed.value.ok)
        return err({
          code: "resend_not_allowed",
          detail: `the run no longer allows sending it (${allowed.value.error.code}); resolve it as succeeded or failed`,
        });
      secrets = resolved?.answered ? resolved.value : null;
    }
    const step = this.apply({ type: "resolve", ...verdict }, null, secrets);
    await this.inboxWrites;
    return step.ok ? ok(this.view()) : step;
  }

  /** The stored events, in order: annotated, redacted and hash-chained when they were appended. */
  async traceFor(tenantId: string): Promise<Result<TraceEvent[], OperationError>> {
    if (!this.headFor(tenantId)) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    return ok(this.events());
  }

  /** Checks the hash chain of the stored log: where it breaks, if it does (GET …?verify=1). */
  async verify(tenantId: string): Promise<Result<ChainCheck, OperationError>> {
    if (!this.headFor(tenantId)) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    return ok(verifyChain(this.events()));
  }

  /**
   * The recorded result went to the caller in a turn response: appended once per (turn, format),
   * so "recorded but never reported" stays visible. Only a recorded operation is reported, and only
   * its first MAX_REPORTED_EVENTS deliveries: an agent re-proposing a settled call forever is
   * answered every time but cannot grow the log (and every trace export) without bound.
   */
  async reported(
    tenantId: string,
    turnId: string,
    format: string,
  ): Promise<Result<{ appended: boolean; full: boolean }, OperationError>> {
    const head = this.headFor(tenantId);
    if (!head) return err(this.prunedFor(tenantId) ?? { code: "not_found" });
    if (head.state.phase !== "recorded") return ok({ appended: false, full: false });
    const delivered = this.deliveries();
    const key = `${turnId} ${format}`;
    const full = () => delivered.size >= MAX_REPORTED_EVENTS;
    if (delivered.has(key) || full()) return ok({ appended: false, full: full() });
    const nowMs = Date.now();
    const appended = this.store.transaction(() => {
      const current = this.head()!;
      const events = seal([reportedEvent(turnId, format, nowMs)], this.lastLink());
      this.store.run(
        "INSERT INTO op_log (seq, at_ms, state, events, frozen) VALUES (?, ?, ?, ?, NULL)",
        current.seq + 1,
        nowMs,
        JSON.stringify(current.state),
        JSON.stringify(events),
      );
      return events;
    });
    delivered.add(key);
    this.log(appended, head.frozen);
    return ok({ appended: true, full: full() });
  }

  /**
   * Cancelled by the run `runId`, which may cancel only an operation it created: another run's
   * (a tenant-scoped key shared across runs) is "not found" to it. A cancel can overtake its
   * operation's dispatch (the run closes a call whose submit is still in flight): then a tombstone
   * bound to that run is kept, and the operation, when that run's submit arrives, is recorded
   * cancelled without sending anything. Another run's submit does not obey it.
   */
  async cancel(
    tenantId: string,
    by: string,
    runId: string,
  ): Promise<Result<OperationView, OperationError>> {
    const pruned = this.prunedFor(tenantId);
    if (pruned) return err(pruned);
    if (!this.head()) {
      this.store.ensureTable("op_early_cancel");
      this.store.run(
        "INSERT OR IGNORE INTO op_early_cancel (run_id, tenant_id, by, at_ms) VALUES (?, ?, ?, ?)",
        runId,
        tenantId,
        by,
        Date.now(),
      );
      return err({ code: "not_found" });
    }
    const head = this.headFor(tenantId);
    if (!head || head.frozen.run_id !== runId) return err({ code: "not_found" });
    const step = this.apply({ type: "cancel", by }, null);
    await this.inboxWrites;
    return step.ok ? ok(this.view()) : step;
  }

  // ── resource locks: the lock object asks and tells the operations that use it ──────────────

  /** Asked by a ResourceLockObject whose lease for this operation expired: does it still need it? */
  async lockHolderStatus(): Promise<"active" | "waiting" | "settled" | "gone"> {
    const head = this.head();
    if (!head) return "gone";
    if (head.state.phase === "recorded") return "settled";
    // Only a person moves it on: the lock may ask far less often (domain/lock.ts PERSON_LEASE_MS).
    return isSettled(head.state) ? "waiting" : "active";
  }

  /** Told by a ResourceLockObject that this operation now holds `resource` (FIFO turn reached). */
  async onLockGranted(resource: string, fencingToken: number): Promise<void> {
    if (this.head()?.frozen.plan.resource !== resource) return;
    await this.startUnderLease(fencingToken);
  }

  /**
   * Never left to the platform's retries of a throwing alarm (a few, over about two minutes): if
   * anything here fails, the alarm is set again with backoff and the error only logged.
   */
  override async alarm(): Promise<void> {
    try {
      await this.runAlarm();
    } catch (error) {
      console.error("operation alarm failed; it runs again by itself", String(error));
      this.armAt(Date.now() + this.fallbackDelayMs());
    }
  }

  private async runAlarm(): Promise<void> {
    if (!this.head()) return;
    // Outbox rows the tenant has not acknowledged go first. An alarm that came for them while the
    // state's own time is still ahead (a retry due later) does nothing else: no early retry.
    if (this.outboxPending()) {
      this.armAt(Date.now() + this.fallbackDelayMs());
      this.inboxWrites = this.inboxWrites.then(() => this.deliverOutbox());
      await this.inboxWrites;
      const due = nextDueAtMs(this.head()!.state);
      if (due !== null && due > Date.now()) return;
    }
    const head = this.head()!;
    if (head.state.phase === "recorded") return this.retire(head.frozen, head.state);
    if (head.state.phase === "awaiting_lock") {
      // A waiter asks the run on each recheck: it stops at the run's deadline or cancel instead of
      // queueing for ever. Unanswered: it keeps waiting (the recheck below is armed either way).
      this.armAt(Date.now() + this.fallbackDelayMs());
      const verdict = await ask(() =>
        runStub(this.env, head.frozen.run_id).authorize(
          head.frozen.tenant_id,
          toolName(head.frozen),
        ),
      );
      if (verdict.answered && !verdict.value.ok) {
        this.apply({ type: "denied", ...verdict.value.error }, null);
        await this.lockWork;
        return;
      }
    }
    // Before a retry or a resend, ask the run whether this may still execute: scopes may have
    // been revoked, the tool withdrawn or the deadline passed while the alarm waited.
    const sends =
      head.state.phase === "retry_scheduled" ||
      (head.state.phase === "outcome_unknown" && head.state.reconcile === "resend");
    let secrets: Secrets | null = null;
    if (sends) {
      const nowMs = Date.now();
      // Armed before the first await: whatever happens to the questions below (a throw, a hang, the
      // object dying), this alarm comes back by itself. The transition below overwrites it.
      this.armAt(nowMs + this.fallbackDelayMs());
      const loaded = this.loadFixed();
      // An automatic send also asks the host's retry budget (a person's resend never does).
      const budget = loaded.ok
        ? budgetKeyFor(this.env, head.frozen.tenant_id, loaded.value.spec, loaded.value.input)
        : null;
      const [verdict, resolved, allowed] = await Promise.all([
        ask(() =>
          runStub(this.env, head.frozen.run_id).authorize(
            head.frozen.tenant_id,
            toolName(head.frozen),
          ),
        ),
        loaded.ok
          ? ask(() => this.secretsFor(head.frozen.tenant_id, loaded.value.spec))
          : Promise.resolve(null),
        budget ? askRetryBudget(this.env, budget, nowMs) : Promise.resolve({ ok: true as const }),
      ]);
      if (!verdict.answered || (resolved && !resolved.answered)) {
        const unanswered = !verdict.answered
          ? `the run could not be asked whether it may still run (${verdict.detail})`
          : `the tenant's secrets could not be read (${resolved && !resolved.answered ? resolved.detail : ""})`;
        // Nothing was sent: the same attempt waits (backing off, within its elapsed budget).
        const current = this.head()!.state;
        const since = "firstAttemptAtMs" in current ? current.firstAttemptAtMs : nowMs;
        this.apply(
          {
            type: "retry_deferred",
            untilMs: nowMs + backoffSinceMs(since, nowMs),
            reason: "unavailable",
            detail: `toolgate could not prepare the request: ${unanswered}; nothing was sent`,
          },
          null,
        );
        await this.inFlight;
        return;
      }
      if (!verdict.value.ok) {
        // After an ambiguous attempt a denial may start a status lookup: keep the event open for it.
        this.apply({ type: "denied", ...verdict.value.error }, null);
        await this.inFlight;
        return;
      }
      if (!allowed.ok) {
        const { reason, detail } = allowed;
        this.apply(
          { type: "retry_deferred", untilMs: nowMs + allowed.waitMs, reason, detail },
          null,
        );
        await this.inFlight;
        return;
      }
      secrets = resolved?.answered ? resolved.value : null;
    }
    this.apply({ type: "alarm", inFlight: this.inFlight !== null }, null, secrets);
    await Promise.all([this.inboxWrites, this.lockWork]);
    // Keep this event open while the attempt it started runs, so the object stays alive for it.
    await this.inFlight;
  }

  // ── shell ────────────────────────────────────────────────────────────────────────────────────

  /**
   * A stored attempt or lookup that this instance is not running belongs to a previous instance
   * that died: classify it now (as the watchdog alarm would) instead of making callers wait.
   */
  private recoverOrphan(): void {
    const phase = this.head()?.state.phase;
    if ((phase === "executing" || phase === "reconciling") && this.inFlight === null)
      this.apply({ type: "alarm", inFlight: false }, null);
  }

  /**
   * One transition = one synchronous transaction appending one log row (state + trace events);
   * effects run only after it. `frozen` is given exactly once, for the `start` event.
   */
  private apply(
    event: OperationEvent,
    frozen: FrozenRow | null,
    secrets: Secrets | null = null,
  ): Result<OperationState, OperationError> {
    const nowMs = Date.now();
    let appended: TraceEvent[] = [];
    let entered: OperationState["phase"] | null = null;
    let outboxed = false;
    const result = this.store.transaction((): Result<Step, OperationError> => {
      const head = this.head();
      const plan = head?.frozen.plan ?? frozen?.plan;
      const row = head?.frozen ?? frozen;
      if (!plan || !row) return err({ code: "not_found" });
      const step = transition(head?.state ?? null, event, plan, nowMs);
      if (step.ok && step.value.changed) {
        appended = traceStep({
          prev: head?.state ?? null,
          next: step.value.state,
          events: step.value.trace,
          nowMs,
          last: head ? this.lastLink() : null,
          details: {
            redaction: this.redaction(row),
            risk: row.risk ?? null,
            arguments: row.trace_content?.arguments ? JSON.parse(row.input) : undefined,
            includeResult: row.trace_content?.result ?? false,
          },
        });
        if (step.value.state.phase !== head?.state.phase) entered = step.value.state.phase;
        this.store.run(
          "INSERT INTO op_log (seq, at_ms, state, events, frozen) VALUES (?, ?, ?, ?, ?)",
          (head?.seq ?? 0) + 1,
          nowMs,
          JSON.stringify(step.value.state),
          JSON.stringify(appended),
          head ? null : JSON.stringify(frozen),
        );
        // The lease's fencing token, durable with the transition that starts the first attempt under it.
        if (event.type === "lock_granted") {
          this.store.ensureTable("op_lease");
          this.store.run(
            "INSERT OR REPLACE INTO op_lease (k, resource, fencing_token) VALUES (1, ?, ?)",
            plan.resource ?? "",
            event.fencingToken,
          );
        }
        // What the tenant plane must learn, in this same transaction: a crash after the commit
        // delays its delivery, never loses it (and nothing is told about a transition that did not commit).
        for (const effect of step.value.effects) {
          const row = this.outboxRow(effect, event, step.value.state, nowMs);
          if (!row) continue;
          this.store.ensureTable("op_outbox");
          this.store.run(
            "INSERT INTO op_outbox (seq, kind, payload, attempts, next_at_ms, at_ms) VALUES (?, ?, ?, 0, ?, ?)",
            (head?.seq ?? 0) + 1,
            row.kind,
            JSON.stringify(row.payload),
            nowMs + OUTBOX_RETRY_MS,
            nowMs,
          );
          outboxed = true;
        }
      }
      return step;
    });
    if (!result.ok) return result;
    const state = result.value.state;
    // Nothing after the commit may throw: the effects below (lock release, outbox, alarms) must run.
    try {
      if (appended.length > 0) this.log(appended, this.head()!.frozen);
      // Recorded: the spans are complete. Pushed in the background; a collector that is down or slow
      // changes nothing here (the push has its own timeout and its failure is only logged).
      if (entered === "recorded") this.pushRecorded();
    } catch (error) {
      console.error("trace log or export failed after a commit", String(error));
    }
    let armed = false;
    for (const effect of result.value.effects) {
      switch (effect.kind) {
        case "set_alarm":
          this.armAt(effect.atMs);
          armed = true;
          break;
        case "clear_alarm":
          // Nothing more will happen by itself; a recorded operation's only alarm is its pruning.
          this.armAt(
            state.phase === "recorded" ? state.recordedAtMs + retentionMs(this.env) : null,
          );
          armed = true;
          break;
        case "send_attempt":
          this.track(() => this.attempt(effect.attempt, secrets));
          break;
        case "abort_attempt":
          this.abort?.abort(new Error("cancelled"));
          break;
        case "send_lookup":
          this.track(() => this.lookup(effect.lookups));
          break;
        case "inbox":
        case "needs_person":
          // Written to the outbox inside the transaction; delivered below.
          break;
        case "send_preview":
          this.previewing = this.preview();
          break;
        case "acquire_lock":
          this.lockWork = this.lockWork.then(() => this.acquireLock());
          break;
        case "release_lock":
          this.lockWork = this.lockWork.then(async () => void (await this.releaseLock()));
          break;
      }
    }
    if (outboxed) {
      // A redelivery is armed with the commit (the alarm never waits past the oldest row's time).
      if (!armed) this.armAt(this.ownAlarmAtMs());
      this.inboxWrites = this.inboxWrites.then(() => this.deliverOutbox());
    }
    if (result.value.changed) this.notify();
    return ok(result.value.state);
  }

  /**
   * Runs one request and always clears `inFlight` afterwards, so nothing can wedge the object: if
   * anything unforeseen throws, the watchdog alarm finds no request in flight and classifies it as
   * a crash. (`await` always yields first, so `running` is assigned before `finally` runs.)
   */
  private track(work: () => Promise<void>): void {
    let running: Promise<void> | null = null;
    running = (async () => {
      try {
        await work();
      } catch (error) {
        console.error(
          "operation request failed unexpectedly; the watchdog will classify it",
          error,
        );
      } finally {
        // A transition inside `work` may already have started the next request (a lookup).
        if (this.inFlight === running) this.inFlight = null;
      }
    })();
    this.inFlight = running;
  }

  /**
   * `prefetched`: the secrets fetched before the attempt row was written; an attempt started without
   * them fetches them here, before any byte is sent. A secret that is gone is a configuration
   * failure observed without sending: typed, never a throw. A tenant that does not answer is
   * `not_sent` (retried like any attempt that provably sent nothing).
   */
  private async attempt(attempt: number, prefetched: Secrets | null): Promise<void> {
    const loaded = this.loadFixed();
    const abort = new AbortController();
    this.abort = abort;
    let observation: Observation;
    try {
      const asked: Asked<Secrets> | null = !loaded.ok
        ? null
        : prefetched
          ? { answered: true, value: prefetched }
          : await ask(() => this.secretsFor(this.head()!.frozen.tenant_id, loaded.value.spec));
      const secrets = asked?.answered ? asked.value : null;
      observation = !loaded.ok
        ? { kind: "config_error", detail: loaded.error }
        : !asked?.answered
          ? {
              kind: "not_sent",
              detail: `toolgate could not read the tenant's secrets for this attempt (${asked?.detail ?? ""})`,
            }
          : !secrets!.ok
            ? { kind: "config_error", detail: secrets!.error }
            : await sendAttempt(loaded.value.spec, loaded.value.input, {
                idempotencyKey: loaded.value.plan.idempotencyKey,
                secrets: secrets!.value,
                config: configFor(this.env, loaded.value.spec.configNames),
                signal: abort.signal,
                fencingToken: this.fencingToken(),
              });
    } catch (error) {
      // sendAttempt never throws by contract; if it does, the request may already have gone out.
      observation = {
        kind: "connection_lost",
        detail: `toolgate failed while handling the attempt: ${String(error)}`,
      };
    } finally {
      if (this.abort === abort) this.abort = null;
    }
    // Counted for the host's retry budget after the fact: nothing on the first attempt's path.
    const budget =
      attempt === 1 &&
      loaded.ok &&
      observation.kind !== "config_error" &&
      observation.kind !== "not_sent"
        ? budgetKeyFor(
            this.env,
            this.head()!.frozen.tenant_id,
            loaded.value.spec,
            loaded.value.input,
          )
        : null;
    if (budget) noteFirstAttempt(this.env, budget, Date.now());
    this.apply({ type: "attempt_finished", attempt, observation }, null);
  }

  private async lookup(lookups: number): Promise<void> {
    const loaded = this.loadFixed();
    let observation: LookupObservation;
    try {
      const secrets = loaded.ok
        ? await this.secretsFor(this.head()!.frozen.tenant_id, loaded.value.spec)
        : null;
      observation = !loaded.ok
        ? { kind: "inconclusive", detail: loaded.error }
        : !secrets!.ok
          ? { kind: "inconclusive", detail: secrets!.error }
          : await sendLookup(loaded.value.spec, loaded.value.input, {
              idempotencyKey: loaded.value.plan.idempotencyKey,
              secrets: secrets!.value,
              config: configFor(this.env, loaded.value.spec.configNames),
            });
    } catch (error) {
      observation = {
        kind: "inconclusive",
        detail: `toolgate failed while handling the lookup: ${String(error)}`,
      };
    }
    this.apply({ type: "lookup_finished", lookups, observation }, null);
  }

  private async preview(): Promise<void> {
    const loaded = this.loadFixed();
    const head = this.head()!;
    let preview: Preview = { status: null, body: null, detail: loaded.ok ? null : loaded.error };
    if (loaded.ok) {
      const { spec, input } = loaded.value;
      const asked = await ask(() => this.secretsFor(head.frozen.tenant_id, spec));
      const secrets: Secrets = asked.answered
        ? asked.value
        : err("toolgate could not read the tenant's secrets for the preview");
      preview = secrets.ok
        ? await sendPreview(spec, input, {
            idempotencyKey: head.frozen.plan.idempotencyKey,
            secrets: secrets.value,
            config: configFor(this.env, spec.configNames),
          })
        : { status: null, body: null, detail: secrets.error };
    }
    this.apply({ type: "preview_finished", preview }, null);
  }

  /**
   * The approval request as the tenant's inbox shows it (GET /v1/approvals, the console), from the
   * log as it stands. Built inside the transition's transaction and carried by its outbox row: the
   * operation's own log is authoritative; the inbox row is derived and rewritten idempotently.
   */
  private approvalItem(state: ApprovalView["state"]): ApprovalItem | null {
    const head = this.head();
    const approval = head?.frozen.plan.approval;
    if (!head || !approval) return null;
    const loaded = this.loadFixed();
    const view = this.view();
    // The inbox (and the console page over it) shows the arguments as the trace does: redacted.
    const redaction = this.redaction(head.frozen);
    const shown = redactDocument(JSON.parse(head.frozen.input), redaction) as Record<
      string,
      unknown
    >;
    let target = "(the tool no longer compiles)";
    if (loaded.ok)
      try {
        target = scrub(loaded.value.spec.describeTarget(shown), redaction);
      } catch {
        target = "(the target could not be described)";
      }
    return {
      operation_id: head.frozen.id,
      run_id: head.frozen.run_id,
      call_id: head.frozen.call_id,
      tool: view.tool,
      target,
      arguments: shown,
      state,
      requested_by: approval.requestedBy,
      requested_at_ms: head.frozen.created_at,
      expires_at_ms: approval.expiresAtMs,
      input_hash: approval.inputHash,
      policy_version: approval.policyVersion,
      preview: inboxPreview(view.approval?.preview ?? null),
      decided_by: view.approval?.decided_by ?? null,
      decided_at_ms: view.approval?.decided_at ? Date.parse(view.approval.decided_at) : null,
      reason: view.approval?.reason ?? null,
    };
  }

  /** The outbox row one effect of a committed transition calls for (null: the tenant plane need not know). */
  private outboxRow(
    effect: Effect,
    event: OperationEvent,
    state: OperationState,
    nowMs: number,
  ): { kind: OutboxKind; payload: OutboxPayload } | null {
    if (effect.kind === "inbox") {
      const item = this.approvalItem(effect.state);
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
    if (effect.kind === "needs_person") {
      const frozen = this.head()!.frozen;
      const item = {
        operation_id: frozen.id,
        run_id: frozen.run_id,
        tool: toolName(frozen),
        since_ms: nowMs,
      };
      const kind: OutboxKind = effect.open
        ? "operation.outcome_unknown"
        : state.phase === "recorded"
          ? "operation.recorded"
          : "operation.resent";
      return { kind, payload: { target: "unknown", open: effect.open, item } };
    }
    return null;
  }

  private outboxPending(): boolean {
    return (
      this.store.exists("op_outbox") && this.store.one("SELECT seq FROM op_outbox LIMIT 1") !== null
    );
  }

  /**
   * Delivers the outbox to the tenant, oldest first. An acknowledged row is deleted; the first that
   * fails stays with its next time (backoff) and the alarm is armed for it. Never throws. The
   * tenant applies each delivery as an upsert keyed by operation id and ignores one older than what
   * it holds (`seq`), so a repeated or overtaken delivery changes nothing.
   */
  private async deliverOutbox(): Promise<void> {
    const head = this.head();
    if (!head || !this.store.exists("op_outbox")) return;
    const rows = this.store.all<OutboxRow>(
      "SELECT seq, kind, payload, attempts FROM op_outbox ORDER BY seq, kind",
    );
    if (rows.length === 0) return;
    const tenant = head.frozen.tenant_id;
    for (const row of rows) {
      const delivered = await ask(async () => {
        const payload = JSON.parse(row.payload) as OutboxPayload;
        const stub = tenantStub(this.env, tenant);
        if (payload.target === "approval") await stub.upsertApproval(payload.item, row.seq);
        else await stub.markUnknown(payload.item, payload.open, row.seq);
      });
      if (delivered.answered) {
        this.store.run("DELETE FROM op_outbox WHERE seq = ? AND kind = ?", row.seq, row.kind);
        continue;
      }
      const attempts = row.attempts + 1;
      const delayMs = Math.min(
        OUTBOX_RETRY_MAX_MS,
        OUTBOX_RETRY_MS * 2 ** Math.min(attempts - 1, 20),
      );
      this.store.run(
        "UPDATE op_outbox SET attempts = ?, next_at_ms = ? WHERE seq = ? AND kind = ?",
        attempts,
        Date.now() + delayMs,
        row.seq,
        row.kind,
      );
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
    this.armAt(this.ownAlarmAtMs());
  }

  /**
   * Sets the alarm to `atMs` (null: none), or earlier when an outbox row is due for redelivery
   * before it: every alarm the operation sets goes through here, so none can drop a redelivery.
   */
  private armAt(atMs: number | null): void {
    const outboxAtMs = this.store.exists("op_outbox")
      ? (this.store.one<{ at: number | null }>("SELECT MIN(next_at_ms) AS at FROM op_outbox")?.at ??
        null)
      : null;
    const at = atMs === null ? outboxAtMs : outboxAtMs === null ? atMs : Math.min(atMs, outboxAtMs);
    void (at === null ? this.ctx.storage.deleteAlarm() : this.ctx.storage.setAlarm(at));
  }

  /** When the current state's own alarm is due (a recorded operation's: its pruning). */
  private ownAlarmAtMs(): number | null {
    const head = this.head();
    if (!head) return null;
    return head.state.phase === "recorded"
      ? head.state.recordedAtMs + retentionMs(this.env)
      : stateAlarmAtMs(head.state, head.frozen.plan, Date.now());
  }

  /** An alarm whose work failed comes back after as long as the state has stood (5 s–10 min). */
  private fallbackDelayMs(): number {
    const nowMs = Date.now();
    const last = this.store.exists("op_log")
      ? this.store.one<{ at_ms: number }>("SELECT at_ms FROM op_log ORDER BY seq DESC LIMIT 1")
      : null;
    return backoffSinceMs(last?.at_ms ?? nowMs, nowMs);
  }

  /** Asks the resource's lock for the lease (idempotent: the holder gets its token back). */
  private async acquireLock(): Promise<void> {
    const head = this.head();
    const resource = head?.frozen.plan.resource;
    if (!head || !resource || head.state.phase !== "awaiting_lock") return;
    const leaseMs = Math.max(60_000, 2 * head.frozen.plan.timeoutMs + WATCHDOG_GRACE_MS);
    try {
      const reply = await lockStub(this.env, head.frozen.tenant_id, resource).acquire({
        tenantId: head.frozen.tenant_id,
        resource,
        operationId: head.frozen.id,
        leaseMs,
      });
      if (!reply.ok) throw new Error(reply.error.code);
      if (reply.value.state === "held") await this.startUnderLease(reply.value.fencingToken);
      else this.apply({ type: "lock_queued", blockedBy: reply.value.blockedBy }, null);
    } catch (error) {
      // Nothing was sent; the awaiting_lock alarm asks again.
      console.error(
        "resource lock request failed; retrying by alarm",
        head.frozen.id,
        String(error),
      );
    }
  }

  /**
   * The lease is ours: the first attempt may start. After waiting behind another write the run is
   * asked again first (scopes may have been revoked, the deadline passed, the run cancelled).
   */
  private async startUnderLease(fencingToken: number): Promise<void> {
    const head = this.head();
    if (!head) return;
    if (head.state.phase === "recorded") {
      this.apply({ type: "lock_granted", fencingToken }, null);
      return;
    }
    if (head.state.phase !== "awaiting_lock") return;
    const loaded = this.loadFixed();
    const waited = head.state.blockedBy !== null;
    const [verdict, secrets] = await Promise.all([
      waited
        ? ask(() =>
            runStub(this.env, head.frozen.run_id).authorize(
              head.frozen.tenant_id,
              toolName(head.frozen),
            ),
          )
        : Promise.resolve({ answered: true as const, value: ok(true as const) }),
      loaded.ok
        ? ask(() => this.secretsFor(head.frozen.tenant_id, loaded.value.spec))
        : Promise.resolve(null),
    ]);
    if (!verdict.answered) {
      // Still awaiting_lock (holding the lease): the recheck re-acquires (same token) and asks again.
      console.error("lock granted, but the run could not be asked", head.frozen.id, verdict.detail);
      this.armAt(Date.now() + LOCK_RECHECK_MS);
      return;
    }
    if (!verdict.value.ok) this.apply({ type: "denied", ...verdict.value.error }, null);
    // Unanswered secrets: the attempt asks again itself (and ends `not_sent` if it cannot).
    else
      this.apply(
        { type: "lock_granted", fencingToken },
        null,
        secrets?.answered ? secrets.value : null,
      );
  }

  /**
   * True once the lock confirmed. Nothing is written here: the `op_lease` row (the token of the last
   * grant) stays until pruning, which releases once more first (a no-op at the lock once released),
   * so a hot resource's handoff costs no extra commit per write.
   */
  private async releaseLock(): Promise<boolean> {
    const head = this.head();
    const resource = head?.frozen.plan.resource;
    if (!head || !resource) return true;
    try {
      const released = await lockStub(this.env, head.frozen.tenant_id, resource).release({
        tenantId: head.frozen.tenant_id,
        operationId: head.frozen.id,
      });
      // not_found: the lock has no row at all, so nothing is held there either.
      return released.ok || released.error.code === "not_found";
    } catch (error) {
      // The lock's lease expiry asks this operation, which answers "settled": released then.
      console.error(
        "resource lock release failed; the lease expiry will release it",
        head.frozen.id,
        String(error),
      );
      return false;
    }
  }

  private fencingToken(): string | null {
    if (!this.head()?.frozen.plan.resource || !this.store.exists("op_lease")) return null;
    const row = this.store.one<{ fencing_token: number }>(
      "SELECT fencing_token FROM op_lease WHERE k = 1",
    );
    return row ? String(row.fencing_token) : null;
  }

  /** Exactly the tenant secrets `spec` names, from this operation's own tenant. */
  private async secretsFor(tenantId: string, spec: ToolSpec): Promise<Secrets> {
    if (spec.secretNames.length === 0) return ok({});
    const resolved = await tenantStub(this.env, tenantId).secretsFor(tenantId, spec.secretNames);
    return resolved.ok ? ok(resolved.value) : err(resolved.error.detail);
  }

  /** Waits until settled, or until the next self-driven step is due after the deadline. */
  private async waitFor(deadlineMs: number): Promise<void> {
    for (;;) {
      const state = this.head()?.state;
      if (!state || isSettled(state)) return;
      const due =
        state.phase === "retry_scheduled" || state.phase === "outcome_unknown"
          ? state.dueAtMs
          : null;
      if (
        (state.phase === "retry_scheduled" || state.phase === "outcome_unknown") &&
        (due === null || due > deadlineMs)
      )
        return;
      const remainingMs = deadlineMs - Date.now();
      if (remainingMs <= 0) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.listeners.delete(done);
          resolve();
        };
        const timer = setTimeout(done, remainingMs);
        this.listeners.add(done);
      });
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  // ── trace, logs, export, retention ───────────────────────────────────────────────────────────

  /**
   * The (turn, format) pairs already reported: read from the log once per instance, then kept (a
   * scan of the whole log per report made every replay cost O(log length) rows).
   */
  private deliveries(): Set<string> {
    this.reportedKeys ??= new Set(
      this.events().flatMap((event) =>
        event.type === "reported" ? [`${String(event.turn_id)} ${String(event.format)}`] : [],
      ),
    );
    return this.reportedKeys;
  }

  private events(): TraceEvent[] {
    if (!this.store.exists("op_log")) return [];
    return this.store
      .all<{ events: string }>("SELECT events FROM op_log ORDER BY seq")
      .flatMap((row) => JSON.parse(row.events) as TraceEvent[]);
  }

  /** The newest sealed event: the next one chains onto it. */
  private lastLink(): ChainLink | null {
    const row = this.store.one<{ events: string }>(
      "SELECT events FROM op_log WHERE events != '[]' ORDER BY seq DESC LIMIT 1",
    );
    const last = row ? (JSON.parse(row.events) as TraceEvent[]).at(-1) : undefined;
    return last && typeof last.seq === "number" && typeof last.hash === "string"
      ? { seq: last.seq, hash: last.hash }
      : null;
  }

  private redactionCache: { id: string; redaction: Redaction } | null = null;
  /** The tool's pointers applied to this call's frozen input (the input itself stays unredacted). */
  private redaction(row: FrozenRow): Redaction {
    if (this.redactionCache?.id !== row.id)
      this.redactionCache = {
        id: row.id,
        redaction: redactionFor(row.redact ?? [], JSON.parse(row.input)),
      };
    return this.redactionCache.redaction;
  }

  /** One JSON line per attempt and per decision, from the already redacted events. */
  private log(events: readonly TraceEvent[], row: FrozenRow): void {
    const context = {
      run_id: row.run_id,
      call_id: row.call_id,
      operation_id: row.id,
      tool: toolName(row),
    };
    for (const event of events) {
      const line = logLine(event, context);
      if (line) console.log(JSON.stringify(line));
    }
  }

  private pushRecorded(): void {
    const head = this.head();
    // No collector configured: not even the spans are built (they cost ~2% of a new write's CPU).
    if (!head || !collectorFor(this.env)) return;
    const spans = otlpTrace(head.frozen.run_id, [
      { operation_id: head.frozen.id, events: this.events() },
    ]);
    this.ctx.waitUntil(pushSpans(this.env, spans, head.frozen.id));
  }

  private prunedFor(tenantId: string): Extract<OperationError, { code: "pruned" }> | null {
    if (!this.store.exists("op_pruned")) return null;
    const row = this.store.one<{
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

  /**
   * Who cancelled this operation before it existed, if that was the submitting run. A tombstone
   * from before tombstones named their run (`op_tombstone`) is obeyed by any run of the tenant.
   */
  private cancelledEarly(tenantId: string, runId: string): string | null {
    const early = this.store.exists("op_early_cancel")
      ? this.store.one<{ by: string }>(
          "SELECT by FROM op_early_cancel WHERE run_id = ? AND tenant_id = ?",
          runId,
          tenantId,
        )
      : null;
    if (early) return early.by;
    const legacy = this.store.exists("op_tombstone")
      ? this.store.one<{ tenant_id: string; by: string }>(
          "SELECT tenant_id, by FROM op_tombstone WHERE k = 1",
        )
      : null;
    return legacy?.tenant_id === tenantId ? legacy.by : null;
  }

  /**
   * A recorded operation's alarm: prune once the retention period has passed, unless it still
   * holds its resource lock (the release is retried first). Unsettled operations never get here.
   */
  private async retire(
    frozen: FrozenRow,
    state: Extract<OperationState, { phase: "recorded" }>,
  ): Promise<void> {
    const head = { frozen, state };
    const dueAtMs = state.recordedAtMs + retentionMs(this.env);
    const nowMs = Date.now();
    // Not before the tenant has every outbox row: then the alarm is the next redelivery's.
    if (this.outboxPending()) return this.armAt(null);
    if (nowMs < dueAtMs) return this.armAt(dueAtMs);
    // Ever granted a lease: release it (again) before the log goes; until the lock confirms, keep it.
    const leased =
      head.frozen.plan.resource !== null &&
      this.store.exists("op_lease") &&
      this.store.one("SELECT k FROM op_lease WHERE k = 1") !== null;
    if (leased && !(await this.releaseLock())) return this.armAt(nowMs + 3_600_000);
    const outcome = head.state.outcome;
    this.store.transaction(() => {
      for (const table of ["op_log", "op_lease", "op_tombstone", "op_early_cancel"])
        if (this.store.exists(table)) this.store.run(`DELETE FROM ${table}`);
      this.store.ensureTable("op_pruned");
      this.store.run(
        "INSERT OR REPLACE INTO op_pruned (k, id, tenant_id, input_hash, status, recorded_at_ms, pruned_at_ms) VALUES (1, ?, ?, ?, ?, ?, ?)",
        head.frozen.id,
        head.frozen.tenant_id,
        head.frozen.input_hash,
        outcome.status,
        head.state.recordedAtMs,
        nowMs,
      );
    });
    this.frozenRow = null;
    this.fixed = null;
    this.redactionCache = null;
    console.log(
      JSON.stringify({
        level: "info",
        event: "toolgate.pruned",
        at: nowMs,
        run_id: head.frozen.run_id,
        call_id: head.frozen.call_id,
        operation_id: head.frozen.id,
        tool: toolName(head.frozen),
        status: outcome.status,
      }),
    );
  }

  private frozenRow: FrozenRow | null = null;

  /** The newest log row; the frozen call is read once per instance (it is immutable). */
  private head(): Head | null {
    if (!this.store.exists("op_log")) return null;
    const last = this.store.one<{ seq: number; state: string }>(
      "SELECT seq, state FROM op_log ORDER BY seq DESC LIMIT 1",
    );
    if (!last) return null;
    this.frozenRow ??= JSON.parse(
      this.store.one<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1")!.frozen,
    ) as FrozenRow;
    return {
      seq: last.seq,
      state: JSON.parse(last.state) as OperationState,
      frozen: this.frozenRow,
    };
  }

  private headFor(tenantId: string): Head | null {
    const head = this.head();
    return head && head.frozen.tenant_id === tenantId ? head : null;
  }

  /** The stored tool, compiled under today's deployment; an error (never a throw) if it no longer compiles. */
  private loadFixed(): Result<Loaded, string> {
    const frozen = this.head()!.frozen;
    if (!this.fixed) {
      const spec = resolveTool(frozen.source, hostPolicy(this.env));
      if (!spec.ok)
        return err(`the stored tool no longer compiles in this deployment: ${spec.error.detail}`);
      const value = JSON.parse(frozen.input) as Record<string, unknown>;
      this.fixed = {
        spec: spec.value,
        input: { value, canonical: frozen.input, hash: frozen.input_hash },
      };
    }
    return ok({ ...this.fixed, plan: frozen.plan });
  }

  /** `rowsWritten`: rows this instance wrote while serving the call (reported for the benchmark). */
  private reply(req: SubmitRequest, rowsWritten: number): OperationReply {
    const { state, frozen } = this.head()!;
    const executedBy =
      frozen.run_id === req.runId ? frozen.call_id : `${frozen.run_id}:${frozen.call_id}`;
    return {
      envelope: envelopeFor(frozen.id, state, frozen.plan.safety),
      settled: isSettled(state),
      terminal: state.phase === "recorded",
      inputHash: frozen.input_hash,
      executedBy,
      rowsWritten,
      recordedAtMs: state.phase === "recorded" ? state.recordedAtMs : null,
    };
  }

  private view(): OperationView {
    const { state, frozen } = this.head()!;
    const result = envelopeFor(frozen.id, state, frozen.plan.safety);
    return {
      operation_id: frozen.id,
      tool: toolName(frozen),
      run_id: frozen.run_id,
      call_id: frozen.call_id,
      phase: state.phase,
      input_hash: frozen.input_hash,
      idempotency_key: frozen.plan.idempotencyKey,
      repeat_safety: frozen.plan.safety,
      created_at: new Date(frozen.created_at).toISOString(),
      // Messages can quote upstream text (shown in the console): hidden values are scrubbed from them.
      result:
        "message" in result
          ? { ...result, message: scrub(result.message, this.redaction(frozen)) }
          : result,
      late: state.phase === "recorded" && state.late,
      approval: this.approvalView(),
    };
  }

  /** The approval's story, from the log: requested, then decided, expired or cancelled. */
  private approvalView(): ApprovalView | null {
    const { state, frozen } = this.head()!;
    const approval = frozen.plan.approval;
    if (!approval) return null;
    const events = this.store
      .all<{ events: string }>("SELECT events FROM op_log ORDER BY seq")
      .flatMap((row) => JSON.parse(row.events) as TraceEvent[]);
    const decided = events.find((event) => event.type === "approval_decided");
    const preview = events.find((event) => event.type === "preview");
    const verdictState = decided ? (decided.verdict === "approve" ? "approved" : "rejected") : null;
    const closed = events.some((event) => event.type === "approval_expired")
      ? "expired"
      : state.phase === "awaiting_approval"
        ? "pending"
        : "cancelled";
    return {
      state: verdictState ?? closed,
      requested_by: approval.requestedBy,
      requested_at: new Date(frozen.created_at).toISOString(),
      expires_at: new Date(approval.expiresAtMs).toISOString(),
      input_hash: approval.inputHash,
      policy_version: approval.policyVersion,
      four_eyes: approval.fourEyes,
      preview: preview
        ? {
            status: (preview.status as number | null) ?? null,
            body: preview.body ?? null,
            detail: (preview.detail as string | null) ?? null,
          }
        : null,
      decided_by: typeof decided?.by === "string" ? decided.by : null,
      decided_at: decided ? new Date(decided.at_ms).toISOString() : null,
      reason: typeof decided?.reason === "string" ? decided.reason : null,
    };
  }
}

/** The tool's name from the stored source itself, so it is known even when the tool no longer compiles. */
function toolName(frozen: FrozenRow): string {
  if (frozen.source.kind === "code") return frozen.source.name;
  const name = (frozen.source.manifest as { name?: unknown } | null)?.name;
  return typeof name === "string" ? name : "(unnamed tool)";
}

/**
 * What the inbox keeps of a preview: its body up to INBOX_PREVIEW_BYTES of JSON text (beyond that,
 * that much of the text as a string, flagged `truncated`), so a page of requests stays small. The
 * operation keeps the whole preview (GET /v1/operations/{id}).
 */
export function inboxPreview(preview: Preview | null): ApprovalItem["preview"] {
  if (!preview) return null;
  const bytes = new TextEncoder().encode(JSON.stringify(preview.body ?? null));
  if (bytes.length <= INBOX_PREVIEW_BYTES) return { ...preview, truncated: false };
  // A character cut in half decodes as U+FFFD: dropped, so the kept text is only whole characters.
  const kept = new TextDecoder()
    .decode(bytes.subarray(0, INBOX_PREVIEW_BYTES))
    .replace(/\uFFFD+$/, "");
  return { ...preview, body: kept, truncated: true };
}
