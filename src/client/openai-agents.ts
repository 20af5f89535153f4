// toolgate tools for the OpenAI Agents SDK (@openai/agents, optional peer dependency):
// `await toolgateTools(run)` → FunctionTools for `new Agent({ tools })`. The SDK executes each call
// on its own, so every call is posted as a native turn carrying a turn key shared by the calls of
// one model response — (this RunContext, its model-request count) — and that response's token
// usage: toolgate counts one model turn per key and charges the usage once (see
// src/domain/turn/admit.ts, TurnGroup). `needsApproval` asks toolgate (its approval rules, and a call
// already settled never asks again); `decide()` records the person's verdict in toolgate, bound to
// the frozen input, and in the SDK's RunState. Failures reach the model as toolgate's envelope
// through `errorFunction`, never the SDK's "Please try again".
import { tool, type FunctionTool, type RunContext, type RunToolApprovalItem } from "@openai/agents";
import { ToolgateUnreachable, UNREACHABLE_TEXT } from "./http.ts";
import type { Toolgate, ToolgateRun } from "./index.ts";
import type { Envelope, TurnOutcome } from "./types.ts";

type ExportedTool = {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  strict?: boolean;
};
type Options = { maxWaitMs?: number; model?: string };
type Posted = Promise<TurnOutcome<"native">>;

/** A call that ended without succeeding: its envelope is what the model is told. */
export class ToolgateCallFailed extends Error {
  readonly envelope: Envelope;
  constructor(envelope: Envelope) {
    super(JSON.stringify(envelope));
    this.name = "ToolgateCallFailed";
    this.envelope = envelope;
  }
}

const contexts = new WeakMap<object, string>();
const contextKey = (context: RunContext) => {
  let key = contexts.get(context);
  if (!key) contexts.set(context, (key = crypto.randomUUID()));
  return key;
};

export class ToolgateAgentTools {
  private readonly posted = new Map<string, Posted>();
  readonly run: ToolgateRun;
  readonly tools: FunctionTool<any, any, any>[];
  private readonly options: Options;

  constructor(run: ToolgateRun, tools: FunctionTool<any, any, any>[], options: Options) {
    this.run = run;
    this.tools = tools;
    this.options = options;
  }

  /** Posts one call (idempotent: a re-post of the same call id and arguments is the same turn). */
  post(context: RunContext | null, callId: string, name: string, args: unknown): Posted {
    const known = this.posted.get(callId);
    if (known) return known;
    const body: Record<string, unknown> = { calls: [{ id: callId, name, arguments: args }] };
    if (context) {
      const usage = context.usage;
      body.turn_key = `agents:${contextKey(context)}:${usage.requests}`;
      // The last request's usage is this model response's (the SDK adds it before running tools).
      const entries = usage.requestUsageEntries ?? [];
      const last = entries.length === usage.requests ? entries.at(-1) : undefined;
      if (last) {
        body.usage = { input_tokens: last.inputTokens, output_tokens: last.outputTokens };
        if (this.options.model) body.model = this.options.model;
      }
    }
    const outcome = this.run.turn("native", body, {
      ...(this.options.maxWaitMs === undefined ? {} : { maxWaitMs: this.options.maxWaitMs }),
    });
    this.posted.set(callId, outcome);
    outcome.catch(() => this.posted.delete(callId));
    return outcome;
  }

  /** The call's envelope, polled until it settles or only a person's decision is missing. */
  async envelope(context: RunContext | null, callId: string, name: string, args: unknown) {
    let outcome = await this.post(context, callId, name, args);
    const find = (o: TurnOutcome<"native">) =>
      o.status === "no_tool_calls" ? null : o.calls.find((c) => c.call_id === callId)!.envelope;
    let current = find(outcome);
    if (outcome.status === "waiting" && current && current.status !== "awaiting_approval") {
      outcome = await this.run.poll("native", outcome.turn_id, [callId], {
        maxWaitMs: this.options.maxWaitMs ?? 60_000,
      });
      current = find(outcome);
    }
    this.posted.delete(callId); // the next ask reads toolgate again (a decision may have landed)
    return current!;
  }

  /**
   * Records a person's decision on an interruption in toolgate (bound to the frozen input) and in
   * the SDK's RunState, so `runner.run(agent, state)` resumes. Needs the backend's `Toolgate`.
   */
  async decide(
    toolgate: Toolgate,
    state: { approve(item: RunToolApprovalItem): void; reject(item: RunToolApprovalItem): void },
    item: RunToolApprovalItem,
    approved: boolean,
    reason?: string,
  ): Promise<void> {
    const raw = item.rawItem as { callId: string; name: string; arguments: string };
    const envelope = await this.envelope(null, raw.callId, raw.name, raw.arguments);
    const decision = reason ? { reason } : {};
    if (envelope.status === "awaiting_approval")
      await (approved
        ? toolgate.approve(envelope.operation_id, decision)
        : toolgate.reject(envelope.operation_id, decision));
    if (approved) state.approve(item);
    else state.reject(item);
  }
}

/** The run's offered tools as @openai/agents FunctionTools, driven by toolgate. */
export async function toolgateTools(
  run: ToolgateRun,
  options: Options = {},
): Promise<ToolgateAgentTools> {
  const exported = (await run.tools("openai-responses")) as Array<{
    name: string;
    description: string;
    parameters: ExportedTool["input_schema"];
    strict: boolean;
  }>;
  const holder: { adapter: ToolgateAgentTools | null } = { adapter: null };
  const adapter = () => holder.adapter!;
  const tools = exported.map((definition) =>
    tool({
      name: definition.name,
      description: definition.description,
      parameters: definition.parameters as never,
      strict: definition.strict as true,
      needsApproval: async (context: RunContext, input: unknown, callId?: string) => {
        if (!callId) return true; // cannot ask toolgate without the call: ask the person
        try {
          const envelope = await adapter().envelope(context, callId, definition.name, input);
          return envelope.status === "awaiting_approval";
        } catch {
          return false; // execute() then reports toolgate's state (or that it is unreachable)
        }
      },
      execute: async (
        input: unknown,
        context?: RunContext,
        details?: { toolCall?: { callId: string; arguments: string } },
      ) => {
        const callId = details?.toolCall?.callId;
        if (!callId) throw new Error("toolgate needs the model's call id");
        const envelope = await adapter().envelope(
          context ?? null,
          callId,
          definition.name,
          details?.toolCall?.arguments ?? input,
        );
        if (waiting(envelope) || envelope.status === "succeeded") return JSON.stringify(envelope);
        throw new ToolgateCallFailed(envelope);
      },
      errorFunction: (_context: unknown, error: unknown) =>
        error instanceof ToolgateCallFailed
          ? JSON.stringify(error.envelope)
          : error instanceof ToolgateUnreachable
            ? UNREACHABLE_TEXT
            : `toolgate refused this call: ${error instanceof Error ? error.message : String(error)}. Do not retry; tell the user.`,
    } as never),
  ) as FunctionTool<any, any, any>[];
  holder.adapter = new ToolgateAgentTools(run, tools, options);
  return holder.adapter;
}

/** Waiting is not failing: a call still running or waiting for a person is not an error. */
const waiting = (envelope: Envelope) =>
  envelope.status === "pending" || envelope.status === "awaiting_approval";
