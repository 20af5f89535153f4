// RunObject: one per run. A thin shell around domain/turn.ts, as operation-object.ts is around
// domain/operation.ts: load rows (typed codecs in store.ts) → pure decision → one transactionSync →
// effects. A turn's row and its usage are committed *before* any of its operations is sent: the
// RPCs are issued after the transaction with no await in between, so the output gate holds them
// until the commit is confirmed (Cloudflare, "Durable Objects: Easy, Fast, Correct — Choose
// three": outgoing messages wait for pending writes). A crash can lose a turn only together with
// its operations, never its accounting alone. Memory holds bounded, derived caches only.
import { DurableObject } from "cloudflare:workers";
import { idempotencyKeySecret } from "../crypto.ts";
import type { Budgets } from "../domain/budget.ts";
import type { ProposedCall } from "../domain/gate.ts";
import type { TraceEvent } from "../domain/operation/index.ts";
import { otlpTrace, type OperationTrace, type OtlpTrace } from "../domain/otlp.ts";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import {
  CHECK_STATUS,
  CHECK_STATUS_DEFINITION,
  checkStatusEnvelope,
  checkStatusId,
  checkStatusSpent,
  checkStatusTarget,
  mayReadOperation,
  offersCheckStatus,
} from "../domain/check-status.ts";
import { RUN_TEXT, type Envelope } from "../domain/envelope.ts";
import { mcpCallId } from "../domain/mcp-call.ts";
import { redactContext } from "../domain/redact.ts";
import { err, ok, type Result } from "../domain/result.ts";
import {
  admitStored,
  countStored,
  NO_STORED,
  RUN_LIMITS,
  stoppedTurn,
  type StoredCounts,
} from "../domain/run-limits.ts";
import {
  admitToGroup,
  closeCalls,
  freezeTurn,
  gateTurn,
  hashTools,
  mayExecute,
  openOperations,
  operationIds,
  planClose,
  planTurn,
  reportedOperations,
  sameGateInputs,
  settleTurn,
  submittedHashes,
  turnIdentity,
  turnReceived,
  unofferedNames,
  type CallObservation,
  type Denial,
  type RunState,
  type Standing,
  type Submission,
  type TurnGroup,
  type TurnCall,
  type TurnRecord,
  type TurnResult,
} from "../domain/turn.ts";
import type { ModelUsage } from "../domain/pricing.ts";
import { unverifiedTraceDetail } from "../domain/verification.ts";
import { hostPolicy, requireVerifiedIdempotency, retentionMs, type Env } from "../env.ts";
import { LruCache } from "../lru.ts";
import { MAX_CALLS_PER_TURN } from "../providers/types.ts";
import { resolveTool } from "../tools/catalog.ts";
import type { ToolDefinition, ToolSource, ToolSpec } from "../tools/spec.ts";
import type { OperationReply } from "./operation/contracts.ts";
import {
  decodeRun,
  decodeStoredCounts,
  decodeToolSource,
  decodeTurn,
  decodeTurnGroup,
  decodeUsage,
  encodeRun,
  encodeTurnCalls,
  RUN_LAZY_TABLES,
  RUN_SCHEMA,
  SqlStore,
  TURN_COLUMNS,
  TURN_GROUP_CALLS_COLUMN,
  USAGE_STORAGE_COLUMNS,
} from "./store.ts";
import { operationStub, tenantStub } from "./stubs.ts";
import { verificationStatuses } from "./trust.ts";

/** A run still holding an operation asks again a day later. */
const RUN_PRUNE_RECHECK_MS = 24 * 60 * 60_000;

export type RunInit = Omit<RunState, "toolsHash" | "createdAtMs" | "cancelledAtMs">;
export type RunView = {
  run_id: string;
  status: "active" | "cancelled";
  user: RunState["user"];
  tools: string[];
  context: Record<string, unknown>;
  budgets: Budgets;
  usage: { turns: number; tool_calls: number; cost: number };
  created_at: string;
  expires_at: string;
};
/** `results`: each call's envelope paired with the call, in call order. `pruned`: calls whose operation retention removed (`settled_as`: how it had settled). */
export type TurnReply = {
  turn_id: string;
  status: "settled" | "pending";
  results: TurnResult[];
  pruned: Array<{ call_id: string; operation_id: string; pruned_at: string; settled_as: string }>;
  rowsWritten: number;
};
export type IdempotencyWarning = {
  tool: string;
  code: "idempotency_unverified";
  status: "failed" | "unverified";
  /** TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY is on: the tool runs without automatic resends. */
  enforced: boolean;
  detail: string;
};
export type RunError =
  | { code: "not_found"; detail: string }
  | { code: "invalid_request"; detail: string }
  | { code: "turn_conflict"; detail: string }
  /** POST /v1/runs: this request_id already created a run from another body. */
  | { code: "request_id_conflict"; detail: string }
  | { code: "unknown_tool"; detail: string }
  /** The run stores no more turns (domain/run-limits.ts): nothing stored, nothing sent. */
  | { code: "run_turn_limit"; detail: string }
  /** TOOLGATE_SIGNING_KEY is unset: no upstream idempotency key can be derived. */
  | { code: "misconfigured"; detail: string }
  /** Expired, every operation pruned, then its own rows (retention): it answers 410 from then on. */
  | { code: "run_pruned"; run_id: string; pruned_at_ms: number };
/** One MCP tools/call: `requestKey` names it for cancellation, `nonce` names a read (domain/mcp-call.ts). */
export type McpCall = {
  requestKey: string;
  name: string;
  arguments: Record<string, unknown>;
  nonce: string;
};
/** `checkStatus`: the run offers toolgate_check_status (the result text may point at it). */
export type McpCallReply = { envelope: Envelope; checkStatus: boolean };

/** Recorded outcomes are immutable, so replays are answered from memory: bounded by count and bytes. */
const RECORDED_CACHE = { maxEntries: 256, maxBytes: 4 * 1024 * 1024 };
/** Decoded tool sources by hash (content-addressed, so never stale). */
const SOURCE_CACHE = { maxEntries: 64, maxBytes: 4 * 1024 * 1024 };
/**
 * Each tool source object's stored hash (`tool_sources`), so a call row names its source by hash.
 * Per isolate, not per object: decoded turns are shared by every object here (store.ts), and the
 * hash depends only on the source's content.
 */
const sourceHashes = new WeakMap<ToolSource, string>();

export class RunObject extends DurableObject<Env> {
  private readonly store = new SqlStore(this.ctx.storage, RUN_SCHEMA, RUN_LAZY_TABLES);
  private readonly sources = new LruCache<string, ToolSource>(
    SOURCE_CACHE,
    (source) => JSON.stringify(source).length,
  );
  private offered: { toolsHash: string; tools: Map<string, ToolSpec> } | null = null;
  /** `${operation} ${turn} ${format}` already reported (a bounded cache; the operation dedupes too). */
  private readonly reportedHere = new Set<string>();
  /** Operations whose trace keeps no more deliveries (MAX_REPORTED_EVENTS): no report RPC for them. */
  private readonly reportsFull = new Set<string>();
  /** Reports sent and not yet acknowledged: the run's own trace reads wait for them. */
  private reporting: Promise<void> = Promise.resolve();
  private readonly recorded = new LruCache<string, OperationReply>(
    RECORDED_CACHE,
    (reply) => JSON.stringify(reply.envelope).length + 200,
  );
  /**
   * MCP calls in flight here, by request key → turn id. Memory is the truth for "in flight": an
   * evicted object has no live call left to cancel (MCP: a cancellation for a request that is
   * unknown or already answered MAY be ignored).
   */
  private readonly mcpInFlight = new Map<string, string>();

  /** `requestHash`: the creating request's hash, when the client named it with a request_id (see `requested`). */
  async create(
    init: RunInit,
    requestHash: string | null = null,
  ): Promise<Result<RunView, RunError>> {
    const run: RunState = {
      ...init,
      toolsHash: await hashTools(init.tools),
      createdAtMs: Date.now(),
      cancelledAtMs: null,
    };
    await this.hashSources(Object.values(init.tools));
    const created = this.store.transaction(() => {
      this.store.ensureSchema();
      if (this.load() || this.store.one("SELECT 1 FROM run_pruned")) return false;
      this.store.run(
        "INSERT INTO run (id, tenant_id, data, created_at) VALUES (?, ?, ?, ?)",
        run.runId,
        run.tenantId,
        encodeRun(run),
        run.createdAtMs,
      );
      this.store.run("INSERT INTO usage (k, turns, calls, cost) VALUES (1, 0, 0, 0)");
      this.storeSources(Object.values(init.tools));
      if (requestHash !== null)
        this.store.run("INSERT INTO run_request (k, request_hash) VALUES (1, ?)", requestHash);
      return true;
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
    const run = this.loadFor(tenantId);
    if (!run) {
      const missing = this.missing(tenantId);
      return !missing.ok && missing.error.code === "run_pruned" ? missing : ok(null);
    }
    const row = this.store.exists("run_request")
      ? this.store.one<{ request_hash: string }>("SELECT request_hash FROM run_request WHERE k = 1")
      : null;
    return row?.request_hash === requestHash
      ? ok(this.view(run))
      : err({
          code: "request_id_conflict",
          detail:
            "this request_id already created a run from a different request body; use a new request_id for a new run",
        });
  }

  async get(tenantId: string): Promise<Result<RunView, RunError>> {
    const run = this.loadFor(tenantId);
    return run ? ok(this.view(run)) : this.missing(tenantId);
  }

  /** Scopes and offered tools may change mid-run; the next admission and the next retry see the change. */
  async update(
    tenantId: string,
    patch: { scopes?: string[]; tools?: Record<string, ToolSource> },
  ): Promise<Result<RunView, RunError>> {
    const toolsHash = patch.tools ? await hashTools(patch.tools) : null;
    if (patch.tools) await this.hashSources(Object.values(patch.tools));
    const next = this.store.transaction(() => {
      const run = this.loadFor(tenantId);
      if (!run) return null;
      if (patch.tools) this.storeSources(Object.values(patch.tools));
      const next: RunState = {
        ...run,
        user: { ...run.user, scopes: patch.scopes ?? run.user.scopes },
        tools: patch.tools ?? run.tools,
        toolsHash: toolsHash ?? run.toolsHash,
      };
      this.store.run("UPDATE run SET data = ?", encodeRun(next));
      return next;
    });
    return next ? ok(this.view(next)) : this.missing(tenantId);
  }

  /**
   * `group`: the turn key shared by calls of one model response posted separately, and its usage.
   * `format`: the provider format the caller reads the results in (recorded with each `reported` event).
   */
  async postTurn(
    tenantId: string,
    calls: ProposedCall[],
    modelCost: number,
    waitMs: number,
    group: { key: string; usage: ModelUsage | null } | null = null,
    format = "native",
  ): Promise<Result<TurnReply, RunError>> {
    const identity = await turnIdentity(calls);
    if (!this.env.TOOLGATE_SIGNING_KEY)
      return err({
        code: "misconfigured",
        detail:
          "TOOLGATE_SIGNING_KEY is not set for this deployment (upstream idempotency keys derive from it)",
      });
    const keySecret = await idempotencyKeySecret(this.env.TOOLGATE_SIGNING_KEY);
    const usageHash = group?.usage ? await sha256Hex(canonicalJson(group.usage)) : null;
    // What the operations of calls a budget or a cancel refuses said (peek, read-only): planTurn's `peeked`.
    const peeked = new Map<string, string | null>();
    // Each pass admits against one snapshot of the run; it repeats only if the run's tools or
    // scopes changed while it hashed (or asked the tenant), because the gate must see the newest.
    for (;;) {
      const run = this.loadFor(tenantId);
      if (!run) return this.missing(tenantId);
      const existing = this.turn(identity.id);
      if (existing) {
        if (existing.contentHash !== identity.contentHash)
          return err({
            code: "turn_conflict",
            detail: `turn ${identity.id} was posted with the same call ids and other calls; use new call ids for a new turn`,
          });
        return ok(await this.settle(existing, waitMs, 0, format));
      }
      const offered = this.offeredTools(run);
      const checks = offersCheckStatus(offered.values())
        ? calls.map((call) => call.name === CHECK_STATUS)
        : calls.map(() => false);
      const verdicts = gateTurn(run, offered, calls);
      const frozen = await freezeTurn(
        run,
        verdicts,
        await this.registered(
          run.tenantId,
          unofferedNames(verdicts).filter(
            (name) => name !== CHECK_STATUS || !checks.includes(true),
          ),
        ),
        keySecret,
      );
      // toolgate_check_status is answered here, at admission: a snapshot of the target, kept with the turn.
      // Up to the run's allowance (`looked`, counted with the turn; a post that raced past it goes again).
      const allowance = RUN_LIMITS.maxStatusChecks - this.storedCounts().checks;
      const looked = Math.max(0, Math.min(checks.filter(Boolean).length, allowance));
      let checkIndex = 0;
      for (const [index, call] of calls.entries())
        if (checks[index])
          frozen[index] = {
            call: { id: call.id, name: call.name },
            fixed: await this.checkStatus(run, call, checkIndex++ < looked),
          };
      await this.hashSources(frozen.flatMap((c) => ("submit" in c ? [c.submit.source] : [])));
      const rowsBefore = this.store.rowsWritten;
      const plan = this.store.transaction(() => {
        const now = this.loadFor(tenantId)!;
        if (this.turn(identity.id) || !sameGateInputs(run, now)) return null;
        const counts = this.migrateStored();
        if (counts.checks + looked > RUN_LIMITS.maxStatusChecks) return null;
        let grouping = null;
        if (group) {
          this.store.ensureSchema(); // a run created before turn groups existed lacks the table
          this.store.ensureColumn("turn_groups", TURN_GROUP_CALLS_COLUMN);
          const existing = this.group(group.key);
          const admission = admitToGroup(existing, usageHash, calls.length, MAX_CALLS_PER_TURN);
          if (!admission.ok) return admission;
          grouping = { key: group.key, existing, usageHash, admission: admission.value };
        }
        const plan = planTurn(
          now,
          this.usage(),
          identity,
          frozen,
          modelCost,
          Date.now(),
          grouping,
          this.knownRecorded(frozen),
          peeked,
        );
        // Refused calls whose operations were not asked yet: nothing is written; ask, then admit again.
        if (plan.unpeeked.length > 0) return { peek: plan.unpeeked };
        const { record, usage } = plan;
        const storedCalls = encodeTurnCalls(record.calls, this.hashOf);
        const bytes = new TextEncoder().encode(storedCalls).byteLength;
        const stopped = stoppedTurn(record, plan.runStopped);
        const full = admitStored(counts, bytes, stopped);
        if (full) return err(full);
        const stored = countStored(counts, bytes, stopped, looked);
        if (plan.group)
          this.store.run(
            "INSERT OR REPLACE INTO turn_groups (key, turn_stop, usage_hash, calls) VALUES (?, ?, ?, ?)",
            plan.group.key,
            plan.group.turnStop,
            plan.group.usageHash,
            plan.group.calls,
          );
        this.storeSources(dispatchedSources(record));
        this.store.run(
          `INSERT INTO turns (${TURN_COLUMNS}, admitted) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?)`,
          record.id,
          record.seq,
          record.contentHash,
          storedCalls,
          record.reservedCost,
          record.modelCost,
          record.createdAtMs,
          plan.dispatch.length,
        );
        if (this.store.exists("turn_ops")) this.indexTurn(record);
        this.store.run(
          "UPDATE usage SET turns = ?, calls = ?, cost = ?, stored_turns = ?, stored_bytes = ?, stopped_turns = ?, checks = ?",
          usage.turns,
          usage.toolCalls,
          usage.cost,
          stored.turns,
          stored.bytes,
          stored.stopped,
          stored.checks,
        );
        return ok(plan);
      });
      if (plan && "peek" in plan) {
        await this.peekInto(run.tenantId, plan.peek, peeked);
        continue;
      }
      if (plan && !plan.ok) return plan;
      if (plan) {
        logRefusals(run.runId, plan.value.record);
        return ok(
          await this.settle(plan.value.record, waitMs, this.store.rowsWritten - rowsBefore, format),
        );
      }
    }
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
    const run = this.loadFor(tenantId);
    if (!run) return this.missing(tenantId);
    const offered = this.offeredTools(run);
    const checkStatus = offersCheckStatus(offered.values());
    const risk = call.name === CHECK_STATUS && checkStatus ? "read" : offered.get(call.name)?.risk;
    if (!risk)
      return err({
        code: "unknown_tool",
        detail: `this run offers no tool named ${JSON.stringify(call.name)}; tools/list shows the offered tools`,
      });
    const id = await mcpCallId({
      risk,
      name: call.name,
      arguments: call.arguments,
      gate: { toolsHash: run.toolsHash, scopes: run.user.scopes },
      nonce: call.nonce,
    });
    const proposed = [{ id, name: call.name, arguments: call.arguments }];
    const turnId = (await turnIdentity(proposed)).id;
    this.mcpInFlight.set(call.requestKey, turnId);
    try {
      let reply = await this.postTurn(tenantId, proposed, 0, 0, null, "mcp");
      const first = reply.ok ? reply.value.results[0]?.envelope : undefined;
      if (reply.ok && reply.value.status === "pending" && first?.status !== "awaiting_approval")
        reply = await this.getTurn(tenantId, turnId, waitMs, "mcp");
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
    if (!this.loadFor(tenantId)) return this.missing(tenantId);
    const turnId = this.mcpInFlight.get(requestKey);
    const turn = turnId ? this.turn(turnId) : null;
    if (!turn) return ok(false);
    for (const operationId of openOperations(turn)) await this.close(tenantId, operationId, by);
    return ok(true);
  }

  async getTurn(
    tenantId: string,
    turnId: string,
    waitMs: number,
    format = "native",
  ): Promise<Result<TurnReply, RunError>> {
    if (!this.loadFor(tenantId)) return this.missing(tenantId);
    const turn = this.turn(turnId);
    return turn ? ok(await this.settle(turn, waitMs, 0, format)) : notFound("turn");
  }

  /** The offered tools as plain data, for exporting definitions to the model (plus toolgate_check_status with any write). */
  async toolDefinitions(tenantId: string): Promise<Result<ToolDefinition[], RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return this.missing(tenantId);
    const offered = [...this.offeredTools(run).values()];
    const definitions = offered.map((spec) => ({
      name: spec.name,
      description: spec.description,
      inputJsonSchema: spec.inputJsonSchema,
      bound: Object.keys(spec.bind),
      risk: spec.risk,
      builtIn: false,
    }));
    return ok(offersCheckStatus(offered) ? [...definitions, CHECK_STATUS_DEFINITION] : definitions);
  }

  /**
   * Offered tools whose idempotency key no verification vouches for (for the settings this run
   * snapshotted): the export flags them next to the definitions, which stay provider-valid.
   */
  async idempotencyWarnings(tenantId: string): Promise<Result<IdempotencyWarning[], RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return this.missing(tenantId);
    const statuses = await verificationStatuses(this.env, tenantId, Object.entries(run.tools));
    const enforced = requireVerifiedIdempotency(this.env);
    return ok(
      Object.entries(statuses)
        .filter((entry): entry is [string, "failed" | "unverified"] => entry[1] !== "verified")
        .map(([tool, status]) => ({
          tool,
          code: "idempotency_unverified" as const,
          status,
          enforced,
          detail: unverifiedTraceDetail({ status, enforced }),
        })),
    );
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
  ): Promise<Result<true, Denial>> {
    const run = this.loadFor(tenantId);
    const verdict = mayExecute(run, run ? this.offeredTools(run) : new Map(), tool, Date.now());
    if (!verdict.ok || policyVersion === null || !run) return verdict;
    return (await sha256Hex(canonicalJson(run.tools[tool]))) === policyVersion
      ? verdict
      : err({
          status: "rejected",
          code: "approval_expired",
          message: RUN_TEXT.toolChangedWhileWaiting(tool),
        });
  }

  /**
   * Retention for the run itself (issue 10: "in each object"). Its turns keep every call's frozen
   * arguments, so they go too — but only once the run's token has been expired for the retention
   * period and every one of its operations is gone: an operation still held (outcome unknown,
   * awaiting approval, recorded but not yet pruned) may still ask this run `authorize`. Asked in
   * order, stopping at the first that is still there; then rechecked daily. A turn that arrived
   * meanwhile (a tenant key may still post) defers it. What remains is one row: the id, the tenant
   * and when (every route then answers 410 run_pruned).
   */
  override async alarm(): Promise<void> {
    const run = this.load();
    if (!run) return;
    const nowMs = Date.now();
    const dueAtMs = run.expiresAtMs + retentionMs(this.env);
    if (nowMs < dueAtMs) return void (await this.ctx.storage.setAlarm(dueAtMs));
    const turns = this.turns();
    for (const id of new Set(turns.flatMap(operationIds))) {
      const view = await operationStub(this.env, id)
        .get(run.tenantId, 0)
        .catch(() => null);
      const gone = view !== null && !view.ok && view.error.code !== "invalid_tool";
      if (!gone) return void (await this.ctx.storage.setAlarm(nowMs + RUN_PRUNE_RECHECK_MS));
    }
    const pruned = this.store.transaction(() => {
      if (this.turns().length !== turns.length) return false;
      this.store.ensureTable("run_pruned");
      this.store.run(
        "INSERT OR REPLACE INTO run_pruned (k, run_id, tenant_id, pruned_at_ms) VALUES (1, ?, ?, ?)",
        run.runId,
        run.tenantId,
        nowMs,
      );
      for (const table of ["turns", "turn_groups", "turn_ops", "tool_sources", "usage", "run"])
        if (this.store.exists(table)) this.store.run(`DELETE FROM ${table}`);
      return true;
    });
    if (!pruned) return void (await this.ctx.storage.setAlarm(nowMs + 60_000));
    this.offered = null;
    this.sources.clear();
    this.recorded.clear();
    this.reportedHere.clear();
    this.reportsFull.clear();
  }

  /** Cancels the run: no new call is admitted or retried, and every open call of every turn is closed. */
  async cancel(tenantId: string, by: string): Promise<Result<RunView, RunError>> {
    const run = this.store.transaction(() => {
      const run = this.loadFor(tenantId);
      if (run && run.cancelledAtMs === null)
        this.store.run("UPDATE run SET data = ?", encodeRun({ ...run, cancelledAtMs: Date.now() }));
      return run;
    });
    if (!run) return this.missing(tenantId);
    await this.close(tenantId, null, by);
    return ok(this.view(this.load()!));
  }

  /** Closes the calls waiting on one operation, then cancels it (POST /v1/operations/{id}/cancel). */
  async closeOperation(
    tenantId: string,
    operationId: string,
    by: string,
  ): Promise<Result<true, RunError>> {
    if (!this.loadFor(tenantId)) return this.missing(tenantId);
    await this.close(tenantId, operationId, by);
    return ok(true);
  }

  async traceFor(
    tenantId: string,
  ): Promise<Result<{ run_id: string; events: TraceEvent[] }, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return this.missing(tenantId);
    const events: TraceEvent[] = [
      { type: "run_created", at_ms: run.createdAtMs, run_id: run.runId },
    ];
    if (run.cancelledAtMs !== null)
      events.push({ type: "run_cancelled", at_ms: run.cancelledAtMs });
    const turns = this.turns();
    events.push(...turns.map(turnReceived));
    for (const op of await this.operationTraces(tenantId, turns)) {
      if ("pruned_at_ms" in op)
        events.push({ type: "pruned", at_ms: op.pruned_at_ms, operation_id: op.operation_id });
      else events.push(...op.events.map((event) => ({ ...event, operation_id: op.operation_id })));
    }
    events.sort((a, b) => a.at_ms - b.at_ms);
    return ok({ run_id: run.runId, events });
  }

  /** The run's trace as OTLP/JSON resourceSpans (GET /v1/runs/{id}/trace?format=otlp). */
  async otlpFor(tenantId: string): Promise<Result<OtlpTrace, RunError>> {
    const run = this.loadFor(tenantId);
    if (!run) return this.missing(tenantId);
    const ops = (await this.operationTraces(tenantId, this.turns())).filter(
      (op): op is OperationTrace => "events" in op,
    );
    return ok(otlpTrace(run.runId, ops));
  }

  /** Each operation's stored (redacted, chained) events, or when retention pruned it. */
  private async operationTraces(
    tenantId: string,
    turns: TurnRecord[],
  ): Promise<Array<OperationTrace | { operation_id: string; pruned_at_ms: number }>> {
    await this.reporting;
    const ids = [...new Set(turns.flatMap(operationIds))];
    const traces = await Promise.all(
      ids.map(async (operationId) => ({
        operationId,
        trace: await operationStub(this.env, operationId).traceFor(tenantId),
      })),
    );
    return traces.flatMap(
      ({
        operationId,
        trace,
      }): Array<OperationTrace | { operation_id: string; pruned_at_ms: number }> =>
        trace.ok
          ? [{ operation_id: operationId, events: trace.value }]
          : trace.error.code === "pruned"
            ? [{ operation_id: operationId, pruned_at_ms: trace.error.pruned_at_ms }]
            : [],
    );
  }

  // ── shell ────────────────────────────────────────────────────────────────────────────────────

  /**
   * Submits every open call (a no-op replay for operations that exist; the first dispatch for new
   * ones), then answers from the turn as stored *after* the waits, so a call closed meanwhile says
   * cancelled. The refund is a compare-and-set on `settled_cost`: it applies once, however many
   * settles race (issue 7: three concurrent polls each refunded).
   */
  private async settle(
    record: TurnRecord,
    waitMs: number,
    rowsHere: number,
    format: string,
  ): Promise<TurnReply> {
    let rowsWritten = rowsHere;
    const run = this.load()!;
    const observed = await Promise.all(
      record.calls.map(async (stored): Promise<CallObservation | null> => {
        if (!("submit" in stored) || stored.closed) return null;
        const seen = await this.observe(run, stored.call.id, stored.submit, waitMs);
        rowsWritten += seen.rowsWritten;
        return seen.observation;
      }),
    );
    const current = this.turn(record.id) ?? record;
    const settlement = settleTurn(current, observed);
    // A settled turn's accounting is final: stored (refund or not) unless settleTurn shows a later
    // poll can only count the same (a poll after pruning must never refund what was spent).
    if (settlement.finalize) {
      const before = this.store.rowsWritten;
      this.store.transaction(() => {
        if (
          this.store.run(
            "UPDATE turns SET settled_cost = ? WHERE id = ? AND settled_cost IS NULL",
            settlement.spent,
            record.id,
          ) === 1 &&
          settlement.refund !== 0
        ) {
          this.store.run("UPDATE usage SET cost = cost - ?", settlement.refund);
        }
      });
      rowsWritten += this.store.rowsWritten - before;
    }
    // Not awaited: the answer does not wait for the trace (a round trip and a commit per operation).
    const report = this.report(run.tenantId, current, observed, format);
    // Resolved to nothing: a chain of resolved values would keep every earlier one alive.
    this.reporting = Promise.all([this.reporting, report]).then(() => undefined);
    return {
      turn_id: record.id,
      status: settlement.status,
      results: settlement.results,
      pruned: current.calls.flatMap((stored, index) => {
        const seen = observed[index];
        return "submit" in stored && seen?.kind === "pruned"
          ? [
              {
                call_id: stored.call.id,
                operation_id: stored.submit.operationId,
                pruned_at: seen.prunedAt,
                settled_as: seen.status,
              },
            ]
          : [];
      }),
      rowsWritten,
    };
  }

  /**
   * Tells each operation whose recorded result this response delivers that it was reported (once
   * per turn and format; remembered here so replays cost no RPC). Sent as the answer leaves, not
   * waited for (it cost a round trip and a commit on every new write's answer: 5.5 → 1 ms from
   * recorded to the response leaving the Worker, c=1). Best effort: a missed report leaves
   * "recorded, not reported" in the trace, which is what it then looks like to the caller.
   */
  private async report(
    tenantId: string,
    turn: TurnRecord,
    observed: ReadonlyArray<CallObservation | null>,
    format: string,
  ): Promise<void> {
    const due = reportedOperations(turn, observed).filter(
      (id) => !this.reportedHere.has(`${id} ${turn.id} ${format}`) && !this.reportsFull.has(id),
    );
    await Promise.all(
      due.map(async (id) => {
        const done = await operationStub(this.env, id)
          .reported(tenantId, turn.id, format)
          .catch(() => null);
        if (done?.ok) {
          if (this.reportedHere.size >= 4096) this.reportedHere.clear();
          this.reportedHere.add(`${id} ${turn.id} ${format}`);
          if (done.value.full) {
            if (this.reportsFull.size >= 4096) this.reportsFull.clear();
            this.reportsFull.add(id);
          }
        }
      }),
    );
  }

  private async observe(
    run: RunState,
    callId: string,
    submit: Submission,
    waitMs: number,
  ): Promise<{ observation: CallObservation; rowsWritten: number }> {
    const known = this.recordedReply(submit);
    if (known) return { observation: { kind: "reply", ...known }, rowsWritten: 0 };
    const { operationId, idempotencyKey, input, source } = submit;
    try {
      const reply = await operationStub(this.env, operationId).submit({
        tenantId: run.tenantId,
        runId: run.runId,
        callId,
        source,
        input,
        operationId,
        idempotencyKey,
        userId: run.user.id,
        waitMs,
      });
      if (!reply.ok)
        return {
          observation:
            reply.error.code === "pruned"
              ? {
                  kind: "pruned",
                  prunedAt: new Date(reply.error.pruned_at_ms).toISOString(),
                  status: reply.error.status,
                }
              : { kind: reply.error.code === "invalid_tool" ? "invalid_tool" : "unavailable" },
          rowsWritten: 0,
        };
      if (reply.value.terminal) this.recorded.set(operationId, reply.value);
      return {
        observation: { kind: "reply", ...reply.value },
        rowsWritten: reply.value.rowsWritten,
      };
    } catch (error) {
      console.error("operation unreachable", operationId, error);
      return { observation: { kind: "unavailable" }, rowsWritten: 0 };
    }
  }

  /** The remembered recorded outcome of this very submission, while retention still keeps it. */
  private recordedReply(submit: Submission): OperationReply | null {
    const known = this.recorded.get(submit.operationId);
    // A remembered outcome is good until retention prunes the operation (then it must say so).
    const fresh =
      known?.recordedAtMs != null && Date.now() < known.recordedAtMs + retentionMs(this.env);
    return known && fresh && known.inputHash === submit.input.hash ? known : null;
  }

  /** Asks each operation how it stands (read-only): its input hash, or null (none, or unreachable). */
  private async peekInto(
    tenantId: string,
    ids: readonly string[],
    into: Map<string, string | null>,
  ): Promise<void> {
    const seen = await Promise.all(
      ids.map(async (id) => {
        const peek = await operationStub(this.env, id)
          .peek(tenantId)
          .catch(() => null);
        const hash = peek?.ok
          ? peek.value.input_hash
          : peek?.error.code === "pruned"
            ? peek.error.input_hash
            : null;
        return [id, hash] as const;
      }),
    );
    for (const [id, hash] of seen) into.set(id, hash);
  }

  /** Operations of `calls` known recorded with the same input: their calls reserve no cost (planTurn). */
  private knownRecorded(calls: readonly TurnCall[]): Set<string> {
    return new Set(
      calls.flatMap((stored) =>
        "submit" in stored && this.recordedReply(stored.submit) ? [stored.submit.operationId] : [],
      ),
    );
  }

  /**
   * Asks every open operation (or only `only`) for its state, then closes the calls planClose
   * picks in one synchronous block over every turn row (issue 7: per-operation read-await-write
   * lost updates), then cancels the operations this run created (never another run's). A result
   * arriving later is recorded on the operation, flagged late, never on the closed turn.
   */
  private async close(tenantId: string, only: string | null, by: string): Promise<void> {
    const run = this.load()!;
    const open = new Set(
      this.turns()
        .flatMap(openOperations)
        .filter((id) => (only === null || id === only) && !this.recorded.get(id)),
    );
    if (only !== null) open.add(only);
    // An operation that cannot be asked (or does not exist yet) is absent: its call is closed.
    const states = await Promise.all(
      [...open].map(async (id): Promise<[string, Standing]> => {
        const view = await operationStub(this.env, id)
          .get(tenantId, 0)
          .catch(() => null);
        if (view?.ok)
          return [
            id,
            view.value.phase === "recorded"
              ? { kind: "recorded" }
              : { kind: "open", runId: view.value.run_id, inputHash: view.value.input_hash },
          ];
        // Pruned: settled long ago, nothing to close or cancel.
        return [id, view?.error.code === "pruned" ? { kind: "recorded" } : { kind: "absent" }];
      }),
    );
    const plan = planClose(run.runId, this.turns(), new Map(states), only);
    const unsettled = plan.close;
    this.store.transaction(() => {
      for (const turn of this.turns()) {
        const closed = closeCalls(turn, unsettled);
        if (closed)
          this.store.run(
            "UPDATE turns SET calls = ? WHERE id = ?",
            encodeTurnCalls(closed.calls, this.hashOf),
            turn.id,
          );
      }
    });
    // Best effort: a missed cancel leaves the call closed ("may still complete"); in a cancelled run the
    // operation is still refused at its next retry (authorize). The operation checks the run too.
    await Promise.allSettled(
      [...plan.cancel].map((id) => operationStub(this.env, id).cancel(tenantId, by, run.runId)),
    );
  }

  /**
   * The current envelope of an operation this run created or joined with the identical input
   * (mayReadOperation); anything else (another run's, reached through a conflicting call, or
   * another tenant's) is "not found". `allowed`: within the run's allowance of checks; else
   * refused, and nothing is looked up.
   */
  private async checkStatus(
    run: RunState,
    call: ProposedCall,
    allowed: boolean,
  ): Promise<Envelope> {
    const checkId = await checkStatusId(run.tenantId, run.runId, call.id);
    if (!allowed) return checkStatusSpent(checkId, RUN_LIMITS.maxStatusChecks);
    const target = checkStatusTarget(call.arguments);
    // The index answers "not held here" without a scan; only a held operation reads this run's
    // calls of it, at most RUN_LIMITS.maxStatusChecks times per run.
    const hashes =
      target.ok && this.holdsOperation(target.value)
        ? this.turns().flatMap((turn) => submittedHashes(turn, target.value))
        : [];
    if (!target.ok || hashes.length === 0) return checkStatusEnvelope(checkId, target, null);
    const view = await operationStub(this.env, target.value)
      .get(run.tenantId, 0)
      .catch(() => null);
    const readable = view?.ok && mayReadOperation(run.runId, view.value, hashes);
    return checkStatusEnvelope(checkId, target, readable ? view.value.result : null);
  }

  /** Which of `names` the tenant knows; asked only for names the run does not offer (an unreachable tenant keeps tool_not_allowed). */
  private async registered(tenantId: string, names: string[]): Promise<Set<string>> {
    return new Set(
      names.length === 0
        ? []
        : await tenantStub(this.env, tenantId)
            .knownTools(names)
            .catch(() => names),
    );
  }

  /** Compiled offered tools, keyed by the content hash of their sources (never by names). */
  private offeredTools(run: RunState): Map<string, ToolSpec> {
    if (this.offered?.toolsHash === run.toolsHash) return this.offered.tools;
    const tools = new Map<string, ToolSpec>();
    for (const [name, source] of Object.entries(run.tools)) {
      const spec = resolveTool(source, hostPolicy(this.env));
      if (spec.ok) tools.set(name, spec.value);
    }
    this.offered = { toolsHash: run.toolsHash, tools };
    return tools;
  }

  private load(): RunState | null {
    if (!this.store.exists("run")) return null;
    const row = this.store.one<{ data: string }>("SELECT data FROM run");
    return row ? decodeRun(row.data) : null;
  }

  /** Why this tenant finds no run here: retention removed it (410), or there never was one. */
  private missing(tenantId: string): Result<never, RunError> {
    const pruned = this.store.exists("run_pruned")
      ? this.store.one<{ run_id: string; tenant_id: string; pruned_at_ms: number }>(
          "SELECT run_id, tenant_id, pruned_at_ms FROM run_pruned WHERE k = 1",
        )
      : null;
    return pruned && pruned.tenant_id === tenantId
      ? err({ code: "run_pruned", run_id: pruned.run_id, pruned_at_ms: pruned.pruned_at_ms })
      : notFound("run");
  }

  private loadFor(tenantId: string): RunState | null {
    const run = this.load();
    return run && run.tenantId === tenantId ? run : null;
  }

  /** Kept as one row, updated in the same transaction as each turn (O(1), not a scan). */
  private usage() {
    return decodeUsage(this.store.one("SELECT turns, calls, cost FROM usage"));
  }

  private group(key: string): TurnGroup | null {
    const row = this.store.one(
      "SELECT key, turn_stop, usage_hash, calls FROM turn_groups WHERE key = ?",
      key,
    );
    return row ? decodeTurnGroup(row) : null;
  }

  private turn(turnId: string): TurnRecord | null {
    const row = this.store.one(`SELECT ${TURN_COLUMNS} FROM turns WHERE id = ?`, turnId);
    return row ? decodeTurn(row, this.sourceOf) : null;
  }

  private turns(): TurnRecord[] {
    return this.store
      .all(`SELECT ${TURN_COLUMNS} FROM turns ORDER BY seq`)
      .map((row) => decodeTurn(row, this.sourceOf));
  }

  // ── what the run stores (domain/run-limits.ts) ───────────────────────────────────────────────

  /** The usage row's storage counts (zero for a run created before them, until its next turn). */
  private storedCounts(): StoredCounts {
    if (!this.store.exists("usage") || !this.store.hasColumn("usage", "checks")) return NO_STORED;
    return decodeStoredCounts(
      this.store.one("SELECT stored_turns, stored_bytes, stopped_turns, checks FROM usage"),
    );
  }

  /**
   * The storage counts, in a turn's transaction: a run created before them gets their columns,
   * its turns counted once. Their bytes are not (those rows held every call's tool source, and
   * counting them would refuse runs the older layout made large); its checks start from zero.
   */
  private migrateStored(): StoredCounts {
    const [turns, ...others] = USAGE_STORAGE_COLUMNS;
    if (this.store.ensureColumn("usage", turns!))
      this.store.run("UPDATE usage SET stored_turns = (SELECT COUNT(*) FROM turns)");
    for (const column of others) this.store.ensureColumn("usage", column);
    this.store.ensureTable("tool_sources");
    return this.storedCounts();
  }

  /** Computes (once per source object) the hash each source is stored under. */
  private async hashSources(sources: readonly ToolSource[]): Promise<void> {
    for (const source of sources)
      if (!sourceHashes.has(source))
        sourceHashes.set(source, await sha256Hex(canonicalJson(source)));
  }

  private readonly hashOf = (source: ToolSource): string | undefined => sourceHashes.get(source);

  /**
   * Stores each source hashed by hashSources once per run, in the caller's transaction (a source
   * without a hash is kept in its call rows instead: encodeTurnCalls).
   */
  private storeSources(sources: readonly ToolSource[]): void {
    this.store.ensureTable("tool_sources");
    const done = new Set<string>();
    for (const source of sources) {
      const hash = this.hashOf(source);
      if (hash === undefined || done.has(hash)) continue;
      done.add(hash);
      if (this.store.one("SELECT 1 AS x FROM tool_sources WHERE hash = ?", hash)) continue;
      this.store.run(
        "INSERT INTO tool_sources (hash, source) VALUES (?, ?)",
        hash,
        JSON.stringify(source),
      );
    }
  }

  private readonly sourceOf = (hash: string): ToolSource | null => {
    const cached = this.sources.get(hash);
    if (cached) return cached;
    const row = this.store.exists("tool_sources")
      ? this.store.one<{ source: string }>("SELECT source FROM tool_sources WHERE hash = ?", hash)
      : null;
    if (!row) return null;
    const source = decodeToolSource(row.source);
    this.sources.set(hash, source);
    sourceHashes.set(source, hash);
    return source;
  };

  /**
   * Whether a call of this run's turns names the operation: one read of `turn_ops`, which the
   * first check builds from the stored turns (once; every later turn adds its own operations).
   */
  private holdsOperation(operationId: string): boolean {
    if (!this.store.exists("turn_ops"))
      this.store.transaction(() => {
        this.store.ensureTable("turn_ops");
        for (const turn of this.turns()) this.indexTurn(turn);
      });
    return (
      this.store.one("SELECT 1 AS x FROM turn_ops WHERE operation_id = ?", operationId) !== null
    );
  }

  /** `turn_ops` rows for the turn's operations (the first turn naming an operation keeps it). */
  private indexTurn(turn: TurnRecord): void {
    for (const id of new Set(operationIds(turn)))
      this.store.run(
        "INSERT OR IGNORE INTO turn_ops (operation_id, turn_id) VALUES (?, ?)",
        id,
        turn.id,
      );
  }

  private view(run: RunState): RunView {
    const usage = this.usage();
    return {
      run_id: run.runId,
      status: run.cancelledAtMs === null ? "active" : "cancelled",
      user: run.user,
      tools: Object.keys(run.tools),
      context: redactContext(run.context, [...this.offeredTools(run).values()]),
      budgets: run.budgets,
      usage: { turns: usage.turns, tool_calls: usage.toolCalls, cost: usage.cost },
      created_at: new Date(run.createdAtMs).toISOString(),
      expires_at: new Date(run.expiresAtMs).toISOString(),
    };
  }
}

/** The gate's and the budgets' decisions (calls refused before any operation): one JSON log line each. */
function logRefusals(runId: string, record: TurnRecord): void {
  for (const stored of record.calls)
    if ("fixed" in stored && stored.fixed.status !== "succeeded")
      console.log(
        JSON.stringify({
          level: "info",
          event: "toolgate.refused",
          at: record.createdAtMs,
          run_id: runId,
          call_id: stored.call.id,
          operation_id: stored.fixed.operation_id,
          tool: stored.call.name,
          turn_id: record.id,
          status: stored.fixed.status,
          code: stored.fixed.code,
        }),
      );
}

/** The tool sources of a turn's submitted calls. */
const dispatchedSources = (record: TurnRecord): ToolSource[] =>
  record.calls.flatMap((stored) => ("submit" in stored ? [stored.submit.source] : []));

const notFound = (what: string): Result<never, RunError> =>
  err({ code: "not_found", detail: `no such ${what}` });
