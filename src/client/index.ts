// toolgate/client: a typed client with no dependency beyond fetch. `Toolgate` is the backend's
// (tenant API key): create runs, decide approvals, read operations and traces, undo (compensate an
// operation, cancel a run with rollback). `ToolgateRun` is the agent's (run token):
// `turn(format, modelResponse)` posts one model response and hands back results ready for that
// SDK's next request, waiting through 202s with bounded long-polls, re-posting after a network
// error (turns are idempotent), skipping responses without tool calls, and returning calls that
// still run or wait for a person as `waiting`, never as finished results.
import { callIds, callStates } from "./calls.ts";
import { request, type Transport } from "./http.ts";
import type {
  CallState,
  CancelledRun,
  Compensation,
  CreateRunRequest,
  Format,
  OperationView,
  ResultsOf,
  RunCreated,
  TraceEvent,
  TurnOutcome,
} from "./types.ts";

export { callIds } from "./calls.ts";
export { ToolgateProblem, ToolgateUnreachable, UNREACHABLE_TEXT } from "./http.ts";
export type * from "./types.ts";

type Options = { baseUrl: string; fetch?: typeof fetch; attempts?: number };
type TurnBody = { turn_id: string; status: "settled" | "pending"; results: unknown };

/** How long `turn()` waits. Server-side waits are capped at 30 s per request; the client loops. */
export type WaitOptions = {
  /** Total time to wait for calls that are running (default 60 s); then `waiting` is returned. */
  maxWaitMs?: number;
  /** Keep waiting while a call awaits a person's approval (default false: return `waiting` at once). */
  waitForApproval?: boolean;
};

export class Toolgate {
  private readonly transport: Transport;
  private readonly options: Options;
  constructor(options: Options & { apiKey: string }) {
    this.options = options;
    this.transport = { ...options, token: options.apiKey };
  }

  /**
   * Opens a run for one end user; hand `run_token` (or `this.run(created)`) to the agent. Every
   * send of one call carries the same `request_id` (a new UUID unless given), so a resend after a
   * lost response gets the same run back, never a second one.
   */
  async createRun(run: CreateRunRequest): Promise<RunCreated & { client: ToolgateRun }> {
    const sent = { ...run, request_id: run.request_id ?? crypto.randomUUID() };
    const { body } = await request<RunCreated>(this.transport, "POST", "/v1/runs", sent);
    return { ...body, client: this.run(body) };
  }

  run(run: { run_id: string; run_token: string }): ToolgateRun {
    const { baseUrl, fetch, attempts } = this.options;
    return new ToolgateRun({
      baseUrl,
      fetch,
      attempts,
      runId: run.run_id,
      runToken: run.run_token,
    });
  }

  async operation(operationId: string, waitMs = 0): Promise<OperationView> {
    const wait = Math.ceil(waitMs / 1000);
    return (
      await request<OperationView>(
        this.transport,
        "GET",
        `/v1/operations/${operationId}?wait=${wait}`,
        undefined,
        { timeoutMs: waitMs + 30_000 },
      )
    ).body;
  }

  /**
   * Records a person's decision in toolgate, bound to the frozen input the person was shown
   * (`input_hash`, `policy_version`, `approval_hash`: taken from the operation's pending approval
   * when not given — an x402 payment's approval has its own `approval_hash`, and a decision naming
   * another is refused). A call already decided returns the recorded decision; nothing runs twice.
   */
  async decide(
    operationId: string,
    verdict: "approve" | "reject",
    decision: {
      reason?: string;
      /** Decide on a named person's behalf: needs a key holding approvals:delegate. */
      approver?: { id: string };
      input_hash?: string;
      policy_version?: string;
      /** The approval the person saw (the inbox's `approval_hash`); needed for a payment's. */
      approval_hash?: string;
    } = {},
  ): Promise<OperationView> {
    let bound = decision;
    if (!decision.input_hash) {
      const current = await this.operation(operationId);
      bound = {
        ...decision,
        input_hash: current.approval?.input_hash ?? current.input_hash,
        ...(current.approval
          ? {
              policy_version: current.approval.policy_version,
              approval_hash: current.approval.approval_hash,
            }
          : {}),
      };
    }
    if (verdict === "reject" && !bound.reason) bound = { ...bound, reason: "rejected" };
    return (
      await request<OperationView>(
        this.transport,
        "POST",
        `/v1/operations/${operationId}/${verdict}`,
        bound,
      )
    ).body;
  }

  approve(operationId: string, decision: Parameters<Toolgate["decide"]>[2] = {}) {
    return this.decide(operationId, "approve", decision);
  }

  reject(operationId: string, decision: Parameters<Toolgate["decide"]>[2] = {}) {
    return this.decide(operationId, "reject", decision);
  }

  /**
   * Undo: runs the compensation the operation's tool declares (e.g. a refund for a charge), at most
   * once however often it is asked; by default a person approves it first (`approve` its
   * `operation_id`). Needs operations:compensate. Safe to resend: asking again returns the same one.
   */
  async compensate(operationId: string, asked: { reason: string }): Promise<Compensation> {
    const { status, body } = await request<OperationView>(
      this.transport,
      "POST",
      `/v1/operations/${operationId}/compensate`,
      { reason: asked.reason },
    );
    return { created: status === 201, operation: body };
  }

  /**
   * Cancels the run: no further calls; running ones are cancelled where possible. `rollback: true`
   * (needs operations:compensate) also compensates its applied writes, newest first, one at a time;
   * `rollback` in the answer (and in later reads of the run) reports each step.
   */
  async cancelRun(runId: string, options: { rollback?: boolean } = {}): Promise<CancelledRun> {
    const body = options.rollback ? { rollback: true } : {};
    return (await request<CancelledRun>(this.transport, "POST", `/v1/runs/${runId}/cancel`, body))
      .body;
  }

  async trace(runId: string): Promise<{ run_id: string; events: TraceEvent[] }> {
    return (
      await request<{ run_id: string; events: TraceEvent[] }>(
        this.transport,
        "GET",
        `/v1/runs/${runId}/trace`,
      )
    ).body;
  }
}

export class ToolgateRun {
  readonly runId: string;
  private readonly transport: Transport;
  constructor(options: Options & { runId: string; runToken: string }) {
    this.runId = options.runId;
    this.transport = { ...options, token: options.runToken };
  }

  /** The run's offered tools as `format` lists them (bound arguments removed, strict-mode schemas). */
  async tools(format: Format | "mcp" = "native"): Promise<unknown[]> {
    const path = `/v1/runs/${this.runId}/tools?format=${format}`;
    return (await request<{ tools: unknown[] }>(this.transport, "GET", path)).body.tools;
  }

  /**
   * Posts one model response (the provider's own object) as one turn. A response without tool
   * calls is not posted (`no_tool_calls`). Calls still running are long-polled up to `maxWaitMs`.
   */
  async turn<F extends Format>(
    format: F,
    response: unknown,
    options: WaitOptions = {},
  ): Promise<TurnOutcome<F>> {
    const ids = callIds(format, response);
    if (ids.length === 0) return { status: "no_tool_calls" };
    const deadline = Date.now() + (options.maxWaitMs ?? 60_000);
    const posted = await request<TurnBody>(
      this.transport,
      "POST",
      `/v1/runs/${this.runId}/turns?format=${format}`,
      response,
      { preferWaitS: Math.min(FIRST_WAIT_S, waitSeconds(deadline)) },
    );
    return this.follow(format, posted.body, ids, deadline, options);
  }

  /** The turn as it stands now (or after waiting up to `maxWaitMs` for running calls). */
  async poll<F extends Format>(
    format: F,
    turnId: string,
    callIdsInOrder: readonly string[] = [],
    options: WaitOptions = {},
  ): Promise<TurnOutcome<F>> {
    const deadline = Date.now() + (options.maxWaitMs ?? 0);
    return this.follow(
      format,
      // A short first wait: the server's wait would hold out for a person's decision too.
      await this.get(format, turnId, deadline, options.waitForApproval ? 30 : FIRST_WAIT_S),
      callIdsInOrder,
      deadline,
      options,
    );
  }

  private async follow<F extends Format>(
    format: F,
    first: TurnBody,
    ids: readonly string[],
    deadline: number,
    options: WaitOptions,
  ): Promise<TurnOutcome<F>> {
    let turn = first;
    for (;;) {
      const calls = callStates(format, turn.results, ids);
      if (turn.status === "settled")
        return {
          status: "settled",
          turn_id: turn.turn_id,
          results: turn.results as ResultsOf<F>,
          calls,
        };
      const pending = calls.filter(unsettled);
      const awaiting = pending.filter((c) => c.envelope.status === "awaiting_approval");
      const onlyApprovals = awaiting.length === pending.length;
      if (Date.now() >= deadline - 500 || (onlyApprovals && !options.waitForApproval))
        return {
          status: "waiting",
          turn_id: turn.turn_id,
          calls,
          pending: pending.filter((c) => c.envelope.status !== "awaiting_approval"),
          awaiting_approval: awaiting,
        };
      // The server's wait holds out for every call, a person's decision included, and any running
      // call may turn out to need one: unless told to wait for people, poll in short waits so a
      // call that starts waiting for a person is handed back promptly.
      const cap = options.waitForApproval ? 30 : awaiting.length > 0 ? FIRST_WAIT_S : SHORT_WAIT_S;
      turn = await this.get(format, turn.turn_id, deadline, cap);
    }
  }

  private async get(
    format: Format,
    turnId: string,
    deadline: number,
    capS = 30,
  ): Promise<TurnBody> {
    const wait = Math.min(capS, waitSeconds(deadline));
    const path = `/v1/runs/${this.runId}/turns/${turnId}?format=${format}&wait=${wait}`;
    return (
      await request<TurnBody>(this.transport, "GET", path, undefined, {
        timeoutMs: wait * 1000 + 30_000,
      })
    ).body;
  }
}

/** A call is settled unless it still runs, is being reconciled, or waits for a person. */
const unsettled = (call: CallState) =>
  call.envelope.status === "pending" ||
  call.envelope.status === "awaiting_approval" ||
  call.envelope.status === "outcome_unknown";

/** The first POST's server-side wait: most tools answer within it; slower ones are long-polled. */
const FIRST_WAIT_S = 2;
/** Later waits while no person is being waited for. */
const SHORT_WAIT_S = 5;

/** Seconds left until `deadline`, as a server-side wait (0–30). */
const waitSeconds = (deadline: number) =>
  Math.max(0, Math.min(30, Math.floor((deadline - Date.now()) / 1000)));
