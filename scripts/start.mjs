// npm start: toolgate under `wrangler dev` with local Durable Object storage, the demo shop
// upstream, the demo tools registered for a fresh demo tenant, and copy-paste instructions.
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import { DEV_VARS, registerDemo, ROOT, startWrangler } from "./lib/dev-server.mjs";

const port = Number(process.env.PORT ?? 8787);
const upstreamPort = Number(process.env.UPSTREAM_PORT ?? 8788);

const upstream = await startUpstream(upstreamPort);
console.log(`demo upstream (fake shop API) on ${upstream.url}`);
const toolgate = await startWrangler({
  port,
  vars: { ...DEV_VARS, DEMO_UPSTREAM_URL: upstream.url },
  persistTo: join(ROOT, ".wrangler", "state"),
});
const shutdown = async () => {
  toolgate.stop();
  await upstream.close();
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);

const demo = await registerDemo(toolgate.url, upstream.url);
const TG = toolgate.url;
const UP = upstream.url;
const turn = (id, amount, extra = "") =>
  `curl -s $TG/v1/runs/$RUN/turns -H "Authorization: Bearer $RT" -H 'Content-Type: application/json'${extra} \\\n  -d '{"calls":[{"id":"${id}","name":"charge_card","arguments":{"amount":${amount},"currency":"usd"}}]}' | jq`;

console.log(`
────────────────────────────────────────────────────────────────────────────────
 toolgate is running on ${TG}   (docs: ${TG}/docs, spec: ${TG}/openapi.json)
 Console for people: http://localhost:${port}/console — sign in with the KEY below.

 Demo tenant ${demo.tenantId} with tools charge_card, lookup_order, refund_order, send_email.
 Paste these into another terminal:

TG=${TG}; UP=${UP}
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

# 6. Everything that happened, transition by transition:
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
