// npm start: toolgate under `wrangler dev` with local Durable Object storage, the demo shop
// upstream, the demo tools registered for the demo tenant (kept across restarts), and the
// walkthrough (scripts/lib/walkthrough.mjs, the README's too) with the real values filled in.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startUpstream } from "../demo/upstream.ts";
import {
  DEV_VARS,
  registerDemo,
  registerUserDemo,
  ROOT,
  startWrangler,
  verifyDemo,
} from "./lib/dev-server.mjs";
import { formatTable } from "./lib/verify-table.mjs";
import { FAULTS, walkthrough } from "./lib/walkthrough.mjs";

const port = Number(process.env.PORT ?? 8787);
const upstreamPort = Number(process.env.UPSTREAM_PORT ?? 8788);

const upstream = await startUpstream(upstreamPort);
console.log(`demo upstream (fake shop API) on ${upstream.url}`);
// The shop's sandbox: the same Stripe-like API on its own ledger, where verification's test
// charges go (so the walkthrough's effect counts below are yours alone).
const sandbox = await startUpstream(upstreamPort + 1);
const consoleUrl = process.env.TOOLGATE_CONSOLE_URL || `http://localhost:${port}`;
const stateDir = join(ROOT, ".wrangler", "state");
const toolgate = await startWrangler({
  port,
  vars: {
    ...DEV_VARS,
    DEMO_UPSTREAM_URL: upstream.url,
    // Slack incoming webhooks may be pointed at (README "Webhooks"); yours replaces it.
    TOOLGATE_UPSTREAM_ALLOWLIST: process.env.TOOLGATE_UPSTREAM_ALLOWLIST || "hooks.slack.com",
    // Every link toolgate makes (Slack buttons, GET /) goes to the console this banner names:
    // localhost is a secure context for the console's Secure cookie over plain http.
    TOOLGATE_CONSOLE_URL: consoleUrl,
  },
  persistTo: stateDir,
});
const shutdown = async () => {
  toolgate.stop();
  await Promise.all([upstream.close(), sandbox.close()]);
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);

// A restart keeps the demo tenant and its key (both live in .wrangler/state with everything else):
// the tools are registered again (the shop's URL may have moved) and a new run opened, since the
// shop's ledger starts empty again.
const saved = join(stateDir, "demo-tenant.json");
const kept = await keptTenant();
const demo = await registerDemo(toolgate.url, upstream.url, { tenant: kept ?? undefined });
if (!kept) writeFileSync(saved, JSON.stringify({ tenantId: demo.tenantId, key: demo.key }));
async function keptTenant() {
  let tenant;
  try {
    tenant = JSON.parse(readFileSync(saved, "utf8"));
  } catch {
    return null;
  }
  // The key must still work (state cleared by hand, the key revoked): else a new tenant.
  const res = await fetch(`${toolgate.url}/v1/tools`, {
    headers: { Authorization: `Bearer ${tenant.key}` },
  }).catch(() => null);
  return res?.ok ? tenant : null;
}
// Acting as the user (issue 36): a calendar tool that sends each user's own token.
await registerUserDemo(toolgate.url, upstream.url, demo.key);
// Is the shop safe to retry? Each keyed tool is verified against the sandbox before the walkthrough.
const verdicts = (await verifyDemo(toolgate.url, demo.key, sandbox.url)).map((v) =>
  formatTable(v.name, v.verification, 96),
);
const TG = toolgate.url;
const values = {
  TG,
  UP: upstream.url,
  TENANT: demo.tenantId,
  ADMIN: DEV_VARS.TOOLGATE_ADMIN_TOKEN,
  KEY: demo.key,
  RUN: demo.run.run_id,
  RT: demo.run.run_token,
};

console.log(`
────────────────────────────────────────────────────────────────────────────────
 toolgate is running on ${TG}   (docs: ${TG}/docs, spec: ${TG}/openapi.json)
 Console for people: ${consoleUrl}/console — sign in with the KEY below.

 Demo tenant ${demo.tenantId} (${kept ? "kept from the last start: the same KEY" : "new"}; rm -r .wrangler/state starts afresh)
 with tools refund_charge, charge_card, lookup_order, refund_order, send_email. Both keyed tools
 were checked against the shop's sandbox (${sandbox.url}):

${verdicts.join("\n\n").replace(/^(?=.)/gm, "   ")}

 Paste these into another terminal (bash, curl, jq), all at once or step by step:

${walkthrough(values)}
 Faults you can script on the upstream: ${FAULTS.replaceAll("`", "")}.

 Acting as the user (README "Acting as the user"): add_calendar_event sends alice's own token from
 the local authorization server (${upstream.url}/as/demo). Her first call waits for her to connect:
   RUN2=$(curl -s -X POST ${TG}/v1/runs -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
     -d '{"user":{"id":"alice","scopes":[]},"tools":["add_calendar_event"]}' | jq -r .run_id)
   curl -s -X POST "${TG}/v1/runs/$RUN2/turns?format=native" -H "Authorization: Bearer $KEY" \\
     -H 'Content-Type: application/json' -d '{"calls":[{"id":"c1","name":"add_calendar_event","arguments":{"title":"Standup","starts_at":"09:00"}}]}' | jq
   # → pending / credential_required with connect_url: open it (the local server consents at once),
   #   then ask again: the same call has run, with alice's token (${upstream.url}/_control/state?ns=calendar).

 What next:
   • npm run demo  — a scripted agent through a timed-out refund, a retried refund, an approval and
                     a budget running out, with every operation's timeline (its own ports; ~10 s).
   • Wire your agent: toolgate/client (README "Wiring it into your agent"): run.turn(format, response)
     for the Anthropic and OpenAI SDKs, toolgateTools(run) for @openai/agents and the AI SDK.
     In code: new Toolgate({ baseUrl: "${TG}", apiKey: KEY }).run({ run_id: RUN, run_token: RT })
 Ctrl-C stops everything. Local state lives in .wrangler/state.
────────────────────────────────────────────────────────────────────────────────
`);
