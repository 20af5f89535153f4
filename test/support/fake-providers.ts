// Local fakes of the three provider APIs the SDKs call (Anthropic Messages, OpenAI Responses,
// OpenAI Chat Completions), on loopback. Each validates every request the way the real API does
// for tool use — every tool call is answered by exactly one tool result, paired by id, in call
// order, right after the call — and answers 400 in the provider's error shape otherwise. What
// the "model" answers is scripted per test: `reply(request)` sees the parsed request body.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

type Json = Record<string, any>;
export type Endpoint = "anthropic" | "responses" | "chat";
export type Reply = (body: Json, index: number) => Json;

export type FakeProviders = {
  url: string;
  /** Queue the model's next answers for an endpoint, consumed in order. */
  script(endpoint: Endpoint, ...replies: Reply[]): void;
  /** Every accepted request body, per endpoint. */
  requests: Record<Endpoint, Json[]>;
  /** Every request refused as the real API would refuse it, with the reason. */
  refused: Array<{ endpoint: Endpoint; reason: string }>;
  close(): Promise<void>;
};

export async function startFakeProviders(): Promise<FakeProviders> {
  const queues: Record<Endpoint, Reply[]> = { anthropic: [], responses: [], chat: [] };
  const requests: Record<Endpoint, Json[]> = { anthropic: [], responses: [], chat: [] };
  const refused: FakeProviders["refused"] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const endpoint: Endpoint | null = req.url?.endsWith("/messages")
        ? "anthropic"
        : req.url?.endsWith("/responses")
          ? "responses"
          : req.url?.endsWith("/chat/completions")
            ? "chat"
            : null;
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (!endpoint || req.method !== "POST") return send(404, { error: "not found" });
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Json;
      const problem = VALIDATE[endpoint](body);
      if (problem) {
        refused.push({ endpoint, reason: problem });
        return send(400, errorBody(endpoint, problem));
      }
      const reply = queues[endpoint].shift();
      if (!reply) {
        refused.push({ endpoint, reason: "no scripted reply left" });
        return send(500, errorBody(endpoint, "the fake model has no scripted reply left"));
      }
      requests[endpoint].push(body);
      send(200, reply(body, requests[endpoint].length - 1));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    script: (endpoint, ...replies) => void queues[endpoint].push(...replies),
    requests,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const errorBody = (endpoint: Endpoint, message: string) =>
  endpoint === "anthropic"
    ? { type: "error", error: { type: "invalid_request_error", message } }
    : { error: { type: "invalid_request_error", message, param: null, code: null } };

/** Real-API rules for tool use; null when the request is acceptable. */
const VALIDATE: Record<Endpoint, (body: Json) => string | null> = {
  // Anthropic: each assistant tool_use must be answered in the very next user message, whose
  // content starts with the tool_result blocks (no other block before them), one per tool_use.
  anthropic(body) {
    const messages = (body.messages ?? []) as Json[];
    for (const [i, message] of messages.entries()) {
      const blocks = Array.isArray(message.content) ? (message.content as Json[]) : [];
      const uses = message.role === "assistant" ? blocks.filter((b) => b.type === "tool_use") : [];
      const results = blocks.filter((b) => b.type === "tool_result");
      if (message.role === "user" && results.length > 0) {
        const previous = messages[i - 1];
        const prevUses = Array.isArray(previous?.content)
          ? (previous.content as Json[]).filter((b) => b.type === "tool_use").map((b) => b.id)
          : [];
        for (const result of results)
          if (!prevUses.includes(result.tool_use_id))
            return `messages.${i}.content: unexpected tool_use_id found in tool_result blocks: ${result.tool_use_id}. Each tool_result block must have a corresponding tool_use block in the previous message.`;
        const firstOther = blocks.findIndex((b) => b.type !== "tool_result");
        if (firstOther !== -1 && firstOther < results.length)
          return `messages.${i}: tool_result blocks must come first in the user message`;
        if (typeof results[0]?.content !== "string" && !Array.isArray(results[0]?.content))
          return `messages.${i}.content.0.content: must be a string or blocks`;
      }
      if (uses.length === 0) continue;
      const next = messages[i + 1];
      if (!next) continue; // a conversation may end on the assistant's turn (prefill)
      const answered = Array.isArray(next.content)
        ? (next.content as Json[]).filter((b) => b.type === "tool_result").map((b) => b.tool_use_id)
        : [];
      if (next.role !== "user" || uses.some((u) => !answered.includes(u.id)))
        return `messages.${i + 1}: tool_use ids were found without tool_result blocks immediately after: ${uses
          .filter((u) => !answered.includes(u.id))
          .map((u) => u.id)
          .join(", ")}`;
      if (answered.join() !== uses.map((u) => u.id).join())
        return `messages.${i + 1}: tool_result blocks are not in tool_use order`;
    }
    return null;
  },
  // Responses: each function_call item is followed, right after the calls of its response, by
  // one function_call_output per call, in call order; an output must answer a call before it.
  responses(body) {
    const input = Array.isArray(body.input) ? (body.input as Json[]) : [];
    return pairRun(
      input,
      (item) => (item.type === "function_call" ? String(item.call_id) : null),
      (item) => (item.type === "function_call_output" ? String(item.call_id) : null),
      "input",
      "No tool output found for function call",
    );
  },
  // Chat: an assistant message with tool_calls is followed by one role "tool" message per call, in order.
  chat(body) {
    const messages = (body.messages ?? []) as Json[];
    for (const [i, message] of messages.entries()) {
      if (message.role === "tool") {
        const owner = messages
          .slice(0, i)
          .reverse()
          .find((m) => m.role !== "tool");
        if (!owner?.tool_calls?.some((c: Json) => c.id === message.tool_call_id))
          return `messages.[${i}].tool_call_id: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'`;
      }
      if (message.role !== "assistant" || !message.tool_calls?.length) continue;
      const ids = (message.tool_calls as Json[]).map((c) => c.id);
      const answers = messages.slice(i + 1, i + 1 + ids.length);
      if (answers.length < ids.length && i + 1 >= messages.length) continue;
      if (answers.map((m) => (m.role === "tool" ? m.tool_call_id : null)).join() !== ids.join())
        return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id' in order. Missing or misplaced: ${ids.join(", ")}`;
      for (const answer of answers)
        if (typeof answer.content !== "string" && !Array.isArray(answer.content))
          return `messages.[${i}]: tool message content must be a string`;
    }
    return null;
  },
};

function pairRun(
  items: Json[],
  callOf: (item: Json) => string | null,
  outputOf: (item: Json) => string | null,
  at: string,
  missing: string,
): string | null {
  let i = 0;
  while (i < items.length) {
    const out = outputOf(items[i]!);
    if (out !== null)
      return `${at}[${i}]: No tool call found for function call output with call_id ${out}.`;
    const calls: string[] = [];
    while (i < items.length && (callOf(items[i]!) !== null || isSibling(items[i]!)))
      if (callOf(items[i]!) !== null) calls.push(callOf(items[i++]!)!);
      else i++;
    if (calls.length === 0) {
      i++;
      continue;
    }
    const outputs: string[] = [];
    while (i < items.length && outputOf(items[i]!) !== null) outputs.push(outputOf(items[i++]!)!);
    if (outputs.join() !== calls.join())
      return `${missing} with call_id ${calls.find((c, k) => outputs[k] !== c)} (outputs must follow their calls, in order)`;
  }
  return null;
}

/** Items a response emits alongside its function calls (reasoning, a message before the calls). */
const isSibling = (item: Json) => item.type === "reasoning";
