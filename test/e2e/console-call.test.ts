// The call, whole (issue 33), read in a real browser as an operator reads it: the shared `wrangler
// dev` and demo upstream (test/support/e2e-setup.ts), this file's own tenant (the demo's, its shop key
// the tenant secret SHOP_API_KEY) and a charge tool that sends that secret in a header and takes a
// card token it redacts. An agent charges through the API and proposes the same charge again; the
// run page and the operation page show the frozen arguments (the token as [redacted]), the request
// as sent (the secret by name, its value nowhere in the page), the upstream's answer, what the model
// got and the replay; the console search finds the charge by a prefix of its customer; the webhooks
// page shows a failed delivery to the tenant's endpoint and its next attempt. Headless
// Chromium with JavaScript off; every wait is on a selector, a URL or the index through the API.
// TOOLGATE_SCREENSHOTS=<dir> saves the run page, the operation page and the overview there.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, DEMO_SHOP_API_KEY, demoTools, registerDemo } from "../../scripts/lib/dev-server.mjs";
import { openBrowser, signIn } from "../support/browser.ts";
import { e2eServer, indexUntil, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl, base } = e2eServer();
const shop = shopNamespace("e2e-console-call");
const hook = shopNamespace("e2e-console-call-hook");
// The tenant's own endpoint, answered 500 every time it is tried here (its next attempts fail too).
const failing = shopNamespace("e2e-console-call-failing");
const FAILING_HOOK = "ops-failing";
const CARD = "tok_visa_e2e_console_4242";
const TOOL = "charge_card_token";

let browser: Browser;
let page: Page;
let demo: Awaited<ReturnType<typeof registerDemo>>;
let runId = "";
let notifyId = "";
let chargeOp = "";
let lookupOp = "";
let effectId = "";
let replayTurn = "";

/** A full-page PNG in $TOOLGATE_SCREENSHOTS, only when it is set (CI writes none). */
async function screen(name: string) {
  const dir = process.env.TOOLGATE_SCREENSHOTS;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/** The demo's charge_card, taking a card token it redacts and keeping the request body in traces. */
function tokenCharge() {
  // The demo's manifests as JSON (its own test checks their shape); the undo is left out.
  const charge: any = demoTools(shop.url).find((t: { name: string }) => t.name === "charge_card");
  const { compensate: _undo, ...tool } = charge;
  return {
    ...tool,
    name: TOOL,
    description: "Charge the current customer's card by its token. Amount in cents.",
    input_schema: {
      ...tool.input_schema,
      properties: { ...tool.input_schema.properties, card_token: { type: "string" } },
      required: [...tool.input_schema.required, "card_token"],
    },
    redact: ["/card_token"],
    trace: { arguments: true, result: true },
  };
}

beforeAll(async () => {
  demo = await registerDemo(toolgateUrl, shop.url);
  await call(toolgateUrl, "PUT", `/v1/tools/${TOOL}`, demo.key, tokenCharge());
  await failing.script(...Array.from({ length: 8 }, () => ({ kind: "status", status: 500 })));
  await call(toolgateUrl, "PUT", `/v1/webhooks/${FAILING_HOOK}`, demo.key, {
    url: `${failing.url}/webhooks/ops`,
    events: ["turn.settled"],
    format: "standard",
  });
  const run = await call(toolgateUrl, "POST", "/v1/runs", demo.key, {
    user: { id: "u_console_call", scopes: ["payments:charge"] },
    tools: [TOOL, "lookup_order"],
    context: { customer_id: "cus_demo", charge_limit: 50_000, refund_limit: 1_000 },
    notify: { url: `${hook.url}/webhooks/agent` },
  });
  runId = run.body.run_id;
  notifyId = run.body.notify.webhook_id;
  const turn = async (calls: unknown[]) =>
    (await call(toolgateUrl, "POST", `/v1/runs/${runId}/turns?format=native`, run.body.run_token, {
      calls,
    })) as {
      body: { turn_id: string; results: Array<{ status: string; operation_id: string }> };
    };
  const args = { amount: 731, currency: "usd", card_token: CARD };
  const first = await turn([
    { id: "c1", name: TOOL, arguments: args },
    { id: "c2", name: "lookup_order", arguments: { order_id: "ord_2002" } },
  ]);
  expect(first.body.results.map((r) => r.status)).toEqual(["succeeded", "succeeded"]);
  chargeOp = first.body.results[0]!.operation_id;
  lookupOp = first.body.results[1]!.operation_id;
  // The model proposes the charge again under a new call id: answered from the stored outcome.
  const again = await turn([{ id: "c3", name: TOOL, arguments: args }]);
  expect(again.body.results[0]).toMatchObject({ status: "succeeded", operation_id: chargeOp });
  replayTurn = again.body.turn_id;
  // One charge; the shop really got the secret and the token (the masking is only in copies).
  const { effects, requests } = await shop.state();
  const charges = effects.filter((e) => e.path === "/charges");
  expect(charges).toHaveLength(1);
  effectId = (charges[0] as { id?: string }).id!;
  const sent = requests.find((r) => r.path === "/charges") as { authorization?: string; body: any };
  expect(sent.authorization).toBe(`Bearer ${DEMO_SHOP_API_KEY}`);
  expect(sent.body.card_token).toBe(CARD);
  ({ browser, page } = await openBrowser("console-call"));
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

/** What the page holds, as text and as HTML: neither may carry the secret's value or the token. */
async function expectNothingHidden() {
  const text = await page.locator("body").innerText();
  const html = await page.content();
  for (const hidden of [DEMO_SHOP_API_KEY, CARD]) {
    expect(text).not.toContain(hidden);
    expect(html).not.toContain(hidden);
  }
}

/** The charge, whole, inside `scope` (its call block): what an operator judges a disputed charge by. */
async function expectWholeCharge(scope: Locator) {
  const block = scope.locator(`[data-role="call"][data-operation="${chargeOp}"]`);
  await block.waitFor();
  // The frozen arguments, the bound customer in them, the token shown as redacted.
  expect(JSON.parse(await block.locator('pre[data-role="arguments"]').innerText())).toEqual({
    amount: 731,
    currency: "usd",
    customer_id: "cus_demo",
    card_token: "[redacted]",
  });
  expect(await block.innerText()).toContain("Hidden as [redacted]: /card_token");
  // The request as sent: method and URL, the secret by name, the key, the body with the token hidden.
  const sent = (await block.locator('pre[data-role="sent-request"]').allInnerTexts()).join("\n");
  const [requestLine, ...rest] = sent.split("\n");
  expect(requestLine).toBe(`POST ${shop.url}/charges`);
  expect(rest).toContain("Authorization: Bearer {secret:SHOP_API_KEY}");
  expect(rest.some((line) => /^Idempotency-Key: tg_/.test(line))).toBe(true);
  expect(JSON.parse(rest.at(-1)!)).toEqual({
    amount: 731,
    currency: "usd",
    customer_id: "cus_demo",
    card_token: "[redacted]",
  });
  // The upstream's answer, once: the one attempt.
  const answers = await block.locator('pre[data-role="upstream-answer"]').allInnerTexts();
  expect(answers).toHaveLength(1);
  expect(answers[0]!.split("\n").slice(0, 2)).toEqual([
    "HTTP 200",
    expect.stringMatching(/^content-type: application\/json/),
  ]);
  // What the model got: the shop's charge id, the token hidden there too.
  const got = JSON.parse(await block.locator('pre[data-role="result"]').innerText());
  expect(got).toMatchObject({ id: effectId, card_token: "[redacted]" });
  // The replay: c3 was answered from c1's stored outcome.
  expect(await block.locator('[data-role="replay"]').count()).toBe(1);
  expect(await block.locator('[data-role="replay"]').innerText()).toBe(
    `Answered from the stored outcome, nothing sent again: call c3 (turn ${replayTurn})`,
  );
}

describe("the call, whole, in a real browser", () => {
  it("the run page shows the charge whole, the secret masked and no replay on the lookup; the run's jurisdiction and notify endpoint", async () => {
    await signIn(page, base, demo.key);
    await page.goto(`${base}/console/runs/${runId}`);
    await expectWholeCharge(page.locator("details.call-detail"));
    // The lookup was called once: its block has an answer and no replay marker.
    const lookup = page.locator(`[data-role="call"][data-operation="${lookupOp}"]`);
    expect(await lookup.locator('pre[data-role="sent-request"]').innerText()).toBe(
      `GET ${shop.url}/orders/ord_2002`,
    );
    expect(await lookup.locator('[data-role="replay"]').count()).toBe(0);
    expect(await page.locator('[data-role="jurisdiction"]').innerText()).toBe(
      "run none · tenant none",
    );
    expect(await page.locator('[data-role="notify"]').innerText()).toContain(
      `${notifyId} (gets this run's turn.settled`,
    );
    await expectNothingHidden();
    await screen("run-page");
  });

  it("the operation page, opened from the run page, shows the same charge whole", async () => {
    await page.goto(`${base}/console/runs/${runId}`);
    const detail = page.locator("details.call-detail", {
      has: page.locator(`[data-operation="${chargeOp}"]`),
    });
    await Promise.all([
      page.waitForURL(`${base}/console/operations/${chargeOp}`),
      detail.getByRole("link", { name: "operation page" }).click(),
    ]);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toMatch(
      new RegExp(`^${TOOL}\\s+succeeded`),
    );
    await expectWholeCharge(page.locator("main"));
    await expectNothingHidden();
    await screen("operation-page");
  });

  it("typing a prefix of the customer (cus_de) into the console search finds the charge, not the lookup", async () => {
    // The index is fed by the queue: wait (through the API, not the search) until it has both.
    await indexUntil(
      () => call(toolgateUrl, "GET", `/v1/operations?run_id=${runId}`, demo.key),
      (r) => r.body.operations.length === 2,
      "the run's two operations",
    );
    await page.goto(`${base}/console`);
    // Unfiltered, the home page lists both.
    for (const op of [chargeOp, lookupOp])
      expect(await page.locator(`tr[data-operation="${op}"]`).count()).toBe(1);
    await screen("overview");
    await page.getByLabel("Search").fill("cus_de");
    await Promise.all([
      page.waitForURL(/\/console\?q=cus_de(&|$)/),
      page.getByRole("button", { name: "Filter" }).click(),
    ]);
    expect(await page.locator("table.operations tbody tr").count()).toBe(1);
    expect(await page.locator(`tr[data-operation="${chargeOp}"]`).innerText()).toContain(
      "customer_id=cus_demo",
    );
    expect(await page.locator(`tr[data-operation="${lookupOp}"]`).count()).toBe(0);
    await screen("overview-search");
  });

  it("the webhooks page shows a failed delivery to the tenant's endpoint and its next attempt", async () => {
    await indexUntil(
      () => call(toolgateUrl, "GET", `/v1/webhooks/${FAILING_HOOK}/deliveries`, demo.key),
      (r) => r.body.deliveries.some((d: { delivered: boolean }) => !d.delivered),
      "a failed delivery",
    );
    await page.goto(`${base}/console`);
    await Promise.all([
      page.waitForURL(`${base}/console/webhooks`),
      page
        .getByRole("navigation", { name: "Console" })
        .getByRole("link", { name: "Webhooks" })
        .click(),
    ]);
    const endpoint = page.locator(`section[data-webhook="${FAILING_HOOK}"]`);
    const failed = endpoint.locator("tbody tr", { hasText: "failed 500" });
    expect(await failed.count()).toBeGreaterThanOrEqual(1);
    // The status is said once, not again as its error ("failed 500 (HTTP 500)").
    expect(await failed.first().innerText()).not.toContain("HTTP 500");
    // Every attempt here fails, so the latest one of each event has a next attempt on the schedule.
    expect(await endpoint.locator("td[data-next]").allInnerTexts()).toContainEqual(
      expect.stringMatching(/^next attempt \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/),
    );
    await screen("webhooks");
  });
});
