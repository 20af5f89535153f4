// toolgate tools for the Vercel AI SDK (`ai` v7, optional peer dependency):
// `const tg = await toolgateTools(run)` → `generateText({ model, ...tg.options, prompt })`.
// `onLanguageModelCallEnd` posts each model response's toolgate tool calls as ONE native turn
// (AI SDK tool-call parts plus the response's usage and model id: one model turn, usage in
// max_cost); each tool's `execute` then awaits its call's result from that turn. On a resumed
// conversation (after a tool approval) the turn is rebuilt from the assistant message in
// `messages`, so the re-post is the same turn. `toolApproval` follows toolgate: a call toolgate
// holds for a person is 'user-approval', one toolgate rejected is 'denied', a settled one never
// asks. `decide()` records the person's verdict in toolgate and returns the response part to
// append. Failures are thrown with toolgate's envelope as the text the model reads.
import {
  jsonSchema,
  tool,
  type LanguageModelCallEndEvent,
  type ModelMessage,
  type Tool,
  type ToolApprovalStatus,
} from "ai";
import { ToolgateUnreachable, UNREACHABLE_TEXT } from "./http.ts";
import type { Toolgate, ToolgateRun } from "./index.ts";
import type { Envelope, TurnOutcome } from "./types.ts";

type Options = { maxWaitMs?: number };
type Part = { type: "tool-call"; toolCallId: string; toolName: string; input: unknown };
type Posted = Promise<TurnOutcome<"native">>;

/** Thrown from execute for a call that ended without succeeding: the message is the envelope. */
export class ToolgateCallFailed extends Error {
  readonly envelope: Envelope;
  constructor(envelope: Envelope) {
    super(JSON.stringify(envelope));
    this.name = "ToolgateCallFailed";
    this.envelope = envelope;
  }
}

export class ToolgateAiSdk {
  private readonly posted = new Map<string, Posted>();
  private readonly operations = new Map<string, string>();
  /** Spread into generateText/streamText: tools, toolApproval, onLanguageModelCallEnd. */
  readonly options: {
    tools: Record<string, Tool>;
    toolApproval: (options: {
      toolCall: { toolCallId: string; toolName: string; input: unknown };
      messages: ModelMessage[];
    }) => Promise<ToolApprovalStatus>;
    onLanguageModelCallEnd: (event: LanguageModelCallEndEvent) => Promise<void>;
  };

  readonly run: ToolgateRun;
  private readonly settings: Options;

  constructor(
    run: ToolgateRun,
    definitions: Array<{ name: string; description: string; input_schema: object }>,
    settings: Options,
  ) {
    this.run = run;
    this.settings = settings;
    const names = new Set(definitions.map((d) => d.name));
    const tools: Record<string, Tool> = {};
    for (const definition of definitions)
      tools[definition.name] = tool({
        description: definition.description,
        inputSchema: jsonSchema(definition.input_schema as never),
        execute: async (input: unknown, { toolCallId, messages }) => {
          let envelope: Envelope;
          try {
            envelope = await this.envelope(toolCallId, definition.name, input, messages, true);
          } catch (error) {
            throw error instanceof ToolgateUnreachable ? new Error(UNREACHABLE_TEXT) : error;
          }
          if (
            envelope.status === "succeeded" ||
            envelope.status === "pending" ||
            envelope.status === "awaiting_approval"
          )
            return envelope; // waiting is not failing
          throw new ToolgateCallFailed(envelope);
        },
      }) as Tool;
    this.options = {
      tools,
      toolApproval: async ({ toolCall, messages }) => {
        if (!names.has(toolCall.toolName)) return undefined;
        try {
          const envelope = await this.envelope(
            toolCall.toolCallId,
            toolCall.toolName,
            toolCall.input,
            messages,
            false,
          );
          if (envelope.status === "awaiting_approval")
            return {
              type: "user-approval",
              reason: `${envelope.message} (toolgate operation ${envelope.operation_id})`,
            };
          if (envelope.status === "rejected" && envelope.code === "approval_rejected")
            return { type: "denied", reason: envelope.message };
          return "not-applicable";
        } catch {
          return "not-applicable"; // execute() reports toolgate's state, or that it is unreachable
        }
      },
      onLanguageModelCallEnd: async (event) => {
        const parts = toolParts(event.content, names);
        if (parts.length === 0) return;
        const usage = {
          inputTokens: event.usage.inputTokens,
          outputTokens: event.usage.outputTokens,
        };
        this.postParts(parts, { usage, modelId: event.modelId });
      },
    };
  }

  /** One turn per model response; every call of it waits on the same post. */
  private postParts(parts: Part[], meta: Record<string, unknown> = {}): Posted {
    const outcome = this.run.turn("native", { content: parts, ...meta }, this.wait());
    for (const part of parts) this.posted.set(part.toolCallId, outcome);
    outcome.catch(() => {
      for (const part of parts) this.posted.delete(part.toolCallId);
    });
    return outcome;
  }

  private wait() {
    return this.settings.maxWaitMs === undefined ? {} : { maxWaitMs: this.settings.maxWaitMs };
  }

  private async envelope(
    toolCallId: string,
    toolName: string,
    input: unknown,
    messages: ModelMessage[],
    follow: boolean,
  ): Promise<Envelope> {
    const posted =
      this.posted.get(toolCallId) ??
      this.postParts(
        fromHistory(messages, toolCallId) ?? [{ type: "tool-call", toolCallId, toolName, input }],
      );
    let outcome = await posted;
    if (outcome.status === "no_tool_calls") throw new Error("toolgate saw no tool call");
    let envelope = outcome.calls.find((c) => c.call_id === toolCallId)!.envelope;
    // Executing: read the turn again (a person may have decided since), waiting for running calls.
    if (follow && outcome.status === "waiting" && !final(envelope)) {
      const ids = outcome.calls.map((c) => c.call_id);
      outcome = await this.run.poll("native", outcome.turn_id, ids, {
        maxWaitMs: this.settings.maxWaitMs ?? 60_000,
      });
      if (outcome.status !== "no_tool_calls")
        envelope = outcome.calls.find((c) => c.call_id === toolCallId)!.envelope;
    }
    this.operations.set(toolCallId, envelope.operation_id);
    // toolApproval runs before execute: the post is kept for it; once executed it is done.
    if (follow) this.posted.delete(toolCallId);
    return envelope;
  }

  /**
   * Records a person's verdict on a tool-approval-request in toolgate (bound to the frozen input)
   * and returns the tool-approval-response part to append in a `tool` message.
   */
  async decide(
    toolgate: Toolgate,
    request: { approvalId: string; toolCall: { toolCallId: string }; reason?: string },
    approved: boolean,
    reason?: string,
  ) {
    const operationId =
      this.operations.get(request.toolCall.toolCallId) ??
      /toolgate operation (op_(?:[a-z]+_)?[0-9a-f]+)/.exec(request.reason ?? "")?.[1];
    if (!operationId) throw new Error("not a toolgate approval request");
    const decision = reason ? { reason } : {};
    await (approved
      ? toolgate.approve(operationId, decision)
      : toolgate.reject(operationId, decision));
    return {
      type: "tool-approval-response" as const,
      approvalId: request.approvalId,
      approved,
      ...(reason ? { reason } : {}),
    };
  }
}

/** Settled: neither running nor waiting (for a reconciliation or a person). */
const final = (envelope: Envelope) =>
  envelope.status !== "pending" &&
  envelope.status !== "awaiting_approval" &&
  envelope.status !== "outcome_unknown";

/** The run's offered tools for the AI SDK. */
export async function toolgateTools(
  run: ToolgateRun,
  options: Options = {},
): Promise<ToolgateAiSdk> {
  const definitions = (await run.tools("native")) as Array<{
    name: string;
    description: string;
    input_schema: object;
  }>;
  return new ToolgateAiSdk(run, definitions, options);
}

function toolParts(content: ReadonlyArray<unknown>, names: ReadonlySet<string>): Part[] {
  return content.flatMap((part) => {
    const p = part as Part & { providerExecuted?: boolean };
    return p.type === "tool-call" && !p.providerExecuted && names.has(p.toolName)
      ? [
          {
            type: "tool-call" as const,
            toolCallId: p.toolCallId,
            toolName: p.toolName,
            input: p.input,
          },
        ]
      : [];
  });
}

/** The toolgate calls of the assistant message that made `toolCallId`, as it was first posted. */
function fromHistory(messages: ModelMessage[], toolCallId: string): Part[] | null {
  for (const message of messages) {
    if (message.role !== "assistant" || typeof message.content === "string") continue;
    const calls = message.content.filter((p) => p.type === "tool-call") as unknown as Part[];
    if (calls.some((c) => c.toolCallId === toolCallId))
      return calls.map((c) => ({
        type: "tool-call",
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        input: c.input,
      }));
  }
  return null;
}
