// README example (the lines between the markers are shown verbatim and run by test/e2e/sdk.test.ts).
import type OpenAI from "openai";
import type { ToolgateRun } from "toolgate/client";

export async function agent(
  openai: OpenAI,
  run: ToolgateRun,
  model: string,
  messages: OpenAI.ChatCompletionMessageParam[],
) {
  // README:begin
  const tools = (await run.tools("openai-chat")) as OpenAI.ChatCompletionFunctionTool[];
  for (;;) {
    const completion = await openai.chat.completions.create({ model, tools, messages });
    messages.push(completion.choices[0]!.message);
    const turn = await run.turn("openai-chat", completion);
    if (turn.status !== "settled") return turn; // no tool calls, or a call waits for a person
    messages.push(...turn.results);
  }
  // README:end
}
