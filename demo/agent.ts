// The core of `npm run demo`: a scripted support agent (no model key needed) driving toolgate
// through the incidents toolgate exists for, with toolgate/client and Anthropic-shaped model
// responses: a refund whose response times out after the shop committed it, the model retrying
// that refund, a refund over the approval threshold that a person approves, and a tool-call budget
// running out. It prints what happened and each operation's timeline (GET /v1/runs/{id}/trace).
// With ANTHROPIC_API_KEY or OPENAI_API_KEY set, scripts/demo.mjs drives a real model instead.
import { Toolgate, type Envelope, type ToolgateRun, type TraceEvent } from "../src/client/index.ts";

export type DemoResult = {
  runId: string;
  effects: Array<{ path: string; key: string | null }>;
  statuses: Record<string, string>;
};
type Log = (line: string) => void;

let seq = 0;
const toolUse = (name: string, input: Record<string, unknown>) => ({
  type: "tool_use" as const,
  id: `toolu_demo_${++seq}`,
  name,
  input,
});
/** What a model would answer: an Anthropic Messages response asking for these tools. */
const modelSays = (text: string, ...uses: ReturnType<typeof toolUse>[]) => ({
  text,
  id: `msg_demo_${seq}`,
  type: "message",
  role: "assistant",
  model: "scripted-demo-model",
  content: [{ type: "text", text }, ...uses],
  stop_reason: "tool_use",
  usage: { input_tokens: 900, output_tokens: 60 },
});

export async function runDemo(options: {
  toolgateUrl: string;
  /** The demo shop's root; `namespace`: its namespace (demo/upstream.ts), when the tools use one. */
  upstreamUrl: string;
  namespace?: string;
  key: string;
  run: { run_id: string; run_token: string };
  log?: Log;
  consoleUrl?: string;
}): Promise<DemoResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const toolgate = new Toolgate({ baseUrl: options.toolgateUrl, apiKey: options.key });
  const run = toolgate.run(options.run);
  const statuses: Record<string, string> = {};
  const ns = options.namespace ? `?ns=${options.namespace}` : "";
  const control = (path: string, init?: RequestInit) =>
    fetch(`${options.upstreamUrl}/_control/${path}${ns}`, init);
  const say = async (label: string, response: ReturnType<typeof modelSays>) => {
    log(`\n▶ ${label}\n  model: “${response.text}”`);
    const { text: _text, ...message } = response;
    const turn = await run.turn("anthropic", message, { maxWaitMs: 30_000 });
    if (turn.status === "no_tool_calls") return [];
    for (const { call_id, envelope } of turn.calls) {
      statuses[call_id] = envelope.status;
      log(`  ${describe(envelope)}`);
    }
    return turn.status === "waiting" ? turn.awaiting_approval : [];
  };

  // 1. The shop commits the refund, then its response never arrives.
  await control("script", {
    method: "POST",
    body: JSON.stringify([{ kind: "commit_then_hang" }]),
  });
  log(`\n(the shop is told to commit the next write and then hang: commit_then_hang)`);
  await say(
    "1. A refund whose response times out after the shop committed it",
    modelSays(
      "The parcel arrived damaged, I will refund 40.",
      toolUse("refund_order", { order_id: "ord_1001", amount: 40, reason: "damaged" }),
    ),
  );
  log(`  → toolgate saw a timeout after sending: outcome unknown, never "failed". It resent with`);
  log(`    the same Idempotency-Key; the shop replayed its stored refund. One refund, confirmed.`);

  // 2. A model that did not see the answer retries the same refund (new call id).
  await say(
    "2. The model retries the same refund",
    modelSays(
      "Let me make sure that refund went through.",
      toolUse("refund_order", { order_id: "ord_1001", amount: 40, reason: "damaged" }),
      toolUse("refund_order", { order_id: "ord_1001", amount: 45, reason: "damaged" }),
    ),
  );
  log(`  → the same refund is the same operation: its stored result, no second refund; a changed`);
  log(`    amount on the same order is a new decision, refused (idempotency_conflict).`);

  // 3. Over the approval threshold: nothing is sent until a person approves.
  const waiting = await say(
    "3. A refund over 100 needs a person",
    modelSays(
      "This order was never delivered; refunding 250.",
      toolUse("refund_order", { order_id: "ord_2002", amount: 250, reason: "not_delivered" }),
    ),
  );
  for (const call of waiting) {
    const op = call.envelope.operation_id;
    log(`  → waiting for approval (inbox: ${options.consoleUrl ?? "/console"}/approvals, or`);
    log(`    POST /v1/operations/${op}/approve). The demo approves it now through the API.`);
    const decided = await toolgate.approve(op, { reason: "customer called, parcel lost" });
    log(
      `    approved by ${decided.approval?.decided_by} (bound to input ${decided.input_hash.slice(0, 12)}…)`,
    );
    const done = await toolgate.operation(op, 20_000);
    statuses[call.call_id] = done.result.status;
    log(`  ${describe(done.result)}`);
  }

  // 4. The run's tool-call budget runs out mid-conversation.
  await say(
    "4. The tool-call budget runs out",
    modelSays(
      "I will charge the replacement and email the customer.",
      toolUse("charge_card", { amount: 1999, currency: "usd" }),
      toolUse("send_email", { subject: "Your replacement", body: "It ships today." }),
    ),
  );
  log(`  → the budget (max_tool_calls) is enforced in code: the email was never sent.`);

  await timelines(toolgate, run, log);
  const state = (await (await control("state")).json()) as {
    effects: Array<{ path: string; key: string | null }>;
  };
  const effects = state.effects.map((e) => ({ path: e.path, key: e.key }));
  log(`\nWhat the shop actually did (${effects.length} effects):`);
  for (const effect of effects) log(`  ${effect.path}`);
  return { runId: run.runId, effects, statuses };
}

function describe(envelope: Envelope): string {
  if (envelope.status === "succeeded")
    return `✔ succeeded  ${envelope.operation_id.slice(0, 14)}…  ${JSON.stringify(envelope.result)}`;
  return `• ${envelope.status}/${envelope.code}  ${envelope.operation_id.slice(0, 14)}…  “${envelope.message.slice(0, 110)}${envelope.message.length > 110 ? "…" : ""}”`;
}

async function timelines(toolgate: Toolgate, run: ToolgateRun, log: Log) {
  const { events } = await toolgate.trace(run.runId);
  const start = events[0]?.at_ms ?? 0;
  const byOp = new Map<string, TraceEvent[]>();
  for (const event of events)
    if (event.operation_id && event.type !== "turn_received")
      byOp.set(event.operation_id, [...(byOp.get(event.operation_id) ?? []), event]);
  log(`\nTimelines (GET /v1/runs/${run.runId}/trace):`);
  for (const [op, list] of byOp) {
    const proposed = list.find((e) => e.type === "proposed");
    const tool = proposed?.type === "proposed" ? proposed.tool : "";
    log(`  ${op.slice(0, 14)}… ${tool}`);
    for (const e of list) {
      // The few fields a line shows, whichever event carries them.
      const f: Readonly<Record<string, unknown>> = e;
      const detail = [
        f.attempt ? `attempt ${String(f.attempt)}` : "",
        f.code ?? f.outcome ?? f.status ?? "",
      ]
        .filter(Boolean)
        .map(String)
        .join(", ");
      log(
        `    +${String(e.at_ms - start).padStart(6)} ms  ${e.type}${detail ? `  (${detail})` : ""}`,
      );
    }
  }
}
