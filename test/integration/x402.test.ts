// x402 pay-once (issue 37 item 2), through the public API against the fake merchant, facilitator
// and signer of demo/x402-merchant.ts: one signed payment per operation, stored before it is sent
// and resent on every retry; a lost answer is outcome_unknown and settled by the same payment; a
// requirement the tool did not declare is refused with nothing signed; above approval_over a person
// decides before anything is signed; the signer's request is signed with the tenant's secret.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { Toolgate } from "../../src/client/index.ts";
import { Webhook } from "standardwebhooks";
import {
  api,
  fireAlarm,
  REFUSED_URL,
  manifest,
  operation,
  setup,
  testTenant,
  trace,
  turn,
  unique,
  until,
  upstream,
} from "../support/api.ts";
import { consoleAs, consolePage, consoleSession, hidden } from "../support/console-page.ts";
import { SoftAuthenticator } from "../support/soft-authenticator.ts";
import { MERCHANT_PAY_TO, TEST_ASSET, TEST_NETWORK } from "../../demo/x402-merchant.ts";

const SIGNER = "/webhooks/x402-signer";
const worker = (exports as unknown as { default: Fetcher }).default;
const args = { amount: 1, currency: "usd" };
/** What the merchant asks by default, as a payment's approval shows it. */
const ASKED = {
  amount: "10000",
  asset: TEST_ASSET,
  network: TEST_NETWORK,
  pay_to: MERCHANT_PAY_TO,
};
/** The pending inbox item of operation `op` (GET /v1/approvals). */
const inboxItem = async (op: string) =>
  (await api("GET", "/v1/approvals?state=pending&limit=100")).body.items.find(
    (i: { operation_id: string }) => i.operation_id === op,
  );
/** The card of operation `op` (its <article>) on a console inbox page, or "" when absent. */
function cardIn(html: string, op: string) {
  const start = html.indexOf(`<article class="item" id="${op}"`);
  return start < 0 ? "" : html.slice(start, html.indexOf("</article>", start));
}
const cardOf = async (op: string) => cardIn(await consolePage("/console/approvals"), op);
/** A card's approve form as the browser posts it (its first form's hidden fields). */
const approveForm = (card: string) => ({
  input_hash: hidden(card, "input_hash"),
  policy_version: hidden(card, "policy_version"),
  approval_hash: hidden(card, "approval_hash"),
  reason: "",
});
/** A tool that asks a person anyway, paying over approval_over: its call, awaiting its own approval. */
async function askedTwice() {
  const paid = await paidTool({ approval_over: "5000" }, { approval: { mode: "always" } });
  const res = await turn(paid.run.runId, [{ id: "c1", name: paid.run.name, arguments: args }]);
  expect(res.body.results[0]).toMatchObject({ status: "awaiting_approval" });
  return { ...paid, op: res.body.results[0].operation_id as string };
}
/** Once approved, the call ran and paid once: one signature, one settlement, one effect. */
async function paidOnce(op: string, seen: Awaited<ReturnType<typeof paidTool>>["seen"]) {
  expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
  expect(await seen()).toMatchObject({
    signatures: [{}],
    settlements: [expect.anything()],
    effects: 1,
  });
}
/** The call's own approval decided: its 402 has asked again, for the payment. */
const paymentAsked = (op: string) =>
  until(
    async () => (await operation(op)).body,
    (v) => v.phase === "awaiting_approval" && v.approval?.payment !== undefined,
  );

/** A paid tool on a fresh namespace, its signer secret stored at the tenant first (runs carry it). */
async function paidTool(
  payment: Record<string, unknown> = {},
  extra: Record<string, unknown> | ((url: string) => Record<string, unknown>) = {},
  signerUrl = (url: string) => `${url}${SIGNER}`,
) {
  const up = upstream();
  const secretName = unique("SIGNER").toUpperCase();
  const secret = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
  expect((await api("PUT", `/v1/secrets/${secretName}`, { value: secret })).status).toBeLessThan(
    300,
  );
  const tool = manifest({
    url: up.url,
    request: { method: "POST", url: `${up.url}/x402/reports` },
    payment: {
      protocol: "x402",
      max_amount: "50000",
      asset: TEST_ASSET,
      pay_to: MERCHANT_PAY_TO,
      signer: { url: signerUrl(up.url), secret: secretName },
      ...payment,
    },
    ...(typeof extra === "function" ? extra(up.url) : extra),
  });
  const run = await setup(tool);
  /** What the merchant and the signer saw. */
  const seen = async () => {
    const state = await up.state();
    const merchant = state.requests.filter((r) => r.path.startsWith("/x402/"));
    return {
      signatures: state.requests.filter((r) => r.path === SIGNER),
      settlements: (state as unknown as { x402: { settlements: string[] } }).x402.settlements,
      effects: state.effects.length,
      unpaid: merchant.filter((r) => !r.headers["payment-signature"]).length,
      paid: merchant
        .filter((r) => r.headers["payment-signature"])
        .map((r) => r.headers["payment-signature"]),
    };
  };
  return { up, run, secret, seen };
}

/** POST /_control/<what> of the tool's upstream namespace (the merchant's config, the signer's hold). */
const control = (up: { url: string }, what: string, body: unknown) =>
  fetch(up.url.replace(/\/ns\/([^/]+)$/, `/_control/${what}?ns=$1`), {
    method: "POST",
    body: JSON.stringify(body),
  });

/**
 * A call whose signer holds its answer while `meanwhile` runs (the 402 and the signer's ask have
 * arrived by then): the turn's response once the signer answered.
 */
async function whileSigning(
  paid: Awaited<ReturnType<typeof paidTool>>,
  meanwhile: () => Promise<unknown>,
) {
  await control(paid.up, "x402-signer", { hold: true });
  const pending = turn(paid.run.runId, [{ id: "c1", name: paid.run.name, arguments: args }]);
  await paid.up.waitForRequests(2);
  expect((await paid.seen()).signatures).toHaveLength(1);
  await meanwhile();
  await control(paid.up, "x402-signer", { hold: false });
  return (await pending).body.results[0];
}

describe("x402 pay-once", { timeout: 30_000 }, () => {
  it("a 402 then success: one signature, one settlement, one effect; the settlement is recorded", async () => {
    const { run, seen } = await paidTool();
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    expect(res.body.results[0]).toMatchObject({ status: "succeeded" });
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
    expect(s.unpaid).toBe(1);
    expect(s.paid).toHaveLength(1);
    const events = await trace(run.runId);
    expect(events.filter((e) => e.type === "payment").map((e) => e.what)).toEqual([
      "required",
      "signed",
    ]);
    const last = events.filter((e) => e.type === "attempt_finished").at(-1)!;
    expect(last.response.headers["payment-response"]).toBeTruthy();
    // The settlement is recorded with the operation, decoded; the signed payload never shown.
    const view = (await operation(res.body.results[0].operation_id)).body;
    expect(view.payment).toMatchObject({
      amount: "10000",
      asset: TEST_ASSET,
      pay_to: MERCHANT_PAY_TO,
      signed: true,
      payment_id: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      settlement: { success: true, transaction: "0xtx00000001", network: "eip155:84532" },
    });
    expect(JSON.stringify(events)).not.toContain(s.paid[0]);
  });

  it("the signer's request is signed per Standard Webhooks with the tenant's secret, and names the operation and requirement", async () => {
    const { run, secret, seen } = await paidTool();
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const [asked] = (await seen()).signatures;
    const headers = asked!.headers as Record<string, string>;
    const body = new Webhook(secret).verify(asked!.raw!, headers) as Record<string, any>;
    expect(body).toMatchObject({
      type: "x402.payment.sign",
      operation_id: res.body.results[0].operation_id,
      tool: run.name,
      accepted: { amount: "10000", asset: TEST_ASSET, payTo: MERCHANT_PAY_TO },
    });
    const other = `whsec_${btoa("another secret, 32 bytes long!!!")}`;
    expect(() => new Webhook(other).verify(asked!.raw!, headers)).toThrow();
  });

  it("the paid answer lost after the merchant settled: outcome_unknown, then settled by the same payment, never signed again", async () => {
    const { up, run, seen } = await paidTool();
    await up.script({ kind: "ok" }, { kind: "commit_then_hang" });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    expect(res.body.results[0]).toMatchObject({ status: "outcome_unknown" });
    expect((await seen()).settlements).toHaveLength(1);

    expect(await fireAlarm(op)).toBe(true);
    const settled = await operation(op, 5);
    expect(settled.body.result).toMatchObject({ status: "succeeded" });
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
    // The resend carried the very payment first sent.
    expect(s.paid).toHaveLength(2);
    expect(s.paid[1]).toBe(s.paid[0]);
    expect(settled.body.payment.settlement).toMatchObject({
      success: true,
      transaction: "0xtx00000001",
    });
  });

  it("5 re-posts and 5 re-proposals of the same call: one payment", async () => {
    const { run, seen } = await paidTool();
    const call = (id: string) => turn(run.runId, [{ id, name: run.name, arguments: args }]);
    const posts = await Promise.all([1, 2, 3, 4, 5].map(() => call("c1")));
    const proposals = await Promise.all([2, 3, 4, 5, 6].map((n) => call(`c${n}`)));
    const results = [...posts, ...proposals].map((r) => r.body.results[0]);
    expect(new Set(results.map((r) => r.operation_id)).size).toBe(1);
    expect(results.every((r) => r.status === "succeeded")).toBe(true);
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
    expect(s.unpaid).toBe(1);
  });

  for (const [what, config] of [
    ["above max_amount", { amount: "50001" }],
    ["to another pay-to", { payTo: "0x00000000000000000000000000000000000000cc" }],
    ["in another asset", { asset: "0x00000000000000000000000000000000000000dd" }],
    ["in a scheme toolgate does not know", { scheme: "upto" }],
  ] as const)
    it(`a requirement ${what}: refused, nothing signed, nothing paid, the model told so`, async () => {
      const { up, run, seen } = await paidTool();
      await control(up, "x402", config);
      const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
      expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "payment_refused" });
      expect(res.body.results[0].message).toMatch(
        /Nothing was paid and the call was not performed/,
      );
      const s = await seen();
      expect(s.signatures).toHaveLength(0);
      expect(s.settlements).toHaveLength(0);
      expect(s.effects).toBe(0);
      expect(s.paid).toHaveLength(0);
    });

  it("over approval_over: waits for a person with nothing signed; approved → signed once and paid once", async () => {
    const { run, seen } = await paidTool({ approval_over: "5000" });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    expect(res.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    expect((await seen()).signatures).toHaveLength(0);
    expect((await seen()).unpaid).toBe(1);
    // The arguments a payment was accepted for are not edited on approval.
    const inputHash = (await operation(op)).body.input_hash as string;
    const edited = await api("POST", `/v1/operations/${op}/approve`, {
      input_hash: inputHash,
      arguments: { ...args, amount: 2 },
    });
    expect([edited.status, edited.body.code, edited.body.field]).toEqual([
      422,
      "field_not_editable",
      "payment",
    ]);
    expect((await seen()).signatures).toHaveLength(0);

    const decided = await api("POST", `/v1/operations/${op}/approve`, { reason: "worth it" });
    expect(decided.status).toBe(200);
    expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
  });

  it("a rejected payment approval: nothing signed, nothing paid", async () => {
    const { run, seen } = await paidTool({ approval_over: "5000" });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    await api("POST", `/v1/operations/${op}/reject`, { reason: "too dear" });
    expect((await operation(op)).body.result).toMatchObject({
      status: "rejected",
      code: "approval_rejected",
    });
    const s = await seen();
    expect(s.signatures).toHaveLength(0);
    expect(s.settlements).toHaveLength(0);
  });

  it("the manifest's payment is strict: unknown fields, approval_over at or above max_amount, a float amount, a private signer are refused", async () => {
    const up = upstream();
    const base = {
      protocol: "x402",
      max_amount: "100",
      asset: TEST_ASSET,
      signer: { url: `${up.url}${SIGNER}`, secret: "S" },
    };
    for (const payment of [
      { ...base, currency: "usd" },
      { ...base, approval_over: "100" },
      { ...base, max_amount: "1.5" },
      { ...base, max_amount: 100 },
      { ...base, protocol: "mpp" },
      { ...base, signer: { url: "https://10.0.0.1/sign", secret: "S" } },
    ]) {
      const tool = manifest({ url: up.url, payment });
      const put = await api("PUT", `/v1/tools/${tool.name}`, tool);
      expect([put.status, put.body.code]).toEqual([
        put.status,
        expect.stringMatching(/^(invalid_manifest|upstream_not_allowed)$/),
      ]);
      expect(put.status).toBeGreaterThanOrEqual(400);
    }
    // `{payment_id}` is the payment's: never an argument of a paid tool.
    const shadowing = manifest({
      url: up.url,
      payment: base,
      input_schema: { type: "object", properties: { payment_id: { type: "string" } } },
    });
    expect((await api("PUT", `/v1/tools/${shadowing.name}`, shadowing)).body.code).toBe(
      "invalid_manifest",
    );
  });

  it("payments are reserved against a limit across runs before signing: over it, refused with nothing signed", async () => {
    const limit = unique("spend");
    const { run, seen } = await paidTool(
      {},
      {
        limits_across_runs: [
          { name: limit, subject: "tenant", window: "24h", payment: true, max: 15000 },
        ],
      },
    );
    const first = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    expect(first.body.results[0]).toMatchObject({ status: "succeeded" });
    // Another run of the same tenant: the window already holds 10000 of 15000.
    const other = await api("POST", "/v1/runs", {
      user: { id: "u2", scopes: [] },
      tools: [run.name],
    });
    const second = await turn(other.body.run_id, [
      { id: "c1", name: run.name, arguments: { ...args, amount: 2 } },
    ]);
    expect(second.body.results[0]).toMatchObject({ status: "rejected", code: "payment_refused" });
    expect(second.body.results[0].message).toMatch(new RegExp(`over the limit ${limit}`));
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
  });

  it("the merchant refuses the signed payment: failed payment_failed, never signed again", async () => {
    const { up, run, seen } = await paidTool();
    await up.script({ kind: "ok" }, { kind: "status", status: 402 });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    expect(res.body.results[0]).toMatchObject({ status: "failed", code: "payment_failed" });
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(0);
    expect(s.effects).toBe(0);
  });

  it("a signer that cannot be reached sends nothing and is asked again later; one that answers no payload fails the call unpaid", async () => {
    const down = await paidTool({}, {}, () => `${REFUSED_URL}/sign`);
    const waiting = await turn(down.run.runId, [
      { id: "c1", name: down.run.name, arguments: args },
    ]);
    expect(waiting.body.results[0]).toMatchObject({ status: "pending" });
    const op = waiting.body.results[0].operation_id as string;
    expect((await operation(op)).body).toMatchObject({
      phase: "retry_scheduled",
      payment: { signed: false },
    });
    expect(await down.seen()).toMatchObject({ paid: [], settlements: [], effects: 0, unpaid: 1 });

    // An endpoint that answers 200 without a payment payload (the upstream's plain write).
    const wrong = await paidTool({}, {}, (url) => `${url}/webhooks/not-a-signer`);
    const res = await turn(wrong.run.runId, [{ id: "c1", name: wrong.run.name, arguments: args }]);
    expect(res.body.results[0]).toMatchObject({ status: "failed", code: "permanent_failure" });
    expect(res.body.results[0].message).toMatch(
      /payment signer: answered no x402 v2 payment_payload/,
    );
    expect(await wrong.seen()).toMatchObject({ paid: [], settlements: [], unpaid: 1 });
  });

  it("a tool with no key and a lookup by payment id: the lost paid answer is outcome_unknown, settled by asking the merchant for that payment", async () => {
    const { up, run, seen } = await paidTool({}, (url) => ({
      idempotency: { mode: "none" },
      reconcile: { method: "GET", url: `${url}/x402/payments/{payment_id}` },
    }));
    await up.script({ kind: "ok" }, { kind: "commit_then_hang" });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    const settled = await operation(op, 5);
    expect(settled.body.result).toMatchObject({ status: "succeeded" });
    const events = await trace(run.runId);
    expect(events.some((e) => e.type === "outcome_unknown")).toBe(true);
    expect(events.filter((e) => e.type === "reconcile_finished").at(-1)).toMatchObject({
      found: "found",
    });
    const s = await seen();
    const lookups = (await up.state()).requests.filter((r) => r.path.startsWith("/x402/payments/"));
    expect(lookups.map((r) => r.path)).toEqual([
      `/x402/payments/${settled.body.payment.payment_id}`,
    ]);
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
    expect(s.paid).toHaveLength(1);
  });

  it("the run's spend budget (a payment limit per run): over it in this run, refused unsigned; another run has its own", async () => {
    const { run, seen } = await paidTool(
      {},
      {
        limits_across_runs: [
          { name: unique("run_spend"), subject: "run", window: "31d", payment: true, max: 15000 },
        ],
      },
    );
    const call = (runId: string, amount: number) =>
      turn(runId, [{ id: `c${amount}`, name: run.name, arguments: { ...args, amount } }]);
    expect((await call(run.runId, 1)).body.results[0].status).toBe("succeeded");
    expect((await call(run.runId, 2)).body.results[0]).toMatchObject({
      status: "rejected",
      code: "payment_refused",
    });
    const other = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: [] },
      tools: [run.name],
    });
    expect((await call(other.body.run_id, 3)).body.results[0].status).toBe("succeeded");
    const s = await seen();
    expect(s.signatures).toHaveLength(2);
    expect(s.settlements).toHaveLength(2);
    // A per-run count is for payments only.
    const plain = manifest({
      url: "http://127.0.0.1:1",
      limits_across_runs: [
        { name: unique("n"), subject: "run", window: "1h", count: true, max: 1 },
      ],
    });
    expect((await api("PUT", `/v1/tools/${plain.name}`, plain)).body.code).toBe("invalid_manifest");
  });
  it("a refuse freeze PUT while the signer holds its answer: the payment is stored, never sent; nothing paid, the model told so", async () => {
    const paid = await paidTool();
    const id = unique("fz");
    const result = await whileSigning(paid, async () => {
      const put = await api("PUT", `/v1/freezes/${id}`, {
        scope: { tool: paid.run.name },
        mode: "refuse",
        reason: "spend spike",
      });
      expect(put.status).toBe(201);
    });
    expect(result).toMatchObject({ status: "rejected", code: "frozen" });
    expect(result.message).toMatch(/A payment was signed for it but never sent: nothing was paid/);
    const s = await paid.seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(0);
    expect(s.paid).toHaveLength(0);
    expect(s.effects).toBe(0);
    expect((await operation(result.operation_id)).body.payment).toMatchObject({ signed: true });
    const events = await trace(paid.run.runId);
    expect(events.filter((e) => e.type === "payment").map((e) => e.what)).toEqual([
      "required",
      "signed",
      "unsent",
    ]);
    await api("DELETE", `/v1/freezes/${id}`);
  });

  it("the run's scopes revoked while signing: rejected forbidden, the payment never sent", async () => {
    const paid = await paidTool({}, { requires_scopes: ["payments:charge"] });
    const scoped = await api("POST", "/v1/runs", {
      user: { id: "u1", scopes: ["payments:charge"] },
      tools: [paid.run.name],
    });
    const runId = scoped.body.run_id as string;
    const result = await whileSigning({ ...paid, run: { ...paid.run, runId } }, async () => {
      expect((await api("PATCH", `/v1/runs/${runId}`, { user: { scopes: [] } })).status).toBe(200);
    });
    expect(result).toMatchObject({ status: "rejected", code: "forbidden" });
    expect(result.message).toMatch(/never sent: nothing was paid/);
    expect(await paid.seen()).toMatchObject({ paid: [], settlements: [], effects: 0 });
  });

  it("the run cancelled while signing: cancelled, the payment never sent", async () => {
    const paid = await paidTool();
    const result = await whileSigning(paid, async () => {
      expect((await api("POST", `/v1/runs/${paid.run.runId}/cancel`, {})).status).toBe(200);
    });
    const op = result.operation_id as string;
    expect((await operation(op, 5)).body.result).toMatchObject({ status: "cancelled" });
    expect(await paid.seen()).toMatchObject({ paid: [], settlements: [], effects: 0 });
  });

  it("a hold freeze PUT while signing: held with the payment unsent; the lift sends that same payment once, never signed again", async () => {
    const paid = await paidTool();
    const id = unique("fz");
    const result = await whileSigning(paid, () =>
      api("PUT", `/v1/freezes/${id}`, {
        scope: { tool: paid.run.name },
        mode: "hold",
        reason: "r",
      }),
    );
    const op = result.operation_id as string;
    expect((await operation(op)).body.phase).toBe("held");
    expect(await paid.seen()).toMatchObject({ paid: [], settlements: [], effects: 0 });
    expect((await api("DELETE", `/v1/freezes/${id}`)).status).toBe(200);
    await fireAlarm(op);
    expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
    const s = await paid.seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.paid).toHaveLength(1);
    expect(s.effects).toBe(1);
  });
  it("a payment's approval shows what it pays (the inbox, the approval, the console card) and covers only that: another amount asked after it is refused, never re-signed", async () => {
    const { up, run, seen } = await paidTool({ approval_over: "5000" });
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    expect(res.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    expect((await inboxItem(op))?.payment).toEqual(ASKED);
    expect((await api("GET", `/v1/approvals/${op}`)).body.payment).toEqual(ASKED);
    expect((await operation(op)).body.approval.payment).toEqual(ASKED);
    const card = await cardOf(op);
    expect(card).toContain('data-role="payment"');
    expect(card).toContain("10000 (atomic units)");
    expect(card).toContain(MERCHANT_PAY_TO);
    // The merchant asks for twice as much once the person approved 10000: that is not approved.
    await control(up, "x402", { amount: "20000" });
    expect((await api("POST", `/v1/operations/${op}/approve`, {})).status).toBe(200);
    expect((await operation(op, 5)).body.result).toMatchObject({
      status: "failed",
      code: "payment_failed",
    });
    const s = await seen();
    expect(s.signatures.map((r) => r.body.accepted.amount)).toEqual(["10000"]);
    expect(s.settlements).toHaveLength(0);
    expect(s.effects).toBe(0);
  });

  it("a tool that asks a person anyway: approved, then its 402 asks again for the payment — a second decision, the first not reused, nothing signed before it", async () => {
    const { run, seen } = await paidTool(
      { approval_over: "5000" },
      { approval: { mode: "always" } },
    );
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    expect(res.body.results[0]).toMatchObject({ status: "awaiting_approval" });
    expect((await api("GET", `/v1/approvals/${op}`)).body.payment).toBeUndefined();
    const first = await api("POST", `/v1/operations/${op}/approve`, { reason: "the call" });
    // The answer is this decision's, even when the 402 asks again before it is written.
    expect(first.status).toBe(200);
    expect(first.body.approval).toMatchObject({ state: "approved", reason: "the call" });
    const reopened = await until(
      async () => (await operation(op)).body,
      (v) => v.phase === "awaiting_approval" && v.approval?.payment !== undefined,
    );
    expect(reopened.approval).toMatchObject({
      state: "pending",
      decided_by: null,
      reason: null,
      payment: ASKED,
    });
    expect(await inboxItem(op)).toMatchObject({
      state: "pending",
      decided_by: null,
      payment: ASKED,
    });
    expect(await seen()).toMatchObject({ signatures: [], paid: [], unpaid: 1 });

    // The typed client's approve binds to the approval pending now: the payment's own hash.
    const client = new Toolgate({
      baseUrl: "http://toolgate.test",
      apiKey: (await testTenant()).key,
      fetch: ((url: string | URL, init?: RequestInit) =>
        worker.fetch(new Request(url, init))) as typeof fetch,
      attempts: 1,
    });
    const second = await client.approve(op, { reason: "the payment" });
    expect(second.approval).toMatchObject({ state: "approved", reason: "the payment" });
    expect((await operation(op, 5)).body.result).toMatchObject({ status: "succeeded" });
    const s = await seen();
    expect(s.signatures).toHaveLength(1);
    expect(s.settlements).toHaveLength(1);
    expect(s.effects).toBe(1);
    const decided = (await trace(run.runId)).filter((e) => e.type === "approval_decided");
    expect(decided.map((e) => e.reason)).toEqual(["the call", "the payment"]);
  });
  it("a batch item for the call's own approval, sent again once its payment's is pending: skipped, nothing signed; the payment's item as listed approves it, paid once", async () => {
    const { op, seen } = await askedTwice();
    const first = await inboxItem(op);
    expect(first.approval_hash).toBe(first.input_hash);
    const item = {
      operation_id: op,
      input_hash: first.input_hash,
      approval_hash: first.approval_hash,
      decision: "approve",
      reason: "the call",
    };
    const once = await api("POST", "/v1/approvals/batch", [item]);
    // Decided as the call's approval, even when its 402 asks again before the answer is written.
    expect(once.body.items[0]).toMatchObject({ result: "decided", state: "approved" });
    await paymentAsked(op);

    // The same batch again (a client's retry): it was for the call, not for what it now pays.
    const again = await api("POST", "/v1/approvals/batch", [item]);
    expect(again.body.items[0]).toMatchObject({
      result: "skipped",
      reason: "approval_hash_changed",
    });
    // Nor does an item or a decision naming only the arguments (no approval_hash): a payment's is not theirs.
    const { approval_hash: _named, ...argumentsOnly } = item;
    const bare = await api("POST", "/v1/approvals/batch", [argumentsOnly]);
    expect(bare.body.items[0]).toMatchObject({
      result: "skipped",
      reason: "approval_hash_changed",
    });
    const single = await api("POST", `/v1/operations/${op}/approve`, {
      input_hash: first.input_hash,
    });
    expect([single.status, single.body.code]).toEqual([409, "approval_mismatch"]);
    expect(await seen()).toMatchObject({ signatures: [], settlements: [], paid: [], unpaid: 1 });
    expect((await operation(op)).body.approval).toMatchObject({ state: "pending", payment: ASKED });

    // The payment's own request, as GET /v1/approvals lists it: the same arguments, its own hash.
    const listed = await until(
      () => inboxItem(op),
      (i) => i?.payment !== undefined,
    );
    expect(listed).toMatchObject({ state: "pending", input_hash: first.input_hash });
    expect(listed.approval_hash).not.toBe(first.approval_hash);
    expect((await api("GET", `/v1/approvals/${op}`)).body.approval_hash).toBe(listed.approval_hash);
    expect((await operation(op)).body.approval.approval_hash).toBe(listed.approval_hash);
    const payment = { ...item, approval_hash: listed.approval_hash, reason: "the payment" };
    const decided = await api("POST", "/v1/approvals/batch", [payment]);
    expect(decided.body.items[0]).toMatchObject({ result: "decided", state: "approved" });
    await paidOnce(op, seen);
  });

  it("the console: the call's approve form posted twice does not approve its payment; the payment's card does, paid once", async () => {
    const { op, seen } = await askedTwice();
    const people = await consoleAs((await testTenant()).key);
    const form = approveForm(cardIn((await people.get("/console/approvals")).text, op));
    expect(form.approval_hash).toBe(form.input_hash);
    expect((await people.post(`/console/approvals/${op}/approve`, form)).status).toBe(303);
    // Told it was approved (the payment's request that follows is not what was decided here).
    expect((await people.get("/console/approvals")).text).toContain("It runs once now");
    await paymentAsked(op);

    // The same form again (a double submit, a browser resending it): refused, nothing decided.
    expect((await people.post(`/console/approvals/${op}/approve`, form)).status).toBe(303);
    const page = (await people.get("/console/approvals")).text;
    expect(page).toContain("another approval than the one pending");
    expect(await seen()).toMatchObject({ signatures: [], settlements: [], paid: [] });
    expect((await operation(op)).body.approval).toMatchObject({ state: "pending", payment: ASKED });

    // The payment's card, as shown now, carries its own hash and approves it.
    const card = cardIn(page, op);
    expect(card).toContain('data-role="payment"');
    const second = approveForm(card);
    expect(second.input_hash).toBe(form.input_hash);
    expect(second.approval_hash).not.toBe(form.approval_hash);
    expect((await people.post(`/console/approvals/${op}/approve`, second)).status).toBe(303);
    await paidOnce(op, seen);
  });

  it("a passkey step-up tool: the payment's approval has its own challenge; an assertion made for the call's own approval does not approve the payment", async () => {
    // "test" (the shared key's name, the decider) registers a passkey in the console.
    const [origin, rpId] = ["http://toolgate.test", "toolgate.test"];
    const people = await consoleSession();
    const passkey = await SoftAuthenticator.create();
    const options = JSON.parse(await people.get("/console/passkeys/options"));
    const made = await passkey.register(options, origin);
    expect(
      (await people.post("/console/passkeys", [["response", JSON.stringify(made)]])).status,
    ).toBe(303);
    const { run, seen } = await paidTool(
      { approval_over: "5000" },
      { risk: "irreversible_write", approval: { mode: "always", step_up: "passkey" } },
    );
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const op = res.body.results[0].operation_id as string;
    const call = (await operation(op)).body.approval;
    const approve = (body: Record<string, unknown>) =>
      api("POST", `/v1/operations/${op}/approve`, body);
    const forCall = await passkey.assert(call.step_up.challenge, rpId, origin);
    expect((await approve({ input_hash: call.input_hash, passkey: forCall })).status).toBe(200);
    const asked = (await paymentAsked(op)).approval;
    expect(asked.step_up.challenge).not.toBe(call.step_up.challenge);

    // A fresh assertion over the call's challenge, aimed at the payment: the challenge is not its.
    const again = await passkey.assert(call.step_up.challenge, rpId, origin);
    const aimed = await approve({
      input_hash: asked.input_hash,
      approval_hash: asked.approval_hash,
      passkey: again,
    });
    expect([aimed.status, aimed.body.code]).toEqual([401, "step_up_failed"]);
    // Verified for the call's approval, it names that one: not the payment pending now.
    const stale = await approve({
      input_hash: call.input_hash,
      passkey: await passkey.assert(call.step_up.challenge, rpId, origin),
    });
    expect([stale.status, stale.body.code]).toEqual([409, "approval_mismatch"]);
    expect(await seen()).toMatchObject({ signatures: [], settlements: [], paid: [] });

    const forPayment = await passkey.assert(asked.step_up.challenge, rpId, origin);
    const paid = await approve({
      input_hash: asked.input_hash,
      approval_hash: asked.approval_hash,
      passkey: forPayment,
    });
    expect(paid.status).toBe(200);
    await paidOnce(op, seen);
  });

  it("the model's result of a paid call carries what it paid and the merchant's settlement, never the payload; a resent payment's too", async () => {
    const { run, seen } = await paidTool();
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    const result = res.body.results[0];
    expect(result).toMatchObject({ status: "succeeded" });
    const paidFor = {
      ...ASKED,
      payment_id: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      settlement: { success: true, transaction: "0xtx00000001", network: TEST_NETWORK },
    };
    expect(result.payment).toEqual(paidFor);
    const s = await seen();
    expect(JSON.stringify(result)).not.toContain(s.paid[0]);
    expect(JSON.stringify(result)).not.toContain("signed-by-the-test-signer");
    expect(JSON.stringify(result)).not.toContain("payer");
    // A re-post reads the same, from the stored operation.
    const again = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    expect(again.body.results[0].payment).toEqual(result.payment);

    // Lost after the merchant settled, then resent: the replayed answer's settlement is the result's.
    const lost = await paidTool();
    await lost.up.script({ kind: "ok" }, { kind: "commit_then_hang" });
    const unknown = await turn(lost.run.runId, [
      { id: "c1", name: lost.run.name, arguments: args },
    ]);
    const op = unknown.body.results[0].operation_id as string;
    expect(unknown.body.results[0].payment).toBeUndefined();
    await fireAlarm(op);
    expect((await operation(op, 5)).body.result.payment).toMatchObject({
      settlement: { success: true, transaction: "0xtx00000001" },
    });
  });
  it("two payment limits, the second refuses: the first's reservation is released, nothing signed", async () => {
    const [roomy, tight] = [unique("spend"), unique("per_user")];
    const { run, seen } = await paidTool(
      {},
      {
        limits_across_runs: [
          { name: roomy, subject: "tenant", window: "24h", payment: true, max: 1_000_000 },
          { name: tight, subject: "user", window: "24h", payment: true, max: 5000 },
        ],
      },
    );
    const res = await turn(run.runId, [{ id: "c1", name: run.name, arguments: args }]);
    expect(res.body.results[0]).toMatchObject({ status: "rejected", code: "payment_refused" });
    expect(res.body.results[0].message).toMatch(new RegExp(`over the limit ${tight}`));
    const first = await api("GET", `/v1/limits/${roomy}/tenant`);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ used: 0, remaining: 1_000_000 });
    expect((await api("GET", `/v1/limits/${tight}/user:u1`)).body).toMatchObject({ used: 0 });
    expect(await seen()).toMatchObject({ signatures: [], paid: [], settlements: [] });
  });
});
