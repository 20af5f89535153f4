// RunObject: one per run, a thin shell around domain/turn/: load rows (store/run-rows.ts) → pure
// decision → one transactionSync → effects. A turn's row and usage are committed *before* any of its
// operations is sent: the RPCs leave after the transaction with no await between, so the output
// gate holds them until the commit is confirmed (Cloudflare, "Durable Objects: Easy, Fast, Correct —
// Choose three"). A crash loses a turn only with its operations, never its accounting alone. Each
// RPC's body beyond load-and-answer lives beside it: create.ts, update.ts, admit.ts, mcp.ts,
// settle.ts, close.ts, trace.ts.
import { DurableObject } from "cloudflare:workers";
import { RUN_TEXT } from "../../domain/envelope.ts";
import type { TraceEvent } from "../../domain/operation/index.ts";
import type { OtlpTrace } from "../../domain/otlp.ts";
import type { ModelUsage } from "../../domain/pricing.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { PlanEntry } from "../../domain/rollback.ts";
import type { TenantFacts } from "../../domain/tenant-facts.ts";
import { mayExecute, type ProposedCall } from "../../domain/turn/gate.ts";
import { admitEdit, type EditRefusal } from "../../domain/turn/edit.ts";
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import type { Denial, RunState } from "../../domain/turn/turn.ts";
import type { Wait } from "../../domain/wait.ts";
import type { Env } from "../env.ts";
import * as catalog from "../../tools/catalog.ts";
import type { ToolDefinition } from "../../tools/spec.ts";
import { hostPolicy } from "../../config.ts";
import { encodeRun, RUN_LAZY_TABLES, RUN_SCHEMA } from "../store/run-rows.ts";
import { SqlStore } from "../store/sql-store.ts";
import { postTurn } from "./admit.ts";
import { createRun, requestedRun, viewOf } from "./create.ts";
import { updateRun, type RunPatch } from "./update.ts";
import { close } from "./close.ts";
import {
  notFound,
  type IdempotencyWarning,
  type McpCall,
  type McpCallReply,
  type RunError,
  type RunInit,
  type RunView,
  type RunWarning,
  type TurnReply,
  type RunParts,
  type EditAdmitted,
} from "./contracts.ts";
import { idempotencyWarnings, runWarnings, toolDefinitions } from "./export.ts";
import { runAlarm } from "./retention.ts";
import { RunRows } from "./rows.ts";
import { TurnSettler } from "./settle.ts";
import { RunEvents } from "./events.ts";
import { RunFacts } from "./facts.ts";
import { ToolSources } from "./sources.ts";
import type { McpCancelTarget } from "../../domain/mcp-call.ts";
import { McpCalls } from "./mcp.ts";
import { runOtlp, runTrace } from "./trace.ts";
import { runIndexEntry } from "./index-entry.ts";
import * as Undo from "./compensate.ts";
import { rollbackAlarm, rollbackOf, startRollback } from "./rollback.ts";
import * as Plan from "./rollback-plan.ts";
import type { CompensationSource } from "../operation/compensation.ts";

export class RunObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, RUN_SCHEMA, RUN_LAZY_TABLES);
  private readonly sources = new ToolSources(this.store);
  private readonly rows = new RunRows(this.store, this.sources.sourceOf);
  private readonly events = new RunEvents(this.env, this.store, this.rows, this.ctx);
  private readonly facts = new RunFacts(this.env, this.store, (p) => this.ctx.waitUntil(p));
  private readonly settler = new TurnSettler(
    this.env,
    this.store,
    this.rows,
    this.events,
    this.facts,
  );
  private readonly parts: RunParts = {
    env: this.env,
    store: this.store,
    rows: this.rows,
    sources: this.sources,
    settler: this.settler,
    events: this.events,
  };
  private readonly mcp = new McpCalls(this.parts);
  /** The run's offered tools, compiled (the catalog keeps them: tools/catalog.ts). */
  private readonly offered = (run: RunState) =>
    catalog.compileTools(run.tools, hostPolicy(this.env));

  /**
   * `requestHash`: the creating request's hash, when the client named it with a request_id (see
   * `requested`). `facts`: the tenant facts read with the tools (run/facts.ts).
   */
  async create(
    init: RunInit,
    requestHash: string | null = null,
    facts: TenantFacts | null = null,
  ): Promise<Result<RunView, RunError>> {
    return createRun(this.parts, this.facts, this.ctx.storage, init, requestHash, facts);
  }

  /**
   * POST /v1/runs sent again with the same request_id (the run id derives from it): this run if it
   * was created by the same request, `request_id_conflict` if by another; null when there is none yet.
   */
  async requested(
    tenantId: string,
    requestHash: string,
  ): Promise<Result<RunView | null, RunError>> {
    return requestedRun(this.parts, tenantId, requestHash);
  }

  /** The tenant index's row for this run and its operations' ids (issue 20: a rebuild). */
  async indexEntry(tenantId: string) {
    const run = this.rows.loadFor(tenantId);
    return run ? runIndexEntry(run, this.rows, Date.now(), Undo.compensationIds(this.parts)) : null;
  }

  async get(tenantId: string): Promise<Result<RunView, RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run ? ok(this.withRollback(run)) : this.rows.missing(tenantId);
  }

  /** Scopes and offered tools may change mid-run; the next admission and the next retry see the change. */
  async update(tenantId: string, patch: RunPatch): Promise<Result<RunView, RunError>> {
    return updateRun(this.parts, this.facts, tenantId, patch);
  }

  /**
   * `group`: the turn key shared by calls of one model response posted separately, and its usage.
   * `format`: the provider format the caller reads the results in (recorded with each `reported` event).
   */
  async postTurn(
    tenantId: string,
    calls: ProposedCall[],
    modelCost: number,
    wait: Wait,
    group: { key: string; usage: ModelUsage | null } | null = null,
    format = "native",
  ): Promise<Result<TurnReply, RunError>> {
    return postTurn(this.parts, tenantId, calls, modelCost, wait, group, format);
  }

  /**
   * One MCP tools/call as a one-call turn through the same engine as any turn. A name the run does
   * not offer is `unknown_tool` (a protocol error for MCP, nothing recorded). The call is admitted
   * and dispatched without waiting; only a call still executing is waited for (up to `waitMs`): a
   * call waiting for a person answers at once.
   */
  async mcpCall(
    tenantId: string,
    call: McpCall,
    waitMs: number,
  ): Promise<Result<McpCallReply, RunError>> {
    return this.mcp.call(this, tenantId, call, waitMs);
  }

  /**
   * A client cancelled an MCP request (notifications/cancelled, or the response stream closed):
   * closes its call like POST /v1/operations/{id}/cancel. False when no such call is in flight
   * (or the request id names several callers' calls: domain/mcp-call.ts `cancelledCall`).
   */
  async mcpCancel(
    tenantId: string,
    target: McpCancelTarget,
    by: string,
  ): Promise<Result<boolean, RunError>> {
    return this.mcp.cancel(tenantId, target, by);
  }

  async getTurn(
    tenantId: string,
    turnId: string,
    wait: Wait,
    format = "native",
  ): Promise<Result<TurnReply, RunError>> {
    if (!this.rows.loadFor(tenantId)) return this.rows.missing(tenantId);
    const turn = this.rows.turn(turnId);
    return turn ? ok(await this.settler.settle(turn, wait, 0, format)) : notFound("turn");
  }

  /** The offered tools as plain data, for exporting definitions to the model (plus toolgate_check_status with any write). */
  async toolDefinitions(tenantId: string): Promise<Result<ToolDefinition[], RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run ? ok(toolDefinitions([...this.offered(run).values()])) : this.rows.missing(tenantId);
  }

  /** The run's warnings (export.ts): unverified idempotency and missing context, [] when none. */
  async warnings(tenantId: string): Promise<Result<RunWarning[], RunError>> {
    const run = this.rows.loadFor(tenantId);
    if (!run) return this.rows.missing(tenantId);
    const offered = [...this.offered(run).values()];
    return ok(
      await runWarnings(this.env, tenantId, run, offered, this.facts.usable(run, Date.now())),
    );
  }

  /** Offered tools whose idempotency key no verification vouches for (export.ts). */
  async idempotencyWarnings(tenantId: string): Promise<Result<IdempotencyWarning[], RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run
      ? ok(await idempotencyWarnings(this.env, tenantId, run, this.facts.usable(run, Date.now())))
      : this.rows.missing(tenantId);
  }

  /**
   * Asked by an operation before each retry, after an approval and after waiting for a resource
   * lock: may it still execute? `toolVersion` (approvals): the hash of the tool source the
   * person saw; a tool changed since then cannot ride that approval.
   */
  async authorize(
    tenantId: string,
    tool: string,
    toolVersion: string | null = null,
    compensates: string | null = null,
  ): Promise<Result<true, Denial>> {
    if (compensates)
      return Undo.authorizeCompensation(this.parts, tenantId, compensates, tool, toolVersion);
    const run = this.rows.loadFor(tenantId);
    const verdict = mayExecute(run, run ? this.offered(run) : new Map(), tool, Date.now());
    const source = run?.tools[tool];
    if (!verdict.ok || toolVersion === null || !source) return verdict;
    return (await catalog.toolVersion(source)) === toolVersion
      ? verdict
      : err({
          status: "rejected",
          code: "approval_expired",
          message: RUN_TEXT.toolChangedWhileWaiting(tool),
        });
  }

  /**
   * A person's edited arguments for one of this run's calls awaiting approval (issue 35 item 2):
   * the turn's gate again, under the run's context and scopes of this moment (domain/turn/edit.ts),
   * then frozen (canonical JSON and its hash). Read-only: the operation commits the edit.
   */
  async admitEdit(
    tenantId: string,
    tool: string,
    current: Record<string, unknown>,
    edited: Record<string, unknown>,
  ): Promise<Result<EditAdmitted, EditRefusal | RunError>> {
    const run = this.rows.loadFor(tenantId);
    if (!run) return this.rows.missing(tenantId);
    const admitted = admitEdit(run, this.offered(run), tool, current, edited);
    if (!admitted.ok) return admitted;
    const canonical = canonicalJson(admitted.value.input);
    return ok({
      input: { value: admitted.value.input, canonical, hash: await sha256Hex(canonical) },
      claims: admitted.value.claims,
      principal: { user: run.user, context: run.context },
      bound: Object.keys(this.offered(run).get(tool)?.bind ?? {}),
    });
  }

  /**
   * A freeze was put or lifted (issue 34): stop handing out the tenant-facts snapshot now, so the
   * next call asks the tenant (which answers with the freezes of the moment) until a refresh lands.
   */
  async dropFacts(tenantId: string): Promise<void> {
    const run = this.rows.loadFor(tenantId);
    if (run) this.facts.invalidate(run);
  }

  /** Undo (issue 22, compensate.ts): the original's declared compensation, one operation however often asked. */
  async compensate(tenantId: string, original: CompensationSource, asked: Undo.Asked) {
    return Undo.compensate(this.parts, tenantId, original, asked);
  }

  /** A running rollback's plan (rollback-plan.ts): each compensation still to come with its hash. */
  async rollbackPlan(tenantId: string): Promise<Result<Plan.RollbackPlan, RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run ? Plan.planOf(this.parts, run, rollbackOf(this.parts)) : this.rows.missing(tenantId);
  }

  /**
   * A person approves the rollback's plan as shown (issue 35 item 4): stored bound to its (hash,
   * version) pairs, then the rollback is driven on, casting it on the compensation that waits now.
   */
  async approveRollbackPlan(
    tenantId: string,
    by: Plan.PlanDecider,
    shown: PlanEntry[],
    reason: string | null,
  ): Promise<Result<Plan.RollbackPlan, RunError>> {
    const run = this.rows.loadFor(tenantId);
    if (!run) return this.rows.missing(tenantId);
    const approved = await Plan.approvePlan(
      this.parts,
      run,
      rollbackOf(this.parts),
      by,
      shown,
      reason,
    );
    if (!approved.ok) return approved;
    await rollbackAlarm(this.parts, this.ctx.storage);
    return Plan.planOf(this.parts, run, rollbackOf(this.parts));
  }

  /** Retention for the run itself (retention.ts); once pruned, the derived caches go too. */
  override async alarm(): Promise<void> {
    if (!(await runAlarm(this.parts, this.ctx.storage)))
      return rollbackAlarm(this.parts, this.ctx.storage);
    this.sources.clear();
    this.settler.clear();
    this.facts.clear();
  }

  /**
   * Cancels the run: no new call is admitted or retried, and every open call of every turn is
   * closed. `rollback` (issue 22, rollback.ts): then its applied writes are compensated, newest first.
   */
  async cancel(tenantId: string, by: string, rollback = false): Promise<Result<RunView, RunError>> {
    const run = this.store.transaction(() => {
      const run = this.rows.loadFor(tenantId);
      if (run && run.cancelledAtMs === null)
        this.store.run("UPDATE run SET data = ?", encodeRun({ ...run, cancelledAtMs: Date.now() }));
      return run;
    });
    if (!run) return this.rows.missing(tenantId);
    await close(this.parts, tenantId, null, by);
    if (rollback) {
      const started = await startRollback(this.parts, run, by, this.ctx.storage);
      if (!started.ok) return started;
    }
    return ok(this.withRollback(this.rows.load()!));
  }

  /** Closes the calls waiting on one operation, then cancels it (POST /v1/operations/{id}/cancel). */
  async closeOperation(
    tenantId: string,
    operationId: string,
    by: string,
  ): Promise<Result<true, RunError>> {
    if (!this.rows.loadFor(tenantId)) return this.rows.missing(tenantId);
    await close(this.parts, tenantId, operationId, by);
    return ok(true);
  }

  async traceFor(
    tenantId: string,
  ): Promise<Result<{ run_id: string; events: TraceEvent[] }, RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run ? ok(await runTrace(this.parts, tenantId, run)) : this.rows.missing(tenantId);
  }

  /** The run's trace as OTLP/JSON resourceSpans (GET /v1/runs/{id}/trace?format=otlp). */
  async otlpFor(tenantId: string): Promise<Result<OtlpTrace, RunError>> {
    const run = this.rows.loadFor(tenantId);
    return run ? ok(await runOtlp(this.parts, tenantId, run)) : this.rows.missing(tenantId);
  }

  private withRollback(run: RunState): RunView {
    const rollback = rollbackOf(this.parts);
    return rollback ? { ...viewOf(this.parts, run), rollback } : viewOf(this.parts, run);
  }
}
