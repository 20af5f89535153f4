// RunObject: one per run. Holds the offered tools (snapshotted at creation), bound context and
// turns. A turn is admitted through the pure gate, written as one row (call → operation), and its
// operations are submitted concurrently. The turn row stores each call's frozen submission, so
// re-posting or polling a turn re-submits it: a no-op replay for every existing operation.
import { DurableObject } from "cloudflare:workers";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import { refusal, type Envelope } from "../domain/envelope.ts";
import { admitCall, type ProposedCall } from "../domain/gate.ts";
import { freezeCall } from "../domain/identity.ts";
import type { TraceEvent } from "../domain/operation.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { hostPolicy, type Env } from "../env.ts";
import { resolveTool } from "../tools/catalog.ts";
import type { ToolSource, ToolSpec } from "../tools/spec.ts";
import type { SubmitRequest } from "./operation-object.ts";
import { RUN_SCHEMA, SqlStore } from "./store.ts";
import { operationStub } from "./stubs.ts";

export type RunInit = {
  runId: string;
  tenantId: string;
  user: { id: string; scopes: string[] };
  tools: Record<string, ToolSource>;
  context: Record<string, unknown>;
  budgets: Record<string, number>;
  expiresAtMs: number;
};
export type RunView = { run_id: string; user: RunInit["user"]; tools: string[]; context: Record<string, unknown>; budgets: Record<string, number>; created_at: string; expires_at: string; turns: number };
export type TurnReply = { turn_id: string; status: "settled" | "pending"; results: Envelope[]; rowsWritten: number };
export type RunError = { code: "not_found"; detail: string } | { code: "invalid_request"; detail: string } | { code: "internal"; detail: string };

/** A call as stored in the turn row: either refused at the gate, or a frozen submission. */
type StoredCall = { call_id: string; name: string } & ({ refused: Envelope } | { submit: Omit<SubmitRequest, "waitMs"> });

export class RunObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage.sql, RUN_SCHEMA);
  private offered: Map<string, ToolSpec> | null = null;

  async create(init: RunInit): Promise<Result<RunView, RunError>> {
    this.store.ensureSchema();
    if (this.load()) return err({ code: "invalid_request", detail: "run already exists" });
    this.store.run("INSERT INTO run (id, tenant_id, data, created_at) VALUES (?, ?, ?, ?)", init.runId, init.tenantId, JSON.stringify(init), Date.now());
    return ok(this.view()!);
  }

  async get(tenantId: string): Promise<Result<RunView, RunError>> {
    return this.loadFor(tenantId) ? ok(this.view()!) : err({ code: "not_found", detail: "no such run" });
  }

  async postTurn(tenantId: string, calls: ProposedCall[], waitMs: number): Promise<Result<TurnReply, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return err({ code: "not_found", detail: "no such run" });
    const rowsBefore = this.store.rowsWritten;
    const turnId = `turn_${(await sha256Hex(canonicalJson(calls.map((call) => call.id)))).slice(0, 26)}`;
    if (!this.turnRow(turnId)) {
      const stored = await Promise.all(calls.map((call) => this.admit(run, call)));
      // Re-check after the await: a concurrent post of the same turn may have written it meanwhile.
      if (!this.turnRow(turnId)) {
        const seq = (this.store.one<{ n: number }>("SELECT COUNT(*) AS n FROM turns")?.n ?? 0) + 1;
        this.store.run("INSERT INTO turns (id, seq, calls, created_at) VALUES (?, ?, ?, ?)", turnId, seq, JSON.stringify(stored), Date.now());
      }
    }
    return this.settle(turnId, waitMs, this.store.rowsWritten - rowsBefore);
  }

  async getTurn(tenantId: string, turnId: string, waitMs: number): Promise<Result<TurnReply, RunError>> {
    if (!this.loadFor(tenantId) || !this.turnRow(turnId)) return err({ code: "not_found", detail: "no such turn" });
    return this.settle(turnId, waitMs, 0);
  }

  async traceFor(tenantId: string): Promise<Result<{ run_id: string; events: TraceEvent[] }, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return err({ code: "not_found", detail: "no such run" });
    const turns = this.store.all<{ id: string; calls: string; created_at: number }>("SELECT id, calls, created_at FROM turns ORDER BY seq");
    const events: TraceEvent[] = [{ type: "run_created", at_ms: this.store.one<{ created_at: number }>("SELECT created_at FROM run")!.created_at, run_id: run.runId }];
    const operations = new Set<string>();
    for (const turn of turns) {
      const calls = JSON.parse(turn.calls) as StoredCall[];
      events.push({
        type: "turn_received",
        at_ms: turn.created_at,
        turn_id: turn.id,
        calls: calls.map((call) => ({ call_id: call.call_id, name: call.name, ...("submit" in call ? { operation_id: call.submit.operationId } : { operation_id: call.refused.operation_id, refused: call.refused.status }) })),
      });
      for (const call of calls) if ("submit" in call) operations.add(call.submit.operationId);
    }
    for (const operationId of operations) {
      const opTrace = await this.operation(operationId).traceFor(tenantId);
      if (opTrace.ok) events.push(...opTrace.value.map((event) => ({ ...event, operation_id: operationId })));
    }
    events.sort((a, b) => a.at_ms - b.at_ms);
    return ok({ run_id: run.runId, events });
  }

  private async admit(run: RunInit, call: ProposedCall): Promise<StoredCall> {
    const admitted = admitCall(call, this.offeredTools(run), run.context);
    if (!admitted.ok) {
      const refusedId = `op_${(await sha256Hex(canonicalJson([run.tenantId, run.runId, "refused", call.id]))).slice(0, 32)}`;
      return { call_id: call.id, name: call.name, refused: refusal("rejected", refusedId, admitted.error.code, admitted.error.message) };
    }
    const { spec, input } = admitted.value;
    const frozen = await freezeCall({
      tenantId: run.tenantId, runId: run.runId, tool: spec.name, risk: spec.risk, scope: spec.operationScope,
      operationKey: spec.operationKey, input, callId: call.id,
    });
    return {
      call_id: call.id,
      name: call.name,
      submit: {
        tenantId: run.tenantId, runId: run.runId, callId: call.id, source: run.tools[spec.name]!,
        canonicalInput: frozen.canonicalInput, inputHash: frozen.inputHash, operationId: frozen.operationId, idempotencyKey: frozen.idempotencyKey,
      },
    };
  }

  /** Submits every call of the turn (a replay for existing operations) and collects envelopes in call order. */
  private async settle(turnId: string, waitMs: number, rowsWrittenHere: number): Promise<Result<TurnReply, RunError>> {
    const calls = JSON.parse(this.turnRow(turnId)!.calls) as StoredCall[];
    let rowsWritten = rowsWrittenHere;
    const replies = await Promise.all(
      calls.map(async (call) => {
        if ("refused" in call) return { envelope: call.refused, settled: true };
        const reply = await this.operation(call.submit.operationId).submit({ ...call.submit, waitMs });
        if (!reply.ok) return { envelope: refusal("failed", call.submit.operationId, "permanent_failure", `toolgate could not run this tool (${reply.error.code}). Do not retry; tell the user.`), settled: true };
        rowsWritten += reply.value.rowsWritten;
        return reply.value;
      }),
    );
    return ok({
      turn_id: turnId,
      status: replies.every((reply) => reply.settled) ? "settled" : "pending",
      results: replies.map((reply) => reply.envelope),
      rowsWritten,
    });
  }

  private offeredTools(run: RunInit): Map<string, ToolSpec> {
    if (this.offered) return this.offered;
    const offered = new Map<string, ToolSpec>();
    for (const [name, source] of Object.entries(run.tools)) {
      const spec = resolveTool(source, hostPolicy(this.env));
      if (spec.ok) offered.set(name, spec.value);
    }
    this.offered = offered;
    return offered;
  }

  private operation(operationId: string) {
    return operationStub(this.env, operationId);
  }

  private load(): RunInit | null {
    if (!this.store.exists("run")) return null;
    const row = this.store.one<{ data: string }>("SELECT data FROM run");
    return row ? (JSON.parse(row.data) as RunInit) : null;
  }

  private loadFor(tenantId: string): RunInit | null {
    const run = this.load();
    return run && run.tenantId === tenantId ? run : null;
  }

  private turnRow(turnId: string) {
    return this.store.one<{ calls: string }>("SELECT calls FROM turns WHERE id = ?", turnId);
  }

  private view(): RunView | null {
    const run = this.load();
    if (!run) return null;
    const created = this.store.one<{ created_at: number }>("SELECT created_at FROM run")!.created_at;
    const turns = this.store.one<{ n: number }>("SELECT COUNT(*) AS n FROM turns")!.n;
    return {
      run_id: run.runId, user: run.user, tools: Object.keys(run.tools), context: run.context, budgets: run.budgets,
      created_at: new Date(created).toISOString(), expires_at: new Date(run.expiresAtMs).toISOString(), turns,
    };
  }
}
