// The promises a deployment must keep, one check each, through the public API only. Every check
// registers its own tools against its own namespace of the suite's test upstream, scripts the
// upstream's faults, drives calls the way an agent does (run token, native turns), and judges by
// what the upstream received and committed and by what the model was told. A check returns its
// evidence lines, or throws a CheckFailed naming the broken promise with the evidence so far.

export class CheckFailed extends Error {
  constructor(message, evidence) {
    super(message);
    this.evidence = evidence;
  }
}

/** Any wording that tells the model a call had no effect (never true after an ambiguous attempt). */
export const NOT_APPLIED =
  /did not take effect|before it took effect|did not happen|nothing was sent|not executed/i;

const SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    amount: { type: "integer", exclusiveMinimum: 0 },
    currency: { enum: ["usd", "eur"] },
  },
  required: ["amount", "currency"],
};

/** A Stripe-like charge against `up`, keyed by an Idempotency-Key header unless overridden. */
export function chargeTool(name, up, overrides = {}) {
  return {
    name,
    description: "Charge a card (toolgate conformance suite; a test upstream, no real money).",
    input_schema: SCHEMA,
    output_schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    risk: "write",
    request: { method: "POST", url: `${up.url}/charges` },
    idempotency: { mode: "header", header: "Idempotency-Key" },
    timeout_ms: 2000,
    max_attempts: 3,
    retry: { min_delay_ms: 200, initial_delay_ms: 300, max_delay_ms: 1000, max_elapsed_ms: 30_000 },
    ...overrides,
  };
}

function judge() {
  const evidence = [];
  return {
    evidence,
    note: (line) => evidence.push(line),
    expect(condition, what) {
      if (!condition) throw new CheckFailed(what, evidence);
    },
  };
}

const result = (res) => res.body?.results?.[0] ?? null;
const describe = (envelope) =>
  envelope ? `${envelope.status}${envelope.code ? `/${envelope.code}` : ""}` : "no result";

export const CHECKS = [
  {
    id: "one_effect_per_keyed_write",
    promise:
      "One effect per keyed write: the same turn re-POSTed 4× at once, then re-proposed with a new call id",
    async run(t) {
      const j = judge();
      const up = t.upstream("dedupe");
      const name = await t.tool(chargeTool(t.name("dedupe"), up), up);
      const run = await t.run([name]);
      const args = { amount: 501, currency: "usd" };
      const posts = await Promise.all(
        [1, 2, 3, 4].map(() => t.turn(run, [{ id: "c1", name, arguments: args }])),
      );
      const again = await t.turn(run, [{ id: "c2", name, arguments: args }]);
      const envelopes = [...posts, again].map(result);
      j.note(`5 posts answered: ${envelopes.map(describe).join(", ")}`);
      const ops = new Set(envelopes.map((e) => e?.operation_id));
      j.note(`operations: ${[...ops].join(", ")}`);
      const state = await up.state();
      j.note(`upstream: ${state.requests.length} request(s), ${state.effects.length} effect(s)`);
      j.expect(
        envelopes.every((e) => e?.status === "succeeded"),
        "every post should report the one charge as succeeded",
      );
      j.expect(ops.size === 1, "duplicates and the re-proposal should be one operation");
      j.expect(
        state.effects.length === 1,
        `expected 1 effect upstream, got ${state.effects.length}`,
      );
      j.expect(
        state.requests.length === 1,
        `expected 1 request upstream, got ${state.requests.length}`,
      );
      return j.evidence;
    },
  },
  {
    id: "commit_then_hang_is_unknown_then_reconciled",
    promise:
      "A write that commits and then hangs is outcome_unknown (never 'did not happen'), then resent with the same key: succeeded, one effect",
    async run(t) {
      const j = judge();
      const up = t.upstream("unknown");
      const tool = chargeTool(t.name("unknown"), up, {
        timeout_ms: 400,
        // The resend waits 2.5 s, so the model's first answer (held up to 2 s) is the unknown one.
        retry: {
          min_delay_ms: 2500,
          initial_delay_ms: 2500,
          max_delay_ms: 3000,
          max_elapsed_ms: 30_000,
        },
      });
      const name = await t.tool(tool, up);
      const run = await t.run([name]);
      await up.script({ kind: "commit_then_hang" });
      const posted = Date.now();
      const first = await t.turn(
        run,
        [{ id: "c1", name, arguments: { amount: 700, currency: "usd" } }],
        2,
      );
      const told = result(first);
      j.note(
        `first answer, after ${Date.now() - posted} ms (attempt timeout 400 ms): ${describe(told)}`,
      );
      j.expect(told?.status === "outcome_unknown", "the model should be told outcome_unknown");
      j.expect(!NOT_APPLIED.test(told.message ?? ""), `untrue message: ${told.message}`);
      const settled = await t.settle(run, first.body.turn_id);
      const done = result(settled);
      const state = await up.state();
      j.note(`after the retry: ${describe(done)}`);
      j.note(
        `upstream: ${state.requests.length} request(s) with ${new Set(state.requests.map((r) => r.key)).size} key(s), ${state.effects.length} effect(s)`,
      );
      j.expect(done?.status === "succeeded", "the resend should find the committed charge");
      j.expect(state.effects.length === 1, `expected 1 effect, got ${state.effects.length}`);
      j.expect(
        new Set(state.requests.map((r) => r.key)).size === 1 && state.requests.length === 2,
        "expected exactly 2 requests with the same idempotency key",
      );
      j.expect(
        done.result?.id === state.effects[0]?.id,
        "the result should be the committed effect's",
      );
      return j.evidence;
    },
  },
  {
    id: "unknown_reconciled_by_status_lookup",
    promise:
      "A keyless write with a status lookup that commits and hangs: the lookup finds it, nothing is sent twice",
    async run(t) {
      const j = judge();
      const up = t.upstream("lookup");
      const name = await t.tool(
        chargeTool(t.name("lookup"), up, {
          timeout_ms: 400,
          idempotency: { mode: "none" },
          request: {
            method: "POST",
            url: `${up.url}/charges`,
            headers: { "X-Client-Reference": "{idempotency_key}" },
          },
          reconcile: { url: `${up.url}/effects?idempotency_key={idempotency_key}` },
        }),
      );
      const run = await t.run([name]);
      await up.script({ kind: "commit_then_hang" });
      const first = await t.turn(run, [
        { id: "c1", name, arguments: { amount: 9, currency: "eur" } },
      ]);
      const done = result(await t.settle(run, first.body.turn_id));
      const state = await up.state();
      j.note(`answer: ${describe(done)}`);
      j.note(`upstream requests: ${state.requests.map((r) => r.method).join(", ")}`);
      j.expect(done?.status === "succeeded", "the lookup should find the committed charge");
      j.expect(state.effects.length === 1, `expected 1 effect, got ${state.effects.length}`);
      j.expect(
        state.requests.filter((r) => r.method === "POST").length === 1,
        "the write must not be sent twice",
      );
      return j.evidence;
    },
  },
  {
    id: "retries_only_where_safe",
    promise:
      "A 503 on a keyed write is retried with the same key; a keyless write that may have applied is never retried",
    async run(t) {
      const j = judge();
      const keyedUp = t.upstream("retry-keyed");
      const keyed = await t.tool(chargeTool(t.name("retry_keyed"), keyedUp), keyedUp);
      const bareUp = t.upstream("retry-bare");
      const bare = await t.tool(
        chargeTool(t.name("retry_bare"), bareUp, {
          timeout_ms: 400,
          idempotency: { mode: "none" },
        }),
      );
      const run = await t.run([keyed, bare]);
      await keyedUp.script({ kind: "status", status: 503 });
      const k = await t.turn(run, [
        { id: "k1", name: keyed, arguments: { amount: 3, currency: "usd" } },
      ]);
      const kDone = result(await t.settle(run, k.body.turn_id));
      const kState = await keyedUp.state();
      j.note(
        `keyed after a 503: ${describe(kDone)}; ${kState.requests.length} request(s), keys ${[...new Set(kState.requests.map((r) => r.key))].length}, ${kState.effects.length} effect(s)`,
      );
      j.expect(kDone?.status === "succeeded", "the keyed write should be retried to success");
      j.expect(
        kState.requests.length === 2 && new Set(kState.requests.map((r) => r.key)).size === 1,
        "expected 2 requests with the same key",
      );
      j.expect(kState.effects.length === 1, "expected 1 effect");

      await bareUp.script({ kind: "commit_then_reset" });
      const b = await t.turn(run, [
        { id: "b1", name: bare, arguments: { amount: 4, currency: "usd" } },
      ]);
      const told = result(await t.settle(run, b.body.turn_id));
      if (told?.operation_id) t.leftUnknown(told.operation_id);
      const toldAtMs = Date.now();
      await t.sleep(2500); // longer than the tool's whole retry schedule's first delays
      const bState = await bareUp.state();
      j.note(
        `keyless after commit-then-reset: ${describe(told)}; ${bState.requests.length} request(s) after 2.5 s`,
      );
      j.expect(told?.status === "outcome_unknown", "a keyless ambiguous write is outcome_unknown");
      j.expect(!NOT_APPLIED.test(told.message ?? ""), `untrue message: ${told.message}`);
      j.expect(bState.requests.length === 1, "a keyless write that may have applied was resent");
      // "Never" is longer than 2.5 s: looked at again once every other check has run.
      t.later(async () => {
        const last = judge();
        const requests = (await bareUp.state()).requests.length;
        const seconds = ((Date.now() - toldAtMs) / 1000).toFixed(0);
        last.note(`keyless at the end of the suite, ${seconds} s later: ${requests} request(s)`);
        last.expect(requests === 1, "a keyless write that may have applied was resent later");
        return last.evidence;
      });
      return j.evidence;
    },
  },
  {
    id: "approval_binds_frozen_arguments",
    promise:
      "An approval binds the frozen arguments: nothing is sent before it, another call's hash is refused, exactly the approved body is sent",
    async run(t) {
      const j = judge();
      const up = t.upstream("approval");
      const name = await t.tool(
        chargeTool(t.name("approval"), up, {
          approval: { mode: "always", four_eyes: false },
        }),
        up,
      );
      const run = await t.run([name]);
      const a = result(
        await t.turn(run, [{ id: "a1", name, arguments: { amount: 100, currency: "usd" } }], 0),
      );
      const b = result(
        await t.turn(run, [{ id: "b1", name, arguments: { amount: 999, currency: "usd" } }], 0),
      );
      j.note(`two calls: ${describe(a)}, ${describe(b)}`);
      j.expect(
        a?.status === "awaiting_approval" && b?.status === "awaiting_approval",
        "both should wait for a person",
      );
      j.expect(a.operation_id !== b.operation_id, "other arguments must be another operation");
      j.expect((await up.state()).requests.length === 0, "nothing may be sent before approval");
      const viewA = await t.api("GET", `/v1/operations/${a.operation_id}`);
      const hashA = viewA.body?.input_hash;
      const mismatch = await t.api("POST", `/v1/operations/${b.operation_id}/approve`, {
        input_hash: hashA,
        reason: "conformance: the hash of another call",
      });
      j.note(`approve B with A's input_hash → ${mismatch.status} ${mismatch.body?.code ?? ""}`);
      j.expect(mismatch.status === 409, "approving with another call's input_hash must be refused");
      const ok = await t.api("POST", `/v1/operations/${a.operation_id}/approve`, {
        input_hash: hashA,
        reason: "conformance: approved",
      });
      j.expect(ok.status === 200, `approve A answered ${ok.status}`);
      const done = await t.api("GET", `/v1/operations/${a.operation_id}?wait=10`);
      const state = await up.state();
      const viewB = await t.api("GET", `/v1/operations/${b.operation_id}`);
      j.note(`A: ${describe(done.body?.result)}; B: ${viewB.body?.phase}`);
      j.note(`upstream received: ${state.requests.map((r) => JSON.stringify(r.body)).join(", ")}`);
      j.expect(done.body?.result?.status === "succeeded", "the approved call should run");
      j.expect(
        state.requests.length === 1 &&
          JSON.stringify(state.requests[0].body) ===
            JSON.stringify({ amount: 100, currency: "usd" }),
        "exactly the approved arguments must be sent, once",
      );
      j.expect(viewB.body?.phase === "awaiting_approval", "the other call must still wait");
      return j.evidence;
    },
  },
  {
    id: "budget_stops",
    promise: "A budget stops: with max_tool_calls 2 the third charge is refused and never sent",
    async run(t) {
      const j = judge();
      const up = t.upstream("budget");
      const name = await t.tool(chargeTool(t.name("budget"), up), up);
      const run = await t.run([name], { max_tool_calls: 2 });
      const told = [];
      for (const amount of [1, 2, 3])
        told.push(
          result(
            await t.turn(run, [{ id: `c${amount}`, name, arguments: { amount, currency: "usd" } }]),
          ),
        );
      const state = await up.state();
      j.note(`three charges: ${told.map(describe).join(", ")}`);
      j.note(`upstream: ${state.effects.length} effect(s)`);
      j.expect(
        told[0]?.status === "succeeded" && told[1]?.status === "succeeded",
        "the first two should run",
      );
      j.expect(told[2]?.status === "budget_exhausted", "the third should be budget_exhausted");
      j.expect(state.effects.length === 2, `expected 2 effects, got ${state.effects.length}`);
      return j.evidence;
    },
  },
  {
    id: "secrets_never_echoed",
    promise:
      "Secrets are never echoed: an upstream that echoes the credential (in a result and in an error) reaches nobody",
    async run(t) {
      const j = judge();
      const up = t.upstream("secrets");
      const value = `sk_conformance_${t.random()}${t.random()}${t.random()}${t.random()}`;
      const secret = t.name("SECRET").toUpperCase();
      const put = await t.secret(secret, value);
      j.expect(put.status === 201 || put.status === 200, `PUT /v1/secrets answered ${put.status}`);
      const base = chargeTool(t.name("secret"), up, {
        request: {
          method: "POST",
          url: `${up.url}/charges`,
          headers: { Authorization: `Bearer {secret:${secret}}` },
        },
      });
      const { output_schema: _, ...echoing } = base;
      const name = await t.tool(echoing, up);
      const run = await t.run([name]);
      await up.script({ kind: "echo", status: 200 }, { kind: "echo", status: 400 });
      const r1 = await t.turn(run, [{ id: "s1", name, arguments: { amount: 5, currency: "usd" } }]);
      const r2 = await t.turn(run, [{ id: "s2", name, arguments: { amount: 6, currency: "usd" } }]);
      j.note(`echoed twice: ${describe(result(r1))}, ${describe(result(r2))}`);
      await t.api("GET", "/v1/secrets");
      await t.api("GET", `/v1/runs/${run.runId}/trace`);
      await t.api("GET", "/v1/events?limit=500");
      for (const r of [r1, r2])
        if (result(r)?.operation_id) await t.api("GET", `/v1/operations/${result(r).operation_id}`);
      const state = await up.state();
      const used = state.requests.filter((r) => r.authorization === `Bearer ${value}`).length;
      j.note(`upstream received the secret in ${used} request(s)`);
      // The value, a truncated part of its random tail, and its common encodings.
      const tail = value.slice("sk_conformance_".length);
      const forms = [
        value,
        tail.slice(0, 16),
        tail.slice(-16),
        Buffer.from(value).toString("base64").slice(0, -4),
        Buffer.from(value).toString("base64url").slice(0, -4),
        Buffer.from(value).toString("hex"),
      ];
      const leaks = t.seen().filter((text) => forms.some((form) => text.includes(form))).length;
      j.note(
        `responses holding the value (or part or an encoding of it): ${leaks} of ${t.seen().length}`,
      );
      j.expect(
        used === 2,
        "the upstream should have received the secret (the check needs it sent)",
      );
      j.expect(leaks === 0, "the secret's value appeared in a response");
      return j.evidence;
    },
  },
  {
    id: "cross_tenant_not_found",
    promise:
      "Another tenant's ids answer 404: its run, operation, trace and approval are not found, and its approval is not decided",
    async run(t) {
      const j = judge();
      const up = t.upstream("tenancy");
      const name = await t.tool(
        chargeTool(t.name("tenancy"), up, { approval: { mode: "always", four_eyes: false } }),
        up,
      );
      const run = await t.run([name]);
      const waiting = result(
        await t.turn(run, [{ id: "x1", name, arguments: { amount: 1, currency: "usd" } }], 0),
      );
      j.note(`a call in this tenant: ${describe(waiting)}`);
      j.expect(waiting?.operation_id, "the call should have an operation id to probe with");
      const other = await t.otherTenant();
      const probes = [
        ["GET", `/v1/runs/${run.runId}`],
        ["GET", `/v1/runs/${run.runId}/trace`],
        ["GET", `/v1/operations/${waiting.operation_id}`],
        ["POST", `/v1/operations/${waiting.operation_id}/approve`, { reason: "not mine" }],
      ];
      const answers = [];
      for (const [method, path, body] of probes) {
        const res = await other.call(method, path, body);
        answers.push(res.status);
        j.note(`${method} ${path.replace(/\/v1\//, "")} as another tenant → ${res.status}`);
      }
      const still = await t.api("GET", `/v1/operations/${waiting.operation_id}`);
      const sent = (await up.state()).requests.length;
      j.note(`the call afterwards: ${still.body?.phase}; upstream requests: ${sent}`);
      j.expect(
        answers.every((s) => s === 404),
        "every cross-tenant id must answer 404",
      );
      if (waiting.status === "awaiting_approval") {
        j.expect(still.body?.phase === "awaiting_approval", "another tenant decided the approval");
        j.expect(sent === 0, "another tenant's decision sent the call");
      }
      return j.evidence;
    },
  },
];
