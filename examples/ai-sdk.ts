// README example (the lines between the markers are shown verbatim and run by test/e2e/sdk.test.ts).
import { generateText, stepCountIs, type LanguageModel, type ModelMessage } from "ai";
import type { Toolgate, ToolgateRun } from "toolgate/client";
import { toolgateTools } from "toolgate/client/ai-sdk";

type Ask = (request: { toolCall: { toolName: string; input: unknown } }) => Promise<boolean>;
export async function agent(
  toolgate: Toolgate,
  run: ToolgateRun,
  model: LanguageModel,
  messages: ModelMessage[],
  askPerson: Ask,
) {
  // README:begin
  const tg = await toolgateTools(run);
  for (;;) {
    const result = await generateText({ model, ...tg.options, stopWhen: stepCountIs(8), messages });
    messages.push(...result.response.messages);
    const asks = result.content.filter((part) => part.type === "tool-approval-request");
    if (asks.length === 0) return result; // each decision below is recorded in toolgate too
    const decide = async (ask: (typeof asks)[number]) =>
      tg.decide(toolgate, ask, await askPerson(ask));
    messages.push({ role: "tool", content: await Promise.all(asks.map(decide)) });
  }
  // README:end
}
