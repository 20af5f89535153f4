// x402 pay-once (issue 37 item 2), through the public API against the fake merchant, facilitator
// and signer of demo/x402-merchant.ts: one signed payment per operation, stored before it is sent
// and resent on every retry; a lost answer is outcome_unknown and settled by the same payment; a
// requirement the tool did not declare is refused with nothing signed; above approval_over a person
// decides before anything is signed; the signer's request is signed with the tenant's secret.
import { describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import {
  api,
  fireAlarm,
  manifest,
  operation,
  setup,
  trace,
  turn,
  unique,
  upstream,
} from "../support/api.ts";
import { MERCHANT_PAY_TO, TEST_ASSET } from "../../demo/x402-merchant.ts";

const SIGNER = "/webhooks/x402-signer";
const args = { amount: 1, currency: "usd" };

/** A paid tool on a fresh namespace, its signer secret stored at the tenant first (runs carry it). */
async function paidTool(payment: Record<string, unknown> = {}) {
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
      signer: { url: `${up.url}${SIGNER}`, secret: secretName },
      ...payment,
    },
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
  });
});
