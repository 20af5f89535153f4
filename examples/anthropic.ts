// README example (the lines between the markers are shown verbatim and run by test/e2e/sdk.test.ts).
import type Anthropic from "@anthropic-ai/sdk";
import type { ToolgateRun } from "toolgate/client";

export async function agent(
  anthropic: Anthropic,
  run: ToolgateRun,
  model: string,
  messages: Anthropic.MessageParam[],
) {
  // README:begin
  const tools = (await run.tools("anthropic")) as Anthropic.Tool[];
  for (;;) {
    const response = await anthropic.messages.create({ model, max_tokens: 1024, tools, messages });
    messages.push({ role: "assistant", content: response.content });
    const turn = await run.turn("anthropic", response);
    if (turn.status !== "settled") return turn; // no tool calls, or a call waits for a person
    messages.push(turn.results);
  }
  // README:end
}
