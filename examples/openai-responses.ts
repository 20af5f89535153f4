// README example (the lines between the markers are shown verbatim and run by test/e2e/sdk.test.ts).
import type OpenAI from "openai";
import type { ToolgateRun } from "toolgate/client";

export async function agent(
  openai: OpenAI,
  run: ToolgateRun,
  model: string,
  input: OpenAI.Responses.ResponseInputItem[],
) {
  // README:begin
  const tools = (await run.tools("openai-responses")) as OpenAI.Responses.FunctionTool[];
  for (;;) {
    const response = await openai.responses.create({ model, tools, input });
    input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]));
    const turn = await run.turn("openai-responses", response);
    if (turn.status !== "settled") return turn; // no tool calls, or a call waits for a person
    input.push(...turn.results);
  }
  // README:end
}
