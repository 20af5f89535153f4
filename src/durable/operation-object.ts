// OperationObject: one per logical operation. A thin shell around domain/operation.ts: load the
// row, call transition(), persist state + trace in one transactionSync, then perform the effects.
// The attempt is durable before fetch with no await in between (the output gate holds the request
// until the write is confirmed); results are applied by compare-and-set on the attempt number.
// Memory holds only what cannot be stored: whether this instance has a request in flight.
import { DurableObject } from "cloudflare:workers";
import { repeatSafety } from "../domain/classify.ts";
import { envelopeFor, refusal, type Envelope } from "../domain/envelope.ts";
import { isSettled, transition, type OperationEvent, type OperationPlan, type OperationState, type Step, type TraceEvent, type TransitionError } from "../domain/operation.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { hostPolicy, type Env } from "../env.ts";
import { resolveTool } from "../tools/catalog.ts";
import { sendAttempt, sendLookup } from "../tools/http-tool.ts";
import type { ToolSource, ToolSpec } from "../tools/spec.ts";
import { OPERATION_SCHEMA, SqlStore } from "./store.ts";

export type SubmitRequest = {
  tenantId: string;
  runId: string;
  callId: string;
  source: ToolSource;
  canonicalInput: string;
  inputHash: string;
  operationId: string;
  idempotencyKey: string;
  waitMs: number;
};
export type OperationReply = { envelope: Envelope; settled: boolean; rowsWritten: number };
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
};
export type OperationError = { code: "not_found" } | TransitionError | { code: "invalid_tool"; detail: string };

type OpRow = {
  id: string; tenant_id: string; run_id: string; call_id: string; source: string; input: string;
  input_hash: string; plan: string; state: string; version: number; created_at: number;
};
type Fixed = { spec: ToolSpec; input: Record<string, unknown>; canonicalInput: string; plan: OperationPlan };

export class OperationObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, OPERATION_SCHEMA);
  private inFlight: Promise<void> | null = null;
  private fixed: Fixed | null = null;
  private readonly listeners = new Set<() => void>();

  async submit(req: SubmitRequest): Promise<Result<OperationReply, OperationError>> {
    const existing = this.load();
    if (existing && existing.input_hash !== req.inputHash) {
      // Same logical operation, different frozen input: a changed amount or recipient is a new decision.
      const envelope = refusal("rejected", req.operationId, "idempotency_conflict", "This operation was already requested with different arguments; toolgate will not change it. Do not retry; tell the user what was already done.");
      return ok({ envelope, settled: true, rowsWritten: this.store.rowsWritten });
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
      const start: OperationEvent = { type: "start", inputHash: req.inputHash, callId: req.callId, tool: spec.value.name };
      const started = this.apply(start, plan, (state, trace, nowMs) => {
        this.store.run(
          "INSERT INTO op (id, tenant_id, run_id, call_id, source, input, input_hash, plan, state, version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
          req.operationId, req.tenantId, req.runId, req.callId, JSON.stringify(req.source), req.canonicalInput, req.inputHash, JSON.stringify(plan), JSON.stringify(state), nowMs,
        );
        this.store.run("INSERT INTO op_events (seq, events) VALUES (1, ?)", JSON.stringify(trace));
      });
      if (!started.ok) return started;
    }
    await this.waitFor(Date.now() + req.waitMs);
    return ok(this.reply());
  }

  async get(tenantId: string, waitMs: number): Promise<Result<OperationView, OperationError>> {
    const row = this.loadFor(tenantId);
    if (!row) return err({ code: "not_found" });
    await this.waitFor(Date.now() + waitMs);
    return ok(this.view());
  }

  async resolve(tenantId: string, verdict: { outcome: "succeeded" | "failed"; result: unknown; reason: string; by: string }): Promise<Result<OperationView, OperationError>> {
    if (!this.loadFor(tenantId)) return err({ code: "not_found" });
    const step = this.step({ type: "resolve", ...verdict });
    return step.ok ? ok(this.view()) : step;
  }

  async traceFor(tenantId: string): Promise<Result<TraceEvent[], OperationError>> {
    if (!this.loadFor(tenantId)) return err({ code: "not_found" });
    const rows = this.store.all<{ events: string }>("SELECT events FROM op_events ORDER BY seq");
    return ok(rows.flatMap((row) => JSON.parse(row.events) as TraceEvent[]));
  }

  override async alarm(): Promise<void> {
    if (!this.load()) return;
    this.step({ type: "alarm", inFlight: this.inFlight !== null });
    // Keep this event open while the attempt it started runs, so the object stays alive for it.
    await this.inFlight;
  }

  // ── shell ────────────────────────────────────────────────────────────────────────────────────

  private step(event: OperationEvent): Result<OperationState, OperationError> {
    return this.apply(event, null, (state, trace) => {
      this.store.run("UPDATE op SET state = ?, version = version + 1", JSON.stringify(state));
      const version = this.store.one<{ version: number }>("SELECT version FROM op")!.version;
      this.store.run("INSERT INTO op_events (seq, events) VALUES (?, ?)", version, JSON.stringify(trace));
    });
  }

  /** One transition = one synchronous transaction; effects run only after it committed locally. */
  private apply(
    event: OperationEvent,
    startPlan: OperationPlan | null,
    persist: (state: OperationState, trace: TraceEvent[], nowMs: number) => void,
  ): Result<OperationState, OperationError> {
    const nowMs = Date.now();
    const result = this.ctx.storage.transactionSync((): Result<Step, OperationError> => {
      const row = this.load();
      const plan = row ? (JSON.parse(row.plan) as OperationPlan) : startPlan;
      if (!plan) return err({ code: "not_found" });
      const current = row ? (JSON.parse(row.state) as OperationState) : null;
      const step = transition(current, event, plan, nowMs);
      if (step.ok && step.value.changed) persist(step.value.state, step.value.trace, nowMs);
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
    const observation = await sendAttempt(spec, input, canonicalInput, {
      idempotencyKey: plan.idempotencyKey,
      secrets: this.env,
      safety: plan.safety,
      signal: null,
      fencingToken: null,
    });
    this.inFlight = null;
    this.step({ type: "attempt_finished", attempt, observation });
  }

  private async lookup(lookups: number): Promise<void> {
    const { spec, input, canonicalInput, plan } = this.loadFixed();
    const observation = await sendLookup(spec, input, canonicalInput, { idempotencyKey: plan.idempotencyKey, secrets: this.env });
    this.inFlight = null;
    this.step({ type: "lookup_finished", lookups, observation });
  }

  /** Waits until settled, or until the next self-driven step is due after the deadline. */
  private async waitFor(deadlineMs: number): Promise<void> {
    for (;;) {
      const state = this.state();
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

  private load(): OpRow | null {
    if (!this.store.exists("op")) return null;
    return this.store.one<OpRow>("SELECT * FROM op");
  }

  private loadFor(tenantId: string): OpRow | null {
    const row = this.load();
    return row && row.tenant_id === tenantId ? row : null;
  }

  private state(): OperationState | null {
    const row = this.load();
    return row ? (JSON.parse(row.state) as OperationState) : null;
  }

  /** The frozen parts of the row never change, so decoding them once per instance is safe. */
  private loadFixed(): Fixed {
    if (this.fixed) return this.fixed;
    const row = this.load()!;
    const spec = resolveTool(JSON.parse(row.source) as ToolSource, hostPolicy(this.env));
    if (!spec.ok) throw new Error(`stored tool no longer compiles: ${spec.error.detail}`);
    this.fixed = { spec: spec.value, input: JSON.parse(row.input) as Record<string, unknown>, canonicalInput: row.input, plan: JSON.parse(row.plan) as OperationPlan };
    return this.fixed;
  }

  private reply(): OperationReply {
    const row = this.load()!;
    const state = JSON.parse(row.state) as OperationState;
    return { envelope: envelopeFor(row.id, state), settled: isSettled(state), rowsWritten: this.store.rowsWritten };
  }

  private view(): OperationView {
    const row = this.load()!;
    const state = JSON.parse(row.state) as OperationState;
    const plan = JSON.parse(row.plan) as OperationPlan;
    return {
      operation_id: row.id,
      tool: this.loadFixed().spec.name,
      run_id: row.run_id,
      call_id: row.call_id,
      phase: state.phase,
      input_hash: row.input_hash,
      idempotency_key: plan.idempotencyKey,
      created_at: new Date(row.created_at).toISOString(),
      result: envelopeFor(row.id, state),
    };
  }
}
