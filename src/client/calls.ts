// Which tool calls a model response holds, per format, as the server's parsers read them (light
// mirrors of src/providers, without zod): the client skips responses without tool calls and knows
// which call ids a native turn answers. Also reads the envelope back out of a formatted result.
import type { CallState, Envelope, Format } from "./types.ts";

type Loose = Record<string, unknown>;
const isObject = (value: unknown): value is Loose =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const items = (value: unknown): Loose[] => (Array.isArray(value) ? value.filter(isObject) : []);

/** The call ids in a model response, in order; empty when it asks for no tool. */
export function callIds(format: Format, response: unknown): string[] {
  switch (format) {
    case "anthropic": {
      const blocks = Array.isArray(response)
        ? response
        : isObject(response)
          ? response.content
          : [];
      return items(blocks)
        .filter((b) => b.type === "tool_use")
        .map((b) => String(b.id));
    }
    case "openai-responses": {
      const output = Array.isArray(response) ? response : isObject(response) ? response.output : [];
      return items(output)
        .filter((i) => i.type === "function_call")
        .map((i) => String(i.call_id ?? i.callId));
    }
    case "openai-chat": {
      const message =
        isObject(response) && Array.isArray(response.choices)
          ? (items(response.choices)[0]?.message ?? null)
          : response;
      if (!isObject(message)) return [];
      return items(message.tool_calls)
        .filter((c) => c.type === undefined || c.type === "function")
        .map((c) => String(c.id));
    }
    case "native": {
      if (isObject(response) && Array.isArray(response.calls))
        return items(response.calls).map((c) => String(c.id));
      const parts = Array.isArray(response) ? response : isObject(response) ? response.content : [];
      return items(parts)
        .filter((p) => p.type === "tool-call" && p.providerExecuted !== true)
        .map((p) => String(p.toolCallId));
    }
  }
}

/** Each call's envelope from a turn's formatted `results` (the tool-result text is the envelope's JSON). */
export function callStates(format: Format, results: unknown, ids: readonly string[]): CallState[] {
  switch (format) {
    case "anthropic":
      return items(isObject(results) ? results.content : []).map((block) => ({
        call_id: String(block.tool_use_id),
        envelope: JSON.parse(String(block.content)) as Envelope,
      }));
    case "openai-responses":
      return items(results).map((item) => ({
        call_id: String(item.call_id),
        envelope: JSON.parse(String(item.output)) as Envelope,
      }));
    case "openai-chat":
      return items(results).map((message) => ({
        call_id: String(message.tool_call_id),
        envelope: JSON.parse(String(message.content)) as Envelope,
      }));
    case "native":
      // Native envelopes come back in call order.
      return (results as Envelope[]).map((envelope, index) => ({
        call_id: ids[index] ?? "",
        envelope,
      }));
  }
}
