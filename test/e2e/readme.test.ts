// The README's walkthrough, run as `npm start` prints it: scripts/lib/walkthrough.mjs rendered with
// a real demo tenant, run and shop (its own upstream and sandbox; the shared `wrangler dev`), pasted
// into bash in one go. The steps' promises are checked on what they printed and on the shop's own
// ledger. Then the README's Cedar block, verbatim, with the demo key: stored, every other tool
// still usable, a big refund refused.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startUpstream } from "../../demo/upstream.ts";
import {
  call,
  createRun,
  DEMO_SHOP_API_KEY,
  DEV_VARS,
  registerDemo,
  verifyDemo,
} from "../../scripts/lib/dev-server.mjs";
import { README, walkthrough } from "../../scripts/lib/walkthrough.mjs";
import { e2eServer } from "../support/e2e.ts";

const { toolgateUrl } = e2eServer();
let shop: Awaited<ReturnType<typeof startUpstream>>;
let sandbox: Awaited<ReturnType<typeof startUpstream>>;
let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  shop = await startUpstream();
  sandbox = await startUpstream();
  demo = await registerDemo(toolgateUrl, shop.url);
  await verifyDemo(toolgateUrl, demo.key, sandbox.url);
});

afterAll(async () => {
  await Promise.all([shop?.close(), sandbox?.close()]);
});

const bash = async (script: string) => {
  const { stdout, stderr } = await promisify(execFile)(
    "bash",
    ["-e", "-o", "pipefail", "-c", script],
    {
      timeout: 120_000,
    },
  );
  return { stdout, stderr };
};

describe("README walkthrough, as npm start prints it", () => {
  it("every step keeps its promise", async () => {
    const script = walkthrough({
      TG: toolgateUrl,
      UP: shop.url,
      TENANT: demo.tenantId,
      ADMIN: DEV_VARS.TOOLGATE_ADMIN_TOKEN!,
      KEY: demo.key,
      RUN: demo.run.run_id,
      RT: demo.run.run_token,
    });
    const { stdout, stderr } = await bash(script);
    const lines = stdout.trim().split("\n");
    // 0: names and fingerprints; toolgate never answers with the value.
    expect(lines[0]).toMatch(/^\{"name":"SHOP_API_KEY","fingerprint":"hmac:/);
    expect(stderr).not.toContain(DEMO_SHOP_API_KEY);
    // 1: the charge ran once; the shop got the tenant's secret.
    expect(stderr).toMatch(/"status":"settled".*"result":\{"id":"eff_1"/);
    expect(lines[1]).toBe(`"Bearer ${DEMO_SHOP_API_KEY}"`);
    // 2 and 3: the stored result, one charge.
    expect(lines.slice(2, 5)).toEqual(['"eff_1"', '"eff_1"', "1"]);
    // 4: outcome_unknown, then reconciled with the shop's stored charge, one per key.
    expect(stderr).toMatch(/"status":"outcome_unknown".*"code":"timeout_unknown"/);
    expect(lines.slice(5, 8)).toEqual([
      '{"queued":1}',
      '{"phase":"recorded","status":"succeeded","charge":"eff_2"}',
      "[1,1]",
    ]);
    // 5: a 503, then one charge.
    expect(lines.slice(8, 10)).toEqual(['{"queued":1}', '{"status":"succeeded","charge":"eff_3"}']);
    // 6: the sandbox verdict.
    expect(lines[10]).toBe(
      '{"status":"verified_sandbox_only","summary":"verified against the sandbox only: runs treat it as unverified"}',
    );
    // 7: the undo, approved, refunds the first charge once.
    expect(lines[11]).toMatch(/^\{"phase":/);
    expect(lines[12]).toBe('{"phase":"recorded","status":"succeeded"}');
    expect(JSON.parse(lines[13]!)).toMatchObject({ body: { charge_id: "eff_1", amount: 500 } });
    // 8: the trace.
    expect(lines.slice(14).length).toBeGreaterThan(10);
    // The shop's ledger: three charges and one refund, one effect per key.
    const state = (await (await fetch(`${shop.url}/_control/state`)).json()) as {
      effects: unknown[];
      effectsByKey: Record<string, number>;
    };
    expect(state.effects).toHaveLength(4);
    expect(Object.values(state.effectsByKey)).toEqual([1, 1, 1, 1]);
  });
});

describe("README Cedar example, with the demo key", () => {
  it("is stored, keeps every other tool usable and refuses a big refund", async () => {
    const text = readFileSync(README, "utf8");
    const from = text.indexOf("### Policy sets (Cedar)");
    const block = text.slice(from).match(/```sh\n([\s\S]*?)```/)![1]!;
    const { stdout } = await bash(`TG=${toolgateUrl}; KEY='${demo.key}'\n${block}`);
    expect(JSON.parse(stdout)).toMatchObject({ version: expect.stringMatching(/^cedar_/) });
    try {
      // A run created after the PUT sees the set at once.
      const run = await createRun(toolgateUrl, demo.key, [
        "charge_card",
        "lookup_order",
        "refund_order",
      ]);
      const turn = await call(toolgateUrl, "POST", `/v1/runs/${run.run_id}/turns`, run.run_token, {
        calls: [
          { id: "c1", name: "charge_card", arguments: { amount: 100, currency: "usd" } },
          { id: "c2", name: "lookup_order", arguments: { order_id: "ord_1" } },
          {
            id: "c3",
            name: "refund_order",
            arguments: { order_id: "ord_1", amount: 600, reason: "other" },
          },
        ],
      });
      const [charge, lookup, refund] = turn.body.results;
      expect(charge).toMatchObject({ status: "succeeded" });
      expect(lookup).toMatchObject({ status: "succeeded" });
      expect(refund).toMatchObject({ status: "rejected", code: "policy_denied" });
      expect(refund.message).toContain("big-refunds-need-senior");
    } finally {
      await call(toolgateUrl, "DELETE", "/v1/policies", demo.key);
    }
  });
});
