// RunObject: one per run, a thin shell around domain/turn/: load rows (store/run-rows.ts) → pure
// decision → one transactionSync → effects. A turn's row and usage are committed *before* any of its
// operations is sent: the RPCs leave after the transaction with no await between, so the output
// gate holds them until the commit is confirmed (Cloudflare, "Durable Objects: Easy, Fast, Correct —
// Choose three"). A crash loses a turn only with its operations, never its accounting alone. Each
// RPC's body beyond load-and-answer lives beside it: admit.ts, settle.ts, close.ts, trace.ts.
import { DurableObject } from "cloudflare:workers";
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { RUN_TEXT } from "../../domain/envelope.ts";
import type { TraceEvent } from "../../domain/operation/index.ts";
import type { OtlpTrace } from "../../domain/otlp.ts";
import type { ModelUsage } from "../../domain/pricing.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { TenantFacts } from "../../domain/tenant-facts.ts";
import { mayExecute, type ProposedCall } from "../../domain/turn/gate.ts";
import { hashTools, openOperations, type Denial, type RunState } from "../../domain/turn/turn.ts";
import type { Wait } from "../../domain/wait.ts";
import { retentionMs } from "../../config.ts";
import type { Env } from "../env.ts";
import type { ToolDefinition, ToolSource } from "../../tools/spec.ts";
import { encodeRun, RUN_LAZY_TABLES, RUN_SCHEMA } from "../store/run-rows.ts";
import { SqlStore } from "../store/sql-store.ts";
import { postTurn } from "./admit.ts";
import { insertRun, requestHashOf } from "./create.ts";
import { close } from "./close.ts";
import {
  notFound,
  type IdempotencyWarning,
  type McpCall,
  type McpCallReply,
  type RunError,
  type RunInit,
  type RunView,
  type TurnReply,
} from "./contracts.ts";
import { idempotencyWarnings, toolDefinitions } from "./export.ts";
import { OfferedTools } from "./offered.ts";
import type { RunParts } from "./parts.ts";
import { runAlarm } from "./retention.ts";
import { RunRows } from "./rows.ts";
import { TurnSettler } from "./settle.ts";
import { RunEvents } from "./events.ts";
import { RunFacts } from "./facts.ts";
import { ToolSources } from "./sources.ts";
import { mcpTurn } from "./mcp.ts";
import { runOtlp, runTrace } from "./trace.ts";
import { runIndexEntry } from "./index-entry.ts";
import * as Undo from "./compensate.ts";
import { rollbackAlarm, rollbackOf, startRollback } from "./rollback.ts";
import type { CompensationSource } from "../operation/compensation.ts";

export class RunObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, RUN_SCHEMA, RUN_LAZY_TABLES);
  private readonly sources = new ToolSources(this.store);
  private readonly rows = new RunRows(this.store, this.sources.sourceOf);
  private readonly offered = new OfferedTools(this.env);
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
    offered: this.offered,
    events: this.events,
  };
  /** MCP calls in flight, request key → turn id: memory is the truth (an evicted object has no
   * live call left to cancel; MCP lets a server ignore a cancellation of an unknown request). */
  private readonly mcpInFlight = new Map<string, string>();

  /**
   * `requestHash`: the creating request's hash, when the client named it with a request_id (see
   * `requested`). `facts`: the tenant facts read with the tools (run/facts.ts).
   */
  async create(
    init: RunInit,
    requestHash: string | null = null,
    facts: TenantFacts | null = null,
  ): Promise<Result<RunView, RunError>> {
    const run: RunState = {
      ...init,
      toolsHash: await hashTools(init.tools),
      createdAtMs: Date.now(),
      cancelledAtMs: null,
    };
    await this.sources.hash(Object.values(init.tools));
    const created = this.store.transaction(() => {
      const inserted = insertRun(this.store, this.rows, this.sources, run, requestHash);
      if (inserted && facts) this.facts.write(run.toolsHash, facts);
      return inserted;
    });
    // Retention: looked at once the run's token has expired (see alarm()).
    if (created) await this.ctx.storage.setAlarm(run.expiresAtMs + retentionMs(this.env));
    return created
      ? ok(this.view(run))
      : err({ code: "invalid_request", detail: "run already exists" });
  }

  /**
   * POST /v1/runs sent again with the same request_id (the run id derives from it): this run if it
   * was created by the same request, `request_id_conflict` if by another; null when there is none yet.
   */
  async requested(
    tenantId: string,
    requestHash: string,
  ): Promise<Result<RunView | null, RunError>> {
    const run = this.rows.loadFor(tenantId);
    if (!run) {
      const missing = this.rows.missing(tenantId);
      return !missing.ok && missing.error.code === "run_pruned" ? missing : ok(null);
    }
    return requestHashOf(this.store) === requestHash
      ? ok(this.view(run))
      : err({
          code: "request_id_conflict",
          detail:
            "this request_id already created a run from a different request body; use a new request_id for a new run",
        });
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
  async update(
    tenantId: string,
    patch: { scopes?: string[]; tools?: Record<string, ToolSource>; facts?: TenantFacts },
  ): Promise<Result<RunView, RunError>> {
    const toolsHash = patch.tools ? await hashTools(patch.tools) : null;
    if (patch.tools) await this.sources.hash(Object.values(patch.tools));
    const next = this.store.transaction(() => {
      const run = this.rows.loadFor(tenantId);
      if (!run) return null;
      if (patch.tools) this.sources.store(Object.values(patch.tools));
      const next: RunState = {
        ...run,
        user: { ...run.user, scopes: patch.scopes ?? run.user.scopes },
        tools: patch.tools ?? run.tools,
        toolsHash: toolsHash ?? run.toolsHash,
      };
      this.store.run("UPDATE run SET data = ?", encodeRun(next));
      if (patch.tools && patch.facts) this.facts.write(next.toolsHash, patch.facts);
      return next;
    });
    return next ? ok(this.view(next)) : this.rows.missing(tenantId);
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
    const run = this.rows.loadFor(tenantId);
    if (!run) return this.rows.missing(tenantId);
    const turn = await mcpTurn(run, this.offered.of(run), call);
    if (!turn.ok) return turn;
    const { proposed, turnId, checkStatus } = turn.value;
    this.mcpInFlight.set(call.requestKey, turnId);
    try {
      const wait = { ms: waitMs, holdForPeople: false };
      const reply = await this.postTurn(tenantId, proposed, 0, wait, null, "mcp");
      if (!reply.ok) return reply;
      const envelope = reply.value.results[0]?.envelope;
      return envelope
        ? ok({ envelope, checkStatus })
        : err({ code: "invalid_request", detail: "the call has no result" });
    } finally {
      if (this.mcpInFlight.get(call.requestKey) === turnId)
        this.mcpInFlight.delete(call.requestKey);
    }
  }

  /**
   * A client cancelled an MCP request (notifications/cancelled, or the response stream closed):
   * closes its call like POST /v1/operations/{id}/cancel. False when no such call is in flight.
   */
  async mcpCancel(
    tenantId: string,
    requestKey: string,
    by: string,
  ): Promise<Result<boolean, RunError>> {
    if (!this.rows.loadFor(tenantId)) return this.rows.missing(tenantId);
    const turnId = this.mcpInFlight.get(requestKey);
    const turn = turnId ? this.rows.turn(turnId) : null;
    if (!turn) return ok(false);
    for (const operationId of openOperations(turn))
      await close(this.parts, tenantId, operationId, by);
    return ok(true);
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
    return run
      ? ok(toolDefinitions([...this.offered.of(run).values()]))
      : this.rows.missing(tenantId);
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
   * lock: may it still execute? `policyVersion` (approvals): the hash of the tool source the
   * person saw; a tool changed since then cannot ride that approval.
   */
  async authorize(
    tenantId: string,
    tool: string,
    policyVersion: string | null = null,
    compensates: string | null = null,
  ): Promise<Result<true, Denial>> {
    if (compensates)
      return Undo.authorizeCompensation(this.parts, tenantId, compensates, tool, policyVersion);
    const run = this.rows.loadFor(tenantId);
    const verdict = mayExecute(run, run ? this.offered.of(run) : new Map(), tool, Date.now());
    if (!verdict.ok || policyVersion === null || !run) return verdict;
    return (await sha256Hex(canonicalJson(run.tools[tool]))) === policyVersion
      ? verdict
      : err({
          status: "rejected",
          code: "approval_expired",
          message: RUN_TEXT.toolChangedWhileWaiting(tool),
        });
  }

  /** Undo (issue 22, compensate.ts): the original's declared compensation, one operation however often asked. */
  async compensate(tenantId: string, original: CompensationSource, asked: Undo.Asked) {
    return Undo.compensate(this.parts, tenantId, original, asked);
  }

  /** Retention for the run itself (retention.ts); once pruned, the derived caches go too. */
  override async alarm(): Promise<void> {
    if (!(await runAlarm(this.parts, this.ctx.storage)))
      return rollbackAlarm(this.parts, this.ctx.storage);
    this.offered.clear();
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
    if (rollback) await startRollback(this.parts, tenantId, by, this.ctx.storage);
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

  private view(run: RunState): RunView {
    return this.rows.view(run, this.offered.of(run));
  }

  private withRollback(run: RunState): RunView {
    const rollback = rollbackOf(this.parts);
    return rollback ? { ...this.view(run), rollback } : this.view(run);
  }
}
