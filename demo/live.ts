// `npm run demo` with ANTHROPIC_API_KEY or OPENAI_API_KEY: a real model handles one support
// request through toolgate (the README loop); refunds over 100 wait for approval in the console.
// Not exercised by the tests (no model keys here); the loop itself is examples/*.ts, which is.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { agent as anthropicAgent } from "../examples/anthropic.ts";
import { agent as responsesAgent } from "../examples/openai-responses.ts";
import { Toolgate } from "../src/client/index.ts";

const PROMPT =
  "I'm customer cus_demo. Order ord_1001 arrived damaged; please refund 40 and email me a confirmation.";

export async function runLive(options: {
  toolgateUrl: string;
  key: string;
  run: { run_id: string; run_token: string };
}) {
  const run = new Toolgate({ baseUrl: options.toolgateUrl, apiKey: options.key }).run(options.run);
  const outcome = process.env.ANTHROPIC_API_KEY
    ? await anthropicAgent(new Anthropic(), run, process.env.DEMO_MODEL ?? "claude-sonnet-4-5", [
        { role: "user", content: PROMPT },
      ])
    : await responsesAgent(new OpenAI(), run, process.env.DEMO_MODEL ?? "gpt-5-mini", [
        { role: "user", content: PROMPT },
      ]);
  console.log(JSON.stringify(outcome, null, 2));
}
