// OperationObject: one per logical operation. A thin shell around domain/operation.ts: load the
// row, call transition(), persist state + trace in one transactionSync, then perform the effects.
// The attempt is durable before fetch with no await in between (the output gate holds the request
// until the write is confirmed); results are applied by compare-and-set on the attempt number.
// Memory holds only what cannot be stored: whether this instance has a request in flight.
import { DurableObject } from "cloudflare:workers";
import { repeatSafety } from "../domain/classify.ts";
import { envelopeFor, refusal, type Envelope } from "../domain/envelope.ts";
import { isSettled, transition, type OperationPlan, type OperationEvent, type OperationState, type Step, type TraceEvent, type TransitionError } from "../domain/operation.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { hostPolicy, type Env } from "../env.ts";
import { resolveTool } from "../tools/catalog.ts";
import { sendAttempt, sendLookup } from "../tools/http-tool.ts";
import type { ToolSource, ToolSpec } from "../tools/spec.ts";
import type { FrozenInput } from "../domain/turn.ts";
import { OPERATION_SCHEMA, SqlStore } from "./store.ts";
import { runStub } from "./stubs.ts";

export type SubmitRequest = {
  tenantId: string;
  runId: string;
  callId: string;
  source: ToolSource;
  /** The call's input as frozen by the run: value, canonical JSON text and its hash, as one value. */
  input: FrozenInput;
  operationId: string;
  idempotencyKey: string;
  waitMs: number;
};
/**
 * `executedBy`: the call that created the operation (a replay from another call did not execute it).
 * `terminal`: recorded, so this envelope will never change and callers may keep it.
 */
export type OperationReply = { envelope: Envelope; settled: boolean; terminal: boolean; inputHash: string; executedBy: string; rowsWritten: number };
export type OperationView = {
  operation_id: string;
  tool: string;
  run_id: string;
  call_id: string;
  phase: OperationState["phase"];
  input_hash: string;
  idempotency_key: string;
  created_at: string;
  result: Envelope;
  /** The result arrived after the operation was cancelled; it was not reported to the closed turn. */
  late: boolean;
};
export type OperationError = { code: "not_found" } | TransitionError | { code: "invalid_tool"; detail: string };

/** The call as frozen at validation (row 1 of the log); it never changes afterwards. */
type FrozenRow = {
  id: string; tenant_id: string; run_id: string; call_id: string; source: ToolSource; input: string;
  input_hash: string; plan: OperationPlan; created_at: number;
};
type Head = { seq: number; state: OperationState; frozen: FrozenRow };
type Fixed = { spec: ToolSpec; input: Record<string, unknown> };

export class OperationObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, OPERATION_SCHEMA);
  private inFlight: Promise<void> | null = null;
  private abort: AbortController | null = null;
  private fixed: Fixed | null = null;
  private readonly listeners = new Set<() => void>();

  async submit(req: SubmitRequest): Promise<Result<OperationReply, OperationError>> {
    const rowsBefore = this.store.rowsWritten;
    const existing = this.head();
    if (existing && existing.frozen.input_hash !== req.input.hash) {
      // Same logical operation, different frozen input: a changed amount or recipient is a new decision.
      const envelope = refusal("rejected", req.operationId, "idempotency_conflict", "This operation was already requested with different arguments; toolgate will not change it. Do not retry; tell the user what was already done.");
      return ok({ envelope, settled: true, terminal: false, inputHash: req.input.hash, executedBy: existing.frozen.call_id, rowsWritten: 0 });
    }
    if (!existing) {
      const spec = resolveTool(req.source, hostPolicy(this.env));
      if (!spec.ok) return err({ code: "invalid_tool", detail: spec.error.detail });
      const plan: OperationPlan = {
        operationId: req.operationId,
        idempotencyKey: req.idempotencyKey,
        safety: repeatSafety(spec.value.risk, spec.value.idempotency.mode, spec.value.buildReconcile !== null),
        retry: spec.value.retry,
        timeoutMs: spec.value.timeoutMs,
      };
      this.store.ensureSchema();
      const frozen: FrozenRow = {
        id: req.operationId, tenant_id: req.tenantId, run_id: req.runId, call_id: req.callId, source: req.source,
        input: req.input.canonical, input_hash: req.input.hash, plan, created_at: Date.now(),
      };
      const started = this.apply({ type: "start", inputHash: req.input.hash, callId: req.callId, tool: spec.value.name }, frozen);
      if (!started.ok) return started;
    } else {
      this.recoverOrphan();
    }
    await this.waitFor(Date.now() + req.waitMs);
    return ok(this.reply(req, this.store.rowsWritten - rowsBefore));
  }

  async get(tenantId: string, waitMs: number): Promise<Result<OperationView, OperationError>> {
    if (!this.headFor(tenantId)) return err({ code: "not_found" });
    this.recoverOrphan();
    await this.waitFor(Date.now() + waitMs);
    return ok(this.view());
  }

  async resolve(tenantId: string, verdict: { outcome: "succeeded" | "failed"; result: unknown; reason: string; by: string }): Promise<Result<OperationView, OperationError>> {
    if (!this.headFor(tenantId)) return err({ code: "not_found" });
    const step = this.apply({ type: "resolve", ...verdict }, null);
    return step.ok ? ok(this.view()) : step;
  }

  async traceFor(tenantId: string): Promise<Result<TraceEvent[], OperationError>> {
    if (!this.headFor(tenantId)) return err({ code: "not_found" });
    const rows = this.store.all<{ events: string }>("SELECT events FROM op_log ORDER BY seq");
    return ok(rows.flatMap((row) => JSON.parse(row.events) as TraceEvent[]));
  }

  async cancel(tenantId: string, by: string): Promise<Result<OperationView, OperationError>> {
    if (!this.headFor(tenantId)) return err({ code: "not_found" });
    const step = this.apply({ type: "cancel", by }, null);
    return step.ok ? ok(this.view()) : step;
  }

  override async alarm(): Promise<void> {
    const head = this.head();
    if (!head) return;
    // Before a retry or a resend, ask the run whether this may still execute: scopes may have
    // been revoked, the tool withdrawn or the deadline passed while the alarm waited.
    const sends = head.state.phase === "retry_scheduled" || (head.state.phase === "outcome_unknown" && head.state.reconcile === "resend");
    if (sends) {
      const verdict = await runStub(this.env, head.frozen.run_id).authorize(head.frozen.tenant_id, this.loadFixed().spec.name);
      if (!verdict.ok) {
        this.apply({ type: "denied", ...verdict.error }, null);
        return;
      }
    }
    this.apply({ type: "alarm", inFlight: this.inFlight !== null }, null);
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
    if ((phase === "executing" || phase === "reconciling") && this.inFlight === null) this.apply({ type: "alarm", inFlight: false }, null);
  }

  /**
   * One transition = one synchronous transaction appending one log row (state + trace events);
   * effects run only after it. `frozen` is given exactly once, for the `start` event.
   */
  private apply(event: OperationEvent, frozen: FrozenRow | null): Result<OperationState, OperationError> {
    const nowMs = Date.now();
    const result = this.ctx.storage.transactionSync((): Result<Step, OperationError> => {
      const head = this.head();
      const plan = head?.frozen.plan ?? frozen?.plan;
      if (!plan) return err({ code: "not_found" });
      const step = transition(head?.state ?? null, event, plan, nowMs);
      if (step.ok && step.value.changed) {
        this.store.run(
          "INSERT INTO op_log (seq, at_ms, state, events, frozen) VALUES (?, ?, ?, ?, ?)",
          (head?.seq ?? 0) + 1, nowMs, JSON.stringify(step.value.state), JSON.stringify(step.value.trace), head ? null : JSON.stringify(frozen),
        );
      }
      return step;
    });
    if (!result.ok) return result;
    for (const effect of result.value.effects) {
      switch (effect.kind) {
        case "set_alarm":
          void this.ctx.storage.setAlarm(effect.atMs);
          break;
        case "clear_alarm":
          void this.ctx.storage.deleteAlarm();
          break;
        case "send_attempt":
          this.inFlight = this.attempt(effect.attempt);
          break;
        case "abort_attempt":
          this.abort?.abort(new Error("cancelled"));
          break;
        case "send_lookup":
          this.inFlight = this.lookup(effect.lookups);
          break;
      }
    }
    if (result.value.changed) this.notify();
    return ok(result.value.state);
  }

  private async attempt(attempt: number): Promise<void> {
    const { spec, input, canonicalInput, plan } = this.loadFixed();
    this.abort = new AbortController();
    const observation = await sendAttempt(spec, input, canonicalInput, {
      idempotencyKey: plan.idempotencyKey,
      secrets: this.env,
      safety: plan.safety,
      signal: this.abort.signal,
      fencingToken: null,
    });
    this.inFlight = null;
    this.abort = null;
    this.apply({ type: "attempt_finished", attempt, observation }, null);
  }

  private async lookup(lookups: number): Promise<void> {
    const { spec, input, canonicalInput, plan } = this.loadFixed();
    const observation = await sendLookup(spec, input, canonicalInput, { idempotencyKey: plan.idempotencyKey, secrets: this.env });
    this.inFlight = null;
    this.apply({ type: "lookup_finished", lookups, observation }, null);
  }

  /** Waits until settled, or until the next self-driven step is due after the deadline. */
  private async waitFor(deadlineMs: number): Promise<void> {
    for (;;) {
      const state = this.head()?.state;
      if (!state || isSettled(state)) return;
      const due = state.phase === "retry_scheduled" || state.phase === "outcome_unknown" ? state.dueAtMs : null;
      if ((state.phase === "retry_scheduled" || state.phase === "outcome_unknown") && (due === null || due > deadlineMs)) return;
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

  private frozenRow: FrozenRow | null = null;

  /** The newest log row; the frozen call is read once per instance (it is immutable). */
  private head(): Head | null {
    if (!this.store.exists("op_log")) return null;
    const last = this.store.one<{ seq: number; state: string }>("SELECT seq, state FROM op_log ORDER BY seq DESC LIMIT 1");
    if (!last) return null;
    this.frozenRow ??= JSON.parse(this.store.one<{ frozen: string }>("SELECT frozen FROM op_log WHERE seq = 1")!.frozen) as FrozenRow;
    return { seq: last.seq, state: JSON.parse(last.state) as OperationState, frozen: this.frozenRow };
  }

  private headFor(tenantId: string): Head | null {
    const head = this.head();
    return head && head.frozen.tenant_id === tenantId ? head : null;
  }

  private loadFixed(): Fixed & { canonicalInput: string; plan: OperationPlan } {
    const frozen = this.head()!.frozen;
    if (!this.fixed) {
      const spec = resolveTool(frozen.source, hostPolicy(this.env));
      if (!spec.ok) throw new Error(`stored tool no longer compiles: ${spec.error.detail}`);
      this.fixed = { spec: spec.value, input: JSON.parse(frozen.input) as Record<string, unknown> };
    }
    return { ...this.fixed, canonicalInput: frozen.input, plan: frozen.plan };
  }

  /** `rowsWritten`: rows this instance wrote while serving the call (reported for the benchmark). */
  private reply(req: SubmitRequest, rowsWritten: number): OperationReply {
    const { state, frozen } = this.head()!;
    const executedBy = frozen.run_id === req.runId ? frozen.call_id : `${frozen.run_id}:${frozen.call_id}`;
    return { envelope: envelopeFor(frozen.id, state), settled: isSettled(state), terminal: state.phase === "recorded", inputHash: frozen.input_hash, executedBy, rowsWritten };
  }

  private view(): OperationView {
    const { state, frozen } = this.head()!;
    return {
      operation_id: frozen.id,
      tool: this.loadFixed().spec.name,
      run_id: frozen.run_id,
      call_id: frozen.call_id,
      phase: state.phase,
      input_hash: frozen.input_hash,
      idempotency_key: frozen.plan.idempotencyKey,
      created_at: new Date(frozen.created_at).toISOString(),
      result: envelopeFor(frozen.id, state),
      late: state.phase === "recorded" && state.late,
    };
  }
}
