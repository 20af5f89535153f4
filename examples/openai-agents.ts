// README example (the lines between the markers are shown verbatim and run by test/e2e/sdk.test.ts).
import { Agent, run as runAgent, type RunToolApprovalItem } from "@openai/agents";
import type { Toolgate, ToolgateRun } from "toolgate/client";
import { toolgateTools } from "toolgate/client/openai-agents";

type Ask = (item: RunToolApprovalItem) => Promise<boolean>;
export async function agent(
  toolgate: Toolgate,
  run: ToolgateRun,
  model: string,
  prompt: string,
  askPerson: Ask,
) {
  // README:begin
  const tg = await toolgateTools(run);
  const support = new Agent({ name: "support", model, tools: tg.tools });
  let result = await runAgent(support, prompt);
  while (result.interruptions.length > 0) {
    // toolgate's approval rules raised these; each decision is recorded in toolgate
    for (const item of result.interruptions)
      await tg.decide(toolgate, result.state, item, await askPerson(item));
    result = await runAgent(support, result.state);
  }
  // README:end
  return result;
}
