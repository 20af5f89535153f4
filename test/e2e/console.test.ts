// The console end to end, as a person uses it: the shared `wrangler dev` and demo upstream
// (test/support/e2e-setup.ts) with this file's own tenant and upstream namespace, real headless
// Chromium (test/support/browser.ts). Sign in with a wrong key (refused) and the right one, open
// the run an agent drove through the API, and read its timeline; approve a refund over 100 from
// the approvals inbox (nothing sent before, one refund after, the timeline shows the decision
// before the attempt); a POST forged outside the page (the cookie, but no CSRF token) is refused.
// Every wait is on a selector, a URL or a response, never on time. Screenshots:
// test-results/console/*.png.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, registerDemo } from "../../scripts/lib/dev-server.mjs";
import { openBrowser } from "../support/browser.ts";
import { e2eServer, shopNamespace } from "../support/e2e.ts";

const { toolgateUrl, base } = e2eServer();
const shop = shopNamespace("e2e-console");

let browser: Browser;
let context: BrowserContext;
let page: Page;
let shot: (name: string) => Promise<unknown>;
let demo: Awaited<ReturnType<typeof registerDemo>>;

beforeAll(async () => {
  demo = await registerDemo(toolgateUrl, shop.url);
  ({ browser, context, page, shot } = await openBrowser("console"));
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

/** The agent's side: two turns through the public API with the run token. */
async function agentTurns(): Promise<{ chargeOp: string; lookupOp: string }> {
  const { run_id: runId, run_token: runToken } = demo.run;
  // The shop answers the first charge with a 503: toolgate retries it (same key) by alarm.
  await shop.script({ kind: "status", status: 503 });
  const first = await call(toolgateUrl, "POST", `/v1/runs/${runId}/turns?format=native`, runToken, {
    calls: [
      { id: "call_charge", name: "charge_card", arguments: { amount: 500, currency: "usd" } },
    ],
  });
  let charge = first.body;
  // Long-poll the turn until the retry has settled it (bounded; each poll waits on the server).
  for (let poll = 0; poll < 4 && charge.status !== "settled"; poll++) {
    charge = (
      await call(
        toolgateUrl,
        "GET",
        `/v1/runs/${runId}/turns/${charge.turn_id}?format=native&wait=30`,
        runToken,
      )
    ).body;
  }
  expect(charge.results[0]).toMatchObject({ status: "succeeded" });
  const second = await call(
    toolgateUrl,
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    runToken,
    {
      calls: [
        { id: "call_lookup", name: "lookup_order", arguments: { order_id: "ord_1001" } },
        { id: "call_unknown", name: "drop_database", arguments: {} },
      ],
    },
  );
  expect(second.body.results.map((r: { status: string }) => r.status)).toEqual([
    "succeeded",
    "rejected",
  ]);
  return {
    chargeOp: charge.results[0].operation_id,
    lookupOp: second.body.results[0].operation_id,
  };
}

describe("console in a real browser", () => {
  it("refuses a wrong key with a visible error on the sign-in page", async () => {
    await page.goto(`${base}/console`);
    await page.waitForURL(/\/console\/sign-in\?next=/);
    await expect(page.getByLabel("Tenant API key").isVisible()).resolves.toBe(true);
    await shot("01-sign-in");
    await page.getByLabel("Tenant API key").fill(`${demo.key.slice(0, -4)}nope`);
    await Promise.all([
      page.waitForResponse(
        (r) => r.url().endsWith("/console/sign-in") && r.request().method() === "POST",
      ),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    await page.locator("#sign-in-error").waitFor();
    expect(await page.locator("#sign-in-error").innerText()).toContain("That API key is not valid");
    expect((await context.cookies()).some((c) => c.name === "tg_console")).toBe(false);
    await shot("02-sign-in-wrong-key");
  });

  it("signs in, opens the run the agent drove, and shows its timeline", async () => {
    const { chargeOp, lookupOp } = await agentTurns();
    await page.getByLabel("Tenant API key").fill(demo.key);
    await Promise.all([
      page.waitForURL(`${base}/console`),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    const session = (await context.cookies()).find((c) => c.name === "tg_console");
    expect(session).toMatchObject({
      httpOnly: true,
      secure: true,
      sameSite: "Strict",
      path: "/console",
    });
    await page.getByRole("heading", { name: "toolgate console" }).waitFor();
    expect(await page.locator(".who").innerText()).toContain(demo.tenantId);
    // Keyboard first: the first Tab lands on the skip link.
    await page.keyboard.press("Tab");
    expect(await page.locator(":focus").innerText()).toBe("Skip to content");
    await shot("03-home");

    await page.getByLabel("Run id").fill(demo.run.run_id);
    await Promise.all([
      page.waitForURL(`${base}/console/runs/${demo.run.run_id}`),
      page.getByRole("button", { name: "Open run" }).click(),
    ]);
    const charge = page.locator(`section.op[id="${chargeOp}"]`);
    await charge.waitFor();
    expect(await charge.getAttribute("data-status")).toBe("succeeded");
    const steps = await charge.locator("ol.timeline > li .what").allInnerTexts();
    expect(steps).toEqual([
      "Proposed",
      "Validated and frozen",
      // The demo's charge_card was not verified (POST /v1/tools/charge_card/verify): flagged, not lowered.
      "Idempotency unverified",
      "Attempt 1 sent",
      "Attempt 1 answered",
      "Retry scheduled",
      "Attempt 2 sent",
      "Attempt 2 answered",
      "Recorded: succeeded",
      // The agent's turn response carried the result (issue 10: `reported`).
      "Result delivered to the caller",
    ]);
    expect(await charge.locator('li[data-event="attempt_finished"]').first().innerText()).toContain(
      "503",
    );
    expect(await page.locator(`section.op[id="${lookupOp}"]`).getAttribute("data-status")).toBe(
      "succeeded",
    );
    const turns = await page.locator('li[data-event="turn_received"]').allInnerTexts();
    expect(turns).toHaveLength(2);
    expect(turns[1]).toContain("drop_database");
    expect(turns[1]).toContain("unknown_tool");
    expect(await page.locator("#run-budgets").locator("xpath=..").innerText()).toMatch(
      /Turns\s+2\s+none\s+Tool calls\s+2\s+none/,
    );
    await shot("04-run");
  });

  it("approves a refund over 100 from the inbox: nothing is sent before, exactly one refund after, and the run's timeline shows it", async () => {
    const { run_id: runId, run_token: runToken } = demo.run;
    const effectsBefore = (await shop.state()).effects.length;
    const asked = await call(
      toolgateUrl,
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      runToken,
      {
        calls: [
          {
            id: "call_refund",
            name: "refund_order",
            arguments: { order_id: "ord_1001", amount: 250, reason: "damaged" },
          },
        ],
      },
    );
    expect(asked.status).toBe(202);
    const waiting = asked.body.results[0];
    expect(waiting).toMatchObject({ status: "awaiting_approval" });
    const opId = waiting.operation_id as string;

    await page.goto(`${base}/console`);
    await page
      .getByRole("navigation", { name: "Console" })
      .getByRole("link", { name: "Pending approvals" })
      .click();
    await page.getByRole("heading", { name: "Approvals", exact: true }).waitFor();
    const card = page.locator(`article[data-operation="${opId}"]`);
    await card.waitFor();
    expect(JSON.parse(await card.locator('pre[data-role="arguments"]').innerText())).toEqual({
      order_id: "ord_1001",
      amount: 250,
      reason: "damaged",
      customer_id: "cus_demo",
    });
    expect(await card.locator("dl.facts").innerText()).toContain("/orders/ord_1001/refunds");
    // The preview (a read of the order) was fetched once, when approval was requested.
    expect(await card.locator('pre[data-role="preview"]').innerText()).toContain("ord_1001");
    let state = await shop.state();
    expect(state.effects.length).toBe(effectsBefore);
    await shot("05-approvals-pending");

    await card.getByLabel("Reason for approving").fill("Photo of the damage checks out");
    await Promise.all([
      page.waitForURL(`${base}/console/approvals`),
      card.getByRole("button", { name: "Approve and run" }).click(),
    ]);
    await page.locator('[data-flash="ok"]').waitFor();
    expect(await page.locator('[data-flash="ok"]').innerText()).toContain("Approved refund_order");
    expect(await page.locator(`article[data-operation="${opId}"]`).count()).toBe(0);
    await shot("06-approvals-approved");

    const settled = await call(
      toolgateUrl,
      "GET",
      `/v1/runs/${runId}/turns/${asked.body.turn_id}?format=native&wait=30`,
      runToken,
    );
    expect(settled.body.results[0]).toMatchObject({ status: "succeeded", operation_id: opId });
    state = await shop.state();
    const refunds = state.effects.slice(effectsBefore);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]!.path).toBe("/orders/ord_1001/refunds");

    await page.goto(`${base}/console/approvals?state=decided`);
    const row = page.locator(`tr[data-operation="${opId}"]`);
    expect(await row.innerText()).toContain("Photo of the damage checks out");
    await page.goto(`${base}/console/runs/${runId}`);
    const refund = page.locator(`section.op[id="${opId}"]`);
    await refund.waitFor();
    expect(await refund.getAttribute("data-status")).toBe("succeeded");
    const steps = await refund.locator("ol.timeline > li .what").allInnerTexts();
    expect(steps.indexOf("Attempt 1 sent")).toBeGreaterThan(
      steps.findIndex((s) => /approv/i.test(s)),
    );
    expect(steps.slice(-2)).toEqual(["Recorded: succeeded", "Result delivered to the caller"]);
    await shot("07-run-after-approval");
  });

  it("refuses a POST forged outside the page (the session cookie, no CSRF token); the page's own form works", async () => {
    const cookie = (await context.cookies()).find((c) => c.name === "tg_console")!;
    const forge = (body: Record<string, string>) =>
      fetch(`${base}/console/sign-out`, {
        method: "POST",
        redirect: "manual",
        headers: {
          Cookie: `${cookie.name}=${cookie.value}`,
          "Content-Type": "application/x-www-form-urlencoded",
          Origin: base,
        },
        body: new URLSearchParams(body).toString(),
      });
    const forged = await forge({});
    expect(forged.status).toBe(403);
    expect(await forged.text()).toContain("Request refused");
    const guessed = await forge({ csrf: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
    expect(guessed.status).toBe(403);

    // The session is untouched, and the real form (carrying the token) signs out.
    await page.goto(`${base}/console/runs/${demo.run.run_id}`);
    await page.locator("section.op").first().waitFor();
    await Promise.all([
      page.waitForURL(/\/console\/sign-in\?ended=signed_out/),
      page.getByRole("button", { name: "Sign out" }).click(),
    ]);
    await page.getByText("You are signed out.").waitFor();
    expect((await context.cookies()).some((c) => c.name === "tg_console")).toBe(false);
    await shot("08-signed-out");
  });
});
