// npm start: toolgate under `wrangler dev` with local Durable Object storage, the demo shop
// upstream, the demo tools registered for a fresh demo tenant, and copy-paste instructions.
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import { call, DEV_VARS, registerDemo, ROOT, startWrangler } from "./lib/dev-server.mjs";
import { formatTable } from "./lib/verify-table.mjs";

const port = Number(process.env.PORT ?? 8787);
const upstreamPort = Number(process.env.UPSTREAM_PORT ?? 8788);

const upstream = await startUpstream(upstreamPort);
console.log(`demo upstream (fake shop API) on ${upstream.url}`);
// The shop's sandbox: the same Stripe-like API on its own ledger, where verification's test
// charges go (so the walkthrough's effect counts below are yours alone).
const sandbox = await startUpstream(upstreamPort + 1);
const toolgate = await startWrangler({
  port,
  vars: {
    ...DEV_VARS,
    DEMO_UPSTREAM_URL: upstream.url,
    // Slack incoming webhooks may be pointed at (README "Webhooks"); yours replaces it.
    TOOLGATE_UPSTREAM_ALLOWLIST: process.env.TOOLGATE_UPSTREAM_ALLOWLIST || "hooks.slack.com",
  },
  persistTo: join(ROOT, ".wrangler", "state"),
});
const shutdown = async () => {
  toolgate.stop();
  await Promise.all([upstream.close(), sandbox.close()]);
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);

const demo = await registerDemo(toolgate.url, upstream.url);
// Is the shop safe to retry? Each keyed tool is verified against the sandbox before the walkthrough.
const verdicts = [];
for (const [name, body] of [
  ["charge_card", { arguments: { amount: 100, currency: "usd" }, context: demoContext() }],
  [
    "refund_order",
    { arguments: { order_id: "ord_test", amount: 1, reason: "other" }, context: demoContext() },
  ],
]) {
  const verified = await call(toolgate.url, "POST", `/v1/tools/${name}/verify`, demo.key, {
    ...body,
    base_url: sandbox.url,
  });
  verdicts.push(formatTable(name, verified.body.verification, 96));
}
function demoContext() {
  return { customer_id: "cus_demo", charge_limit: 50_000, refund_limit: 1_000 };
}
const TG = toolgate.url;
const UP = upstream.url;
const turn = (id, amount, extra = "") =>
  `curl -s $TG/v1/runs/$RUN/turns -H "Authorization: Bearer $RT" -H 'Content-Type: application/json'${extra} \\\n  -d '{"calls":[{"id":"${id}","name":"charge_card","arguments":{"amount":${amount},"currency":"usd"}}]}' | jq`;

console.log(`
────────────────────────────────────────────────────────────────────────────────
 toolgate is running on ${TG}   (docs: ${TG}/docs, spec: ${TG}/openapi.json)
 Console for people: http://localhost:${port}/console — sign in with the KEY below.

 Demo tenant ${demo.tenantId} with tools refund_charge, charge_card, lookup_order, refund_order, send_email.
 Paste these into another terminal:

TG=${TG}; UP=${UP}; TENANT=${demo.tenantId}; ADMIN=${DEV_VARS.TOOLGATE_ADMIN_TOKEN}
KEY='${demo.key}'
RUN=${demo.run.run_id}
RT='${demo.run.run_token}'

# 0. The shop's API key is the demo tenant's own secret, write-only (tools say {secret:SHOP_API_KEY}):
curl -s $TG/v1/secrets -H "Authorization: Bearer $KEY" | jq      # names and fingerprints, never values
curl -s $UP/_control/state | jq '.requests[-1].authorization'  # what the shop receives, after step 1

# 1. The model proposes a charge: it runs once.
${turn("call_1", 500)}

# 2. The same turn again (an agent retry): the same turn back, no second charge.
${turn("call_1", 500)}

# 3. The model re-proposes the same charge with a new call id: the stored result.
${turn("call_2", 500)}
curl -s $UP/_control/state | jq '.effects | length'     # → 1 charge

# 4. The upstream commits the next charge and never answers:
curl -s -X POST $UP/_control/script -d '[{"kind":"commit_then_hang"}]'
${turn("call_3", 900, " -H 'Prefer: wait=4'")}
#    → outcome_unknown (timeout_unknown). toolgate resends with the same key by itself:
curl -s "$TG/v1/operations/<operation_id from above>?wait=15" -H "Authorization: Bearer $KEY" | jq
curl -s $UP/_control/state | jq '.effectsByKey'          # still one charge per key

# 5. A 503 then success: retried with backoff, one charge.
curl -s -X POST $UP/_control/script -d '[{"kind":"status","status":503}]'
${turn("call_4", 1200, " -H 'Prefer: wait=15'")}

# 6. Is the shop safe to retry? When the demo started, both keyed tools were checked against the
#    shop's sandbox (${sandbox.url}); toolgate's answer and its evidence are stored with each tool
#    (the same status in GET /v1/tools, the console and a run's warnings):
${verdicts.join("\n\n").replace(/^(?=.)/gm, "#    ")}
curl -s $TG/v1/tools/charge_card -H "Authorization: Bearer $KEY" | jq '.verification | {status, counts_for_runs, summary, checks: [.checks[] | [.name, .status]]}'
curl -s -X POST $TG/v1/tools/charge_card/verify -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
  -d '{"arguments":{"amount":100,"currency":"usd"},"context":{"customer_id":"cus_demo","charge_limit":50000},"base_url":"${sandbox.url}"}' | jq '.verification.status'

# 7. Undo the first charge (charge_card declares refund_charge as its compensation): once, however
#    often it is asked; a person approves the refund (README "Undo").
OP=<operation_id of call_1's charge>
curl -s -X POST $TG/v1/operations/$OP/compensate -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
  -d '{"reason":"customer asked for a refund"}' | jq '{operation_id, tool, phase, compensates}'
curl -s -X POST $TG/v1/operations/<compensation operation_id>/approve -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{}' | jq .phase
curl -s $UP/_control/state | jq '[.effects[] | {path, body}]'   # the charge, and one refund of its id and amount

# 8. Everything that happened, transition by transition:
curl -s $TG/v1/runs/$RUN/trace -H "Authorization: Bearer $KEY" | jq '.events[] | [.type, .operation_id, .attempt]' -c

 Faults you can script on the upstream: ok, status (status, retryAfter, commit), commit_then_hang,
 commit_then_reset, hang, reset, slow (delayMs), invalid_json, wrong_shape, redirect (location).

 What next:
   • npm run demo  — a scripted agent through a timed-out refund, a retried refund, an approval and
                     a budget running out, with every operation's timeline (its own ports; 1 minute).
   • Wire your agent: toolgate/client (README "Wiring it into your agent"): run.turn(format, response)
     for the Anthropic and OpenAI SDKs, toolgateTools(run) for @openai/agents and the AI SDK.
     In code: new Toolgate({ baseUrl: "${TG}", apiKey: KEY }).run({ run_id: RUN, run_token: RT })
 Ctrl-C stops everything. Local state lives in .wrangler/state.
────────────────────────────────────────────────────────────────────────────────
`);
