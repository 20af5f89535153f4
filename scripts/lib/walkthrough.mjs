// The walkthrough: one source for `npm start`'s banner (real values) and README "A walkthrough"
// (placeholders, between the walkthrough markers). test/unit/readme.test.ts fails when the README's
// copy drifts from this; test/e2e/readme.test.ts runs it, verbatim, against a started toolgate.
// Every id a later step needs is captured by the step that made it: nothing to copy by hand.
// `node scripts/lib/walkthrough.mjs --write-readme` rewrites the README's copy.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The demo upstream's faults (`POST $UP/_control/script`), as demo/upstream.ts names them. */
export const FAULTS =
  "`ok`, `status` (`status`, `retryAfter`, `commit`), `commit_then_hang`, `commit_then_reset`, `hang`, `reset`, `slow` (`delayMs`), `invalid_json`, `wrong_shape`, `huge` (`bytes`), `deep` (`depth`), `echo` (`status`, `header`, `prefix`), `redirect` (`location`), `headers_then_stall` and `headers_then_drop` (`commit`)";

/** What the README shows where `npm start` prints real values. */
export const README_VALUES = {
  TG: "http://127.0.0.1:8787",
  UP: "http://127.0.0.1:8788",
  TENANT: "ten_…",
  ADMIN: "dev-admin-token",
  KEY: "tgk.…",
  RUN: "run_…",
  RT: "rt.…",
};

const charge = (id, amount) =>
  `-d '{"calls":[{"id":"${id}","name":"charge_card","arguments":{"amount":${amount},"currency":"usd"}}]}'`;

/** The commands, for `values` (README_VALUES, or the ones `npm start` just made). */
export function walkthrough(v) {
  return `TG=${v.TG}; UP=${v.UP}; TENANT=${v.TENANT}; ADMIN=${v.ADMIN}
KEY='${v.KEY}'   # the demo tenant's API key (console sign-in too)
RUN=${v.RUN}; RT='${v.RT}'   # the demo run, and its token: what you hand to the agent
# Two helpers: post a turn as the agent; print an answer and keep one of its fields.
turn() { curl -s $TG/v1/runs/$RUN/turns -H "Authorization: Bearer $RT" -H 'Content-Type: application/json' "$@"; }
keep() { local answer; answer=$(jq -c .); echo "$answer" >&2; jq -r "$1" <<<"$answer"; }

# 0. The shop's API key is the tenant's own write-only secret; tools reference it as {secret:SHOP_API_KEY}.
curl -s $TG/v1/secrets -H "Authorization: Bearer $KEY" | jq -c '.secrets[] | {name, fingerprint}'   # never the value

# 1. The model proposes a charge: it runs once (customer_id comes from the run's context, not the model).
OP1=$(turn ${charge("call_1", 500)} | keep '.results[0].operation_id')
#    → {"turn_id":"turn_…","status":"settled","results":[{"status":"succeeded","operation_id":"op_…",
#       "result":{"id":"eff_1","status":"succeeded","amount":500,"currency":"usd","customer_id":"cus_demo"}}]}
curl -s $UP/_control/state | jq '.requests[-1].authorization'   # → "Bearer sk_demo_shop_…": what the shop received

# 2. The agent re-posts the same turn, and 3. the model re-proposes the charge with a new call id:
#    the stored result both times, still one charge upstream.
turn ${charge("call_1", 500)} | jq -c '.results[0].result.id'   # → "eff_1"
turn ${charge("call_2", 500)} | jq -c '.results[0].result.id'   # → "eff_1"
curl -s $UP/_control/state | jq '.effects | length'   # → 1

# 4. The upstream commits the next charge and never answers:
curl -s -X POST $UP/_control/script -d '[{"kind":"commit_then_hang"}]' | jq -c .   # → {"queued":1}
OP3=$(turn -H 'Prefer: wait=4' ${charge("call_3", 900)} | keep '.results[0].operation_id')
#    → "status":"outcome_unknown","code":"timeout_unknown","message":"… Do not retry; …"
#    toolgate resends with the same idempotency key on its own, and the shop replays its charge:
curl -s "$TG/v1/operations/$OP3?wait=15" -H "Authorization: Bearer $KEY" | jq -c '{phase, status: .result.status, charge: .result.result.id}'
#    → {"phase":"recorded","status":"succeeded","charge":"eff_2"}
curl -s $UP/_control/state | jq -c '[.effectsByKey[]]'   # → [1,1]: one charge per key

# 5. A 503, then success: retried with backoff, one charge.
curl -s -X POST $UP/_control/script -d '[{"kind":"status","status":503}]' | jq -c .   # → {"queued":1}
turn -H 'Prefer: wait=15' ${charge("call_4", 1200)} | jq -c '.results[0] | {status, charge: .result.id}'
#    → {"status":"succeeded","charge":"eff_3"}

# 6. Is the shop safe to retry? npm start checked both keyed tools against the shop's sandbox:
curl -s $TG/v1/tools/charge_card -H "Authorization: Bearer $KEY" | jq -c '.verification | {status, summary}'
#    → {"status":"verified_sandbox_only","summary":"verified against the sandbox only: runs treat it as unverified"}

# 7. Undo the first charge (charge_card declares refund_charge as its compensation): once, however
#    often it is asked; a person approves the refund (README "Undo").
COMP=$(curl -s -X POST $TG/v1/operations/$OP1/compensate -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
  -d '{"reason":"customer asked for a refund"}' | keep .operation_id)
curl -s -X POST $TG/v1/operations/$COMP/approve -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{}' | jq -c '{phase}'
curl -s "$TG/v1/operations/$COMP?wait=15" -H "Authorization: Bearer $KEY" | jq -c '{phase, status: .result.status}'
#    → {"phase":"recorded","status":"succeeded"}
curl -s $UP/_control/state | jq -c '.effects[-1] | {path, body}'   # → the refund of eff_1, 500

# 8. Proof anyone can check offline: the first charge's signed receipts (settled, then compensated),
#    verified with nothing but the tenant's public keys (README "Receipts").
BUNDLE=$(mktemp); JWKS=$(mktemp)
curl -s "$TG/v1/receipts?operation_id=$OP1" -H "Authorization: Bearer $KEY" > $BUNDLE
curl -s $TG/public/$TENANT/receipts/jwks.json > $JWKS
npm run -s verify-receipts -- $BUNDLE --jwks $JWKS   # → ✓ 2 receipts (1 operation) verify

# 9. Everything that happened, transition by transition:
curl -s $TG/v1/runs/$RUN/trace -H "Authorization: Bearer $KEY" | jq -c '.events[] | [.type, .operation_id, .attempt]'
`;
}

const ROOT = join(fileURLToPath(import.meta.url), "..", "..", "..");
export const README = join(ROOT, "README.md");
export const START = "<!-- walkthrough: generated by scripts/lib/walkthrough.mjs -->";
export const END = "<!-- /walkthrough -->";

/** The README's text with its walkthrough block rebuilt from this file. */
export function readmeWithWalkthrough(text) {
  const from = text.indexOf(START);
  const to = text.indexOf(END);
  if (from < 0 || to < from) throw new Error(`README.md lacks the ${START} … ${END} markers`);
  const block = `${START}\n\n\`\`\`sh\n${walkthrough(README_VALUES)}\`\`\`\n\nFaults the demo upstream can be scripted with (\`POST $UP/_control/script\`, a JSON array consumed\nin order): ${FAULTS}.\n\n`;
  return text.slice(0, from) + block + text.slice(to);
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === "--write-readme")
  writeFileSync(README, readmeWithWalkthrough(readFileSync(README, "utf8")));
