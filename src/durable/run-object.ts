// RunObject: one per run. Holds the offered tools (snapshotted from the tenant), the user's scopes,
// bound context, budgets and turns. A turn is admitted through the pure gate and budget checks in
// one synchronous block, written as one row (call → frozen submission), and its operations are
// submitted concurrently. Polling or re-posting a turn re-submits it: a no-op replay for every
// operation that exists. Usage (turns, calls, cost) is derived from the turn rows.
import { DurableObject } from "cloudflare:workers";
import { admitTurn, pastDeadline, type Budgets, type Usage } from "../domain/budget.ts";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import { refusal, type Envelope } from "../domain/envelope.ts";
import { admitCall, type ProposedCall } from "../domain/gate.ts";
import { freezeCall } from "../domain/identity.ts";
import type { TraceEvent } from "../domain/operation.ts";
import { checkScopes } from "../domain/policy.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { hostPolicy, type Env } from "../env.ts";
import { resolveTool } from "../tools/catalog.ts";
import type { ToolDefinition, ToolSource, ToolSpec } from "../tools/spec.ts";
import type { OperationReply, SubmitRequest } from "./operation-object.ts";
import { RUN_SCHEMA, SqlStore } from "./store.ts";
import { operationStub } from "./stubs.ts";

export type RunInit = {
  runId: string;
  tenantId: string;
  user: { id: string; scopes: string[] };
  tools: Record<string, ToolSource>;
  context: Record<string, unknown>;
  budgets: Budgets;
  expiresAtMs: number;
};
type RunData = RunInit & { createdAtMs: number; cancelledAtMs: number | null };
export type RunView = {
  run_id: string; status: "active" | "cancelled"; user: RunInit["user"]; tools: string[]; context: Record<string, unknown>;
  budgets: Budgets; usage: { turns: number; tool_calls: number; cost: number }; created_at: string; expires_at: string;
};
export type TurnReply = { turn_id: string; status: "settled" | "pending"; calls: ProposedCall[]; results: Envelope[]; rowsWritten: number };
export type RunError = { code: "not_found"; detail: string } | { code: "invalid_request"; detail: string };
export type Denial = { status: "rejected" | "budget_exhausted" | "cancelled"; code: string; message: string };

/** A call as stored in the turn row: a fixed envelope (refused, or closed by a cancel), or a frozen submission. */
type StoredSubmit = Omit<SubmitRequest, "waitMs">;
type StoredCall = { call: ProposedCall } & ({ fixed: Envelope } | { submit: StoredSubmit; cost: number });
type TurnRow = { id: string; calls: string; reserved_cost: number; settled_cost: number | null };
type Turn = { id: string; calls: StoredCall[]; reserved_cost: number; settled_cost: number | null };
type PlannedTurn = Turn & { seq: number; admitted: number; modelCost: number; usage: Usage };

export class RunObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, RUN_SCHEMA);
  private offered: { key: string; tools: Map<string, ToolSpec> } | null = null;
  /** Recorded outcomes are immutable, so replays can be answered from here without a hop. */
  private readonly terminal = new Map<string, OperationReply>();

  async create(init: RunInit): Promise<Result<RunView, RunError>> {
    this.store.ensureSchema();
    if (this.load()) return err({ code: "invalid_request", detail: "run already exists" });
    const data: RunData = { ...init, createdAtMs: Date.now(), cancelledAtMs: null };
    this.store.run("INSERT INTO run (id, tenant_id, data, created_at) VALUES (?, ?, ?, ?)", init.runId, init.tenantId, JSON.stringify(data), data.createdAtMs);
    this.store.run("INSERT INTO usage (k, turns, calls, cost) VALUES (1, 0, 0, 0)");
    return ok(this.view(data));
  }

  async get(tenantId: string): Promise<Result<RunView, RunError>> {
    const run = this.loadFor(tenantId);
    return run ? ok(this.view(run)) : notFound("run");
  }

  /** Scopes and offered tools may change mid-run; the next execution sees the change. */
  async update(tenantId: string, patch: { scopes?: string[]; tools?: Record<string, ToolSource> }): Promise<Result<RunView, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return notFound("run");
    const next: RunData = { ...run, user: { ...run.user, scopes: patch.scopes ?? run.user.scopes }, tools: patch.tools ?? run.tools };
    this.save(next);
    return ok(this.view(next));
  }

  async postTurn(tenantId: string, calls: ProposedCall[], modelCost: number, waitMs: number): Promise<Result<TurnReply, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return notFound("run");
    const turnId = `turn_${(await sha256Hex(canonicalJson(calls.map((call) => call.id)))).slice(0, 26)}`;
    if (!this.turnRow(turnId)) {
      const admitted = await Promise.all(calls.map((call) => this.admit(run, call)));
      // One synchronous block from reading the budgets to writing the turn: concurrent turns
      // serialize here. The operations are dispatched *before* the turn row is written, so that
      // commit overlaps their work instead of holding the dispatch behind the output gate; the
      // reply still waits for it. (A crash inside that window loses only the reservation: the
      // operations themselves are keyed, and re-posting the turn joins them.)
      if (!this.turnRow(turnId)) {
        const turn = this.planTurn(turnId, this.loadFor(tenantId)!, admitted, modelCost);
        const rowsBefore = this.store.rowsWritten;
        const settling = this.settle(turn, waitMs);
        this.persistTurn(turn);
        const rowsHere = this.store.rowsWritten - rowsBefore;
        return settling.then((reply) => ok({ ...reply, rowsWritten: reply.rowsWritten + rowsHere }));
      }
    }
    return ok(await this.settle(this.turnRow(turnId)!, waitMs));
  }

  async getTurn(tenantId: string, turnId: string, waitMs: number): Promise<Result<TurnReply, RunError>> {
    const turn = this.loadFor(tenantId) ? this.turnRow(turnId) : null;
    return turn ? ok(await this.settle(turn, waitMs)) : notFound("turn");
  }

  /** The offered tools as plain data, for exporting definitions to the model. */
  async toolDefinitions(tenantId: string): Promise<Result<ToolDefinition[], RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return notFound("run");
    return ok([...this.offeredTools(run).values()].map((spec) => ({ name: spec.name, description: spec.description, inputJsonSchema: spec.inputJsonSchema, bound: Object.keys(spec.bind) })));
  }

  /**
   * Asked by an operation before each retry, and after an approval: may it still execute?
   * `policyVersion` (approvals): the hash of the tool source the person saw; a tool changed since
   * then cannot ride that approval.
   */
  async authorize(tenantId: string, tool: string, policyVersion: string | null = null): Promise<Result<true, Denial>> {
    const run = this.loadFor(tenantId);
    if (!run || run.cancelledAtMs !== null) return err({ status: "cancelled", code: "cancelled", message: "The run was cancelled before this call took effect. Do not retry; tell the user." });
    if (pastDeadline(run.budgets, run.createdAtMs, Date.now())) return err({ status: "budget_exhausted", code: "deadline", message: "This conversation ran out of time before the call could be retried. It did not take effect. Do not retry; tell the user." });
    const spec = this.offeredTools(run).get(tool);
    if (!spec) return err({ status: "rejected", code: "tool_not_allowed", message: `The tool ${tool} was withdrawn from this conversation before it could run. Do not retry; tell the user.` });
    const scopes = checkScopes(tool, spec.requiresScopes, run.user.scopes);
    if (!scopes.ok) return err({ status: "rejected", code: scopes.error.code, message: scopes.error.message });
    if (policyVersion !== null && (await sha256Hex(canonicalJson(run.tools[tool]))) !== policyVersion) {
      return err({ status: "rejected", code: "approval_expired", message: `The tool ${tool} changed while this call waited for approval, so that approval no longer applies and nothing was executed. Do not retry; tell the user.` });
    }
    return ok(true);
  }

  /** Cancels the run: closes every unsettled call of every turn and cancels its operation. */
  async cancel(tenantId: string, by: string): Promise<Result<RunView, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return notFound("run");
    if (run.cancelledAtMs === null) this.save({ ...run, cancelledAtMs: Date.now() });
    const operations = new Set<string>();
    for (const turn of this.store.all<TurnRow>("SELECT id, calls, reserved_cost, settled_cost FROM turns")) {
      for (const call of JSON.parse(turn.calls) as StoredCall[]) if ("submit" in call) operations.add(call.submit.operationId);
    }
    await Promise.all([...operations].map((operationId) => this.closeOperation(tenantId, operationId, by)));
    return ok(this.view(this.load()!));
  }

  /**
   * Closes the turns still waiting on `operationId` with a cancelled envelope, then cancels the
   * operation. A result that arrives later is recorded on the operation (flagged late), never here.
   */
  async closeOperation(tenantId: string, operationId: string, by: string): Promise<Result<true, RunError>> {
    if (!this.loadFor(tenantId)) return notFound("run");
    const stub = operationStub(this.env, operationId);
    for (const turn of this.store.all<TurnRow>("SELECT id, calls, reserved_cost, settled_cost FROM turns")) {
      const calls = JSON.parse(turn.calls) as StoredCall[];
      const index = calls.findIndex((call) => "submit" in call && call.submit.operationId === operationId);
      const target = calls[index];
      if (!target || !("submit" in target)) continue;
      const current = await stub.submit({ ...target.submit, waitMs: 0 });
      if (current.ok && current.value.settled) continue;
      const envelope = current.ok ? current.value.envelope : null;
      const waitingToRetry = envelope !== null && "code" in envelope && envelope.code === "retry_scheduled";
      calls[index] = { call: target.call, fixed: refusal("cancelled", operationId, "cancelled", waitingToRetry
        ? "Cancelled before it took effect. Do not retry; tell the user."
        : `Cancelled while it was already running, so it may still complete; toolgate records the outcome on operation ${operationId}. Do not retry; tell the user.`) };
      this.store.run("UPDATE turns SET calls = ? WHERE id = ?", JSON.stringify(calls), turn.id);
    }
    await stub.cancel(tenantId, by);
    return ok(true);
  }

  async traceFor(tenantId: string): Promise<Result<{ run_id: string; events: TraceEvent[] }, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return notFound("run");
    const turns = this.store.all<{ id: string; calls: string; created_at: number }>("SELECT id, calls, created_at FROM turns ORDER BY seq");
    const events: TraceEvent[] = [{ type: "run_created", at_ms: run.createdAtMs, run_id: run.runId }];
    if (run.cancelledAtMs !== null) events.push({ type: "run_cancelled", at_ms: run.cancelledAtMs });
    const operations = new Set<string>();
    for (const turn of turns) {
      const calls = JSON.parse(turn.calls) as StoredCall[];
      events.push({
        type: "turn_received",
        at_ms: turn.created_at,
        turn_id: turn.id,
        calls: calls.map((stored) =>
          "submit" in stored
            ? { call_id: stored.call.id, name: stored.call.name, operation_id: stored.submit.operationId }
            : { call_id: stored.call.id, name: stored.call.name, operation_id: stored.fixed.operation_id, fixed: stored.fixed.status, code: "code" in stored.fixed ? stored.fixed.code : null },
        ),
      });
      for (const stored of calls) if ("submit" in stored) operations.add(stored.submit.operationId);
    }
    for (const operationId of operations) {
      const opTrace = await operationStub(this.env, operationId).traceFor(tenantId);
      if (opTrace.ok) events.push(...opTrace.value.map((event) => ({ ...event, operation_id: operationId })));
    }
    events.sort((a, b) => a.at_ms - b.at_ms);
    return ok({ run_id: run.runId, events });
  }

  // ── internals ───────────────────────────────────────────────────────────────────────────────

  /** Gate + freeze, before any budget is touched (async: hashing). */
  private async admit(run: RunData, call: ProposedCall): Promise<StoredCall> {
    const admitted = admitCall(call, this.offeredTools(run), run.context, run.user.scopes);
    if (!admitted.ok) return { call, fixed: refusal("rejected", await refusedId(run, call), admitted.error.code, admitted.error.message) };
    const { spec, input } = admitted.value;
    const frozen = await freezeCall({
      tenantId: run.tenantId, runId: run.runId, tool: spec.name, risk: spec.risk, scope: spec.operationScope,
      operationKey: spec.operationKey, input, callId: call.id,
    });
    return {
      call,
      cost: spec.cost,
      submit: {
        tenantId: run.tenantId, runId: run.runId, callId: call.id, source: run.tools[spec.name]!, userId: run.user.id,
        canonicalInput: frozen.canonicalInput, inputHash: frozen.inputHash, operationId: frozen.operationId, idempotencyKey: frozen.idempotencyKey,
      },
    };
  }

  /** Synchronous and pure but for reading usage: the run's state and budgets decide each call. */
  private planTurn(turnId: string, run: RunData, admitted: StoredCall[], modelCost: number): PlannedTurn {
    const before = this.usage();
    const costs = admitted.map((stored) => ("submit" in stored ? stored.cost : null));
    const { verdicts, usage } = admitTurn(run.budgets, { ...before, cost: before.cost + modelCost }, costs, run.createdAtMs, Date.now());
    const calls = admitted.map((stored, index): StoredCall => {
      if (!("submit" in stored)) return stored;
      const id = stored.submit.operationId;
      if (run.cancelledAtMs !== null) return { call: stored.call, fixed: refusal("cancelled", id, "cancelled", "The run was cancelled; this call was not executed. Do not retry; tell the user.") };
      const verdict = verdicts[index];
      return verdict ? { call: stored.call, fixed: refusal("budget_exhausted", id, verdict.code, verdict.message) } : stored;
    });
    const live = calls.filter((stored) => "submit" in stored);
    const reserved = live.reduce((sum, stored) => sum + ("submit" in stored ? stored.cost : 0), 0);
    return { id: turnId, calls, reserved_cost: reserved, settled_cost: null, seq: before.turns + 1, admitted: live.length, modelCost, usage: run.cancelledAtMs === null ? usage : { ...before, turns: before.turns + 1 } };
  }

  private persistTurn(turn: PlannedTurn): void {
    this.store.run(
      "INSERT INTO turns (id, seq, calls, admitted, reserved_cost, settled_cost, model_cost, created_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
      turn.id, turn.seq, JSON.stringify(turn.calls), turn.admitted, turn.reserved_cost, turn.modelCost, Date.now(),
    );
    this.store.run("UPDATE usage SET turns = ?, calls = ?, cost = ?", turn.usage.turns, turn.usage.toolCalls, turn.usage.cost);
  }

  /** Submits every call of the turn (a replay for existing operations) and collects envelopes in call order. */
  private async settle(turn: Turn, waitMs: number): Promise<TurnReply> {
    const calls = turn.calls;
    const turnId = turn.id;
    let rowsWritten = 0;
    const replies = await Promise.all(
      calls.map(async (stored) => {
        if ("fixed" in stored) return { envelope: stored.fixed, settled: true, spent: 0 };
        const reply = await this.submit(stored.submit, waitMs);
        if (!reply) return { envelope: refusal("failed", stored.submit.operationId, "permanent_failure", "toolgate could not run this tool. Do not retry; tell the user."), settled: true, spent: 0 };
        rowsWritten += reply.rowsWritten;
        // Cost is reserved at admission and settled here: only the call that executed pays.
        const executed = reply.executedBy === stored.call.id && reply.envelope.status !== "cancelled";
        return { ...reply, spent: executed ? stored.cost : 0 };
      }),
    );
    const settled = replies.every((reply) => reply.settled);
    const spent = replies.reduce((sum, reply) => sum + reply.spent, 0);
    if (settled && turn.settled_cost === null && spent !== turn.reserved_cost) {
      this.store.run("UPDATE turns SET settled_cost = ? WHERE id = ?", spent, turnId);
      this.store.run("UPDATE usage SET cost = cost - ?", turn.reserved_cost - spent);
    }
    return { turn_id: turnId, status: settled ? "settled" : "pending", calls: calls.map((stored) => stored.call), results: replies.map((reply) => reply.envelope), rowsWritten };
  }

  private async submit(submit: StoredSubmit, waitMs: number): Promise<OperationReply | null> {
    const known = this.terminal.get(submit.operationId);
    if (known && known.inputHash === submit.inputHash) return { ...known, rowsWritten: 0 };
    const reply = await operationStub(this.env, submit.operationId).submit({ ...submit, waitMs });
    if (!reply.ok) return null;
    if (reply.value.terminal) this.terminal.set(submit.operationId, reply.value);
    return reply.value;
  }

  /** Kept as one row, updated in the same synchronous block as each turn (O(1), not a scan). */
  private usage(): Usage {
    const row = this.store.one<{ turns: number; calls: number; cost: number }>("SELECT turns, calls, cost FROM usage")!;
    return { turns: row.turns, toolCalls: row.calls, cost: row.cost };
  }

  private offeredTools(run: RunData): Map<string, ToolSpec> {
    const key = JSON.stringify(Object.keys(run.tools));
    if (this.offered?.key === key) return this.offered.tools;
    const tools = new Map<string, ToolSpec>();
    for (const [name, source] of Object.entries(run.tools)) {
      const spec = resolveTool(source, hostPolicy(this.env));
      if (spec.ok) tools.set(name, spec.value);
    }
    this.offered = { key, tools };
    return tools;
  }

  private load(): RunData | null {
    if (!this.store.exists("run")) return null;
    const row = this.store.one<{ data: string }>("SELECT data FROM run");
    return row ? (JSON.parse(row.data) as RunData) : null;
  }

  private loadFor(tenantId: string): RunData | null {
    const run = this.load();
    return run && run.tenantId === tenantId ? run : null;
  }

  private save(run: RunData): void {
    this.store.run("UPDATE run SET data = ?", JSON.stringify(run));
  }

  private turnRow(turnId: string): Turn | null {
    const row = this.store.one<TurnRow>("SELECT id, calls, reserved_cost, settled_cost FROM turns WHERE id = ?", turnId);
    return row ? { ...row, calls: JSON.parse(row.calls) as StoredCall[] } : null;
  }

  private view(run: RunData): RunView {
    const usage = this.usage();
    return {
      run_id: run.runId, status: run.cancelledAtMs === null ? "active" : "cancelled", user: run.user, tools: Object.keys(run.tools),
      context: run.context, budgets: run.budgets, usage: { turns: usage.turns, tool_calls: usage.toolCalls, cost: usage.cost },
      created_at: new Date(run.createdAtMs).toISOString(), expires_at: new Date(run.expiresAtMs).toISOString(),
    };
  }
}

const notFound = (what: string): Result<never, RunError> => err({ code: "not_found", detail: `no such ${what}` });

/** Calls refused at the gate get a stable id too, so every envelope carries an operation_id. */
async function refusedId(run: RunData, call: ProposedCall): Promise<string> {
  return `op_${(await sha256Hex(canonicalJson([run.tenantId, run.runId, "refused", call.id]))).slice(0, 32)}`;
}
