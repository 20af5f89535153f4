// A shadow run in the console (issue 22), on the shared `wrangler dev` and demo upstream
// (test/support/e2e-setup.ts) with this file's own tenant and upstream namespace, headless
// Chromium with JavaScript off. An agent in a run created with "mode": "shadow" charges a card
// through the demo's charge_card: the model reads an ordinary result, the demo shop's production
// namespace receives nothing, its sandbox (shop-sandbox) exactly that one request, and the run's
// console page lists the request it would have sent — tool, production URL, the secret by name
// only. Screenshot: test-results/shadow/01-would-have-sent.png.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, DEMO_SHOP_API_KEY, registerDemo } from "../../scripts/lib/dev-server.mjs";
import { openBrowser, signIn } from "../support/browser.ts";
import { e2eServer, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl, base } = e2eServer();
const production = shopNamespace("e2e-shadow");
/** The demo tools' declared sandbox (demo/tools.json): the same fake upstream, its own namespace. */
const sandbox = shopNamespace("shop-sandbox");

let browser: Browser;
let page: Page;
let shot: (name: string) => Promise<unknown>;
let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  demo = await registerDemo(toolgateUrl, production.url, { mode: "shadow" });
  ({ browser, page, shot } = await openBrowser("shadow"));
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

describe("a shadow run in a real browser", () => {
  it("the run page lists the charge it would have sent (production URL, secret by name only); production got nothing, the sandbox that one request", async () => {
    const { run_id: runId, run_token: runToken } = demo.run;
    const sandboxSeen = (await sandbox.state()).requests.length;
    const turn = await call(
      toolgateUrl,
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      runToken,
      {
        calls: [{ id: "c1", name: "charge_card", arguments: { amount: 500, currency: "usd" } }],
      },
    );
    // The model reads an ordinary result: the sandbox's answer.
    expect(turn.body.results[0]).toMatchObject({
      status: "succeeded",
      result: { id: expect.any(String), amount: 500, currency: "usd" },
    });
    const operationId = turn.body.results[0].operation_id as string;

    // Nothing reached the production namespace; the sandbox received exactly the charge, under
    // the production path.
    expect((await production.state()).requests).toEqual([]);
    const sent = (await sandbox.state()).requests.slice(sandboxSeen);
    expect(sent.map((r) => [r.method, r.path, r.body])).toEqual([
      [
        "POST",
        `${new URL(production.url).pathname}/charges`,
        { amount: 500, currency: "usd", customer_id: "cus_demo" },
      ],
    ]);

    await signIn(page, base, demo.key);
    await page.goto(`${base}/console/runs/${runId}`);
    await page.getByRole("heading", { name: "Would have sent" }).waitFor();
    const list = page.getByRole("list", { name: "Would have sent" });
    const items = list.locator(":scope > li");
    expect(await items.count()).toBe(1);
    const item = await items.first().innerText();
    expect(item).toContain("charge_card");
    expect(item).toContain("succeeded");
    expect(item).toContain(operationId);
    const request = await list.locator('pre[data-role="request"]').innerText();
    expect(request.split("\n")).toEqual([
      `POST ${production.url}/charges`,
      "Authorization: Bearer {secret:SHOP_API_KEY}",
      "Content-Type: application/json",
      `Idempotency-Key: ${sent[0]!.key}`,
      "",
      JSON.stringify({ amount: 500, currency: "usd", customer_id: "cus_demo" }),
    ]);
    // The secret appears by name only, nowhere on the page (text or markup).
    expect(await page.content()).not.toContain(DEMO_SHOP_API_KEY);
    expect(await page.locator(`section.op[id="${operationId}"]`).getAttribute("data-status")).toBe(
      "succeeded",
    );
    await shot("01-would-have-sent");
  });
});
