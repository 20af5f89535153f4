// The console's overview end to end (issue 20): the shared `wrangler dev` and demo upstream
// (test/support/e2e-setup.ts) with this file's own tenant and upstream namespace, headless Chromium
// with JavaScript off. An agent charges, looks up an order and asks for a refund over 100 (waiting
// for approval); the home page shows the approvals queue at 1, the calls chart and the recent
// operations; a search by the bound customer_id finds the refund; approving it in the inbox takes
// the queue to 0; the tools page shows rates and latency; the run page draws the waterfall. The
// index is eventually consistent: the test waits for it through the API (bounded polls), then
// reads the pages. Screenshots: test-results/overview/*.png.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, registerDemo } from "../../scripts/lib/dev-server.mjs";
import { openBrowser, signIn } from "../support/browser.ts";
import { e2eServer, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl, base } = e2eServer();
const shop = shopNamespace("e2e-overview");

let browser: Browser;
let page: Page;
let shot: (name: string) => Promise<unknown>;
let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  demo = await registerDemo(toolgateUrl, shop.url);
  ({ browser, page, shot } = await openBrowser("overview"));
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

/** The index through the API until `done` holds (bounded: it is fed by the queue within seconds). */
async function overviewUntil(done: (o: any) => boolean): Promise<any> {
  let body: any = null;
  for (let i = 0; i < 150; i++) {
    body = (await call(toolgateUrl, "GET", "/v1/overview", demo.key)).body;
    if (done(body)) return body;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the index never showed it: ${JSON.stringify(body)}`);
}

describe("the overview in a real browser", () => {
  let refundOp = "";

  it("shows the queues, the chart and the recent operations from a real agent run; search finds by customer_id", async () => {
    const { run_id: runId, run_token: runToken } = demo.run;
    const turn = (calls: unknown[]) =>
      call(toolgateUrl, "POST", `/v1/runs/${runId}/turns?format=native`, runToken, { calls });
    const first = await turn([
      { id: "c1", name: "charge_card", arguments: { amount: 500, currency: "usd" } },
      { id: "c2", name: "lookup_order", arguments: { order_id: "ord_1001" } },
    ]);
    expect(first.body.results.map((r: any) => r.status)).toEqual(["succeeded", "succeeded"]);
    const asked = await turn([
      {
        id: "c3",
        name: "refund_order",
        arguments: { order_id: "ord_1001", amount: 250, reason: "damaged" },
      },
    ]);
    expect(asked.body.results[0].status).toBe("awaiting_approval");
    refundOp = asked.body.results[0].operation_id;
    await overviewUntil(
      (o) => o.queues.awaiting_approval === 1 && (o.operations.succeeded ?? 0) >= 2,
    );

    await signIn(page, base, demo.key);
    expect(await page.locator('[data-count="awaiting_approval"]').innerText()).toBe("1");
    expect(await page.locator('[data-count="outcome_unknown"]').innerText()).toBe("0");
    // The page reloads itself (no script): the counts stay live.
    expect(await page.locator('meta[http-equiv="refresh"]').getAttribute("content")).toBe("60");
    // The chart: an image with a title and a description, bars per outcome, the numbers as a table.
    const chart = page.locator('svg[role="img"][aria-labelledby="calls-title calls-desc"]');
    await chart.waitFor();
    expect(await page.locator("#calls-title").textContent()).toBe(
      "Calls per 5 minutes, stacked by outcome",
    );
    expect(await chart.locator("rect").count()).toBeGreaterThanOrEqual(2);
    expect(await page.locator("#calls-desc").textContent()).toMatch(
      /3 calls .*succeeded 2.*awaiting approval 1/,
    );
    const rows = page.locator("table.operations tbody tr");
    expect(await rows.count()).toBe(3);
    const refundRow = page.locator(`tr[data-operation="${refundOp}"]`);
    expect(await refundRow.innerText()).toContain("customer_id=cus_demo");
    expect(await refundRow.getByRole("link", { name: "Decide" }).getAttribute("href")).toBe(
      `/console/approvals#${refundOp}`,
    );
    await shot("01-overview");

    await page.getByLabel("Search").fill("cus_demo");
    await Promise.all([
      page.waitForURL(/\/console\?q=cus_demo/),
      page.getByRole("button", { name: "Filter" }).click(),
    ]);
    // The charge and the refund carry the run's bound customer_id; the order lookup does not.
    const found = page.locator("table.operations tbody tr");
    expect(await found.count()).toBe(2);
    expect(await page.locator(`tr[data-operation="${refundOp}"]`).count()).toBe(1);
    expect(await found.allInnerTexts()).toEqual([
      expect.stringContaining("refund_order"),
      expect.stringContaining("charge_card"),
    ]);
    expect(await page.locator("table.runs tbody tr").count()).toBe(1);
    await shot("02-search-customer");
  });

  it("approving the refund takes the approvals queue to 0; the tools page and the run's waterfall render", async () => {
    await page.goto(`${base}/console/approvals`);
    const card = page.locator(`article[data-operation="${refundOp}"]`);
    await card.getByLabel("Reason for approving").fill("Photo checks out");
    await Promise.all([
      page.waitForURL(`${base}/console/approvals`),
      card.getByRole("button", { name: "Approve and run" }).click(),
    ]);
    await page.locator('[data-flash="ok"]').waitFor();
    const { run_id: runId, run_token: runToken } = demo.run;
    await overviewUntil(
      (o) => o.queues.awaiting_approval === 0 && (o.operations.succeeded ?? 0) === 3,
    );
    await page.goto(`${base}/console`);
    expect(await page.locator('[data-count="awaiting_approval"]').innerText()).toBe("0");
    expect(await page.locator(`tr[data-operation="${refundOp}"]`).innerText()).toContain(
      "succeeded",
    );
    await shot("03-overview-after-approval");

    await page
      .getByRole("navigation", { name: "Console" })
      .getByRole("link", { name: "Tools" })
      .click();
    await page.getByRole("heading", { name: "Tools", exact: true }).waitFor();
    const charge = page.locator('tr[data-tool="charge_card"]');
    expect(await charge.innerText()).toMatch(/unverified\s+1\s+0 %\s+0 %\s+\d+ ms\s+\d+ ms/);
    const latency = page.locator('svg[role="img"][aria-labelledby="latency-title latency-desc"]');
    expect(await latency.locator("rect").count()).toBeGreaterThanOrEqual(6);
    await shot("04-tools");

    // The agent collects the refund's result; the run page draws the waterfall above the timeline.
    await call(toolgateUrl, "GET", `/v1/runs/${runId}/turns?format=native&wait=10`, runToken).catch(
      () => null,
    );
    await page.goto(`${base}/console/runs/${runId}`);
    const waterfall = page.locator(
      'svg[role="img"][aria-labelledby="waterfall-title waterfall-desc"]',
    );
    await waterfall.waitFor();
    expect(await waterfall.locator("g[data-operation]").count()).toBe(3);
    expect(
      await waterfall.locator(`g[data-operation="${refundOp}"] rect[data-kind="approval"]`).count(),
    ).toBe(1);
    expect(
      await waterfall.locator(`g[data-operation="${refundOp}"] rect[data-kind="attempt"]`).count(),
    ).toBe(1);
    expect(await waterfall.locator('rect[data-kind="attempt"]').count()).toBe(3);
    await shot("05-run-waterfall");
  });
});
