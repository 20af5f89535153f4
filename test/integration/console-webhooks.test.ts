// The console's webhooks page through the public HTTP surface: signed in through the form, it lists
// the tenant's endpoints and the deliveries made by the real flow (a turn's approval request goes
// through the outbox and the EVENTS queue to the endpoint); it needs a webhooks scope.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  api,
  manifest,
  newTenant,
  operation,
  setup,
  testTenant,
  turn,
  upstream,
} from "../support/api.ts";

const ORIGIN = "http://toolgate.test";

async function send(request: Request) {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(request);
  return { status: response.status, text: await response.text(), headers: response.headers };
}
const get = (path: string, cookie?: string) =>
  send(
    new Request(`${ORIGIN}${path}`, {
      headers: cookie ? { Cookie: cookie } : {},
      redirect: "manual",
    }),
  );
const post = (path: string, form: Record<string, string>, cookie: string) =>
  send(
    new Request(`${ORIGIN}${path}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Origin: ORIGIN,
        Cookie: cookie,
      },
      body: new URLSearchParams(form).toString(),
      redirect: "manual",
    }),
  );
const cookiePair = (setCookie: string) => setCookie.split(";")[0]!;
const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? "";

async function signIn(key: string): Promise<string> {
  const form = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`${ORIGIN}/console/sign-in`, { redirect: "manual" }),
  );
  const login = cookiePair(
    form.headers.getSetCookie().find((c) => c.startsWith("tg_console_login="))!,
  );
  const body = new URLSearchParams({
    csrf: hidden(await form.text(), "csrf"),
    next: "/console",
    api_key: key,
  });
  const signedIn = await (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`${ORIGIN}/console/sign-in`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: login },
      body: body.toString(),
      redirect: "manual",
    }),
  );
  expect(signedIn.status).toBe(303);
  return cookiePair(signedIn.headers.getSetCookie().find((c) => c.startsWith("tg_console="))!);
}

describe("console webhooks page", () => {
  it("is refused to a key without a webhooks scope", async () => {
    const t = await newTenant(["runs:read"]);
    const page = await get("/console/webhooks", await signIn(t.key));
    expect(page.status).toBe(403);
    expect(page.text).toContain("webhooks:read");
  });

  it(
    "lists an endpoint and the delivery of an approval request made through the real flow",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const id = `wh_${crypto.randomUUID().slice(0, 8)}`;
      const put = await api("PUT", `/v1/webhooks/${id}`, {
        url: `${up.url}/webhooks/console`,
        events: ["approval.requested"],
        format: "standard",
      });
      expect(put.status).toBe(201);
      const session = await signIn((await testTenant()).key);
      const before = await get("/console/webhooks", session);
      expect(before.status).toBe(200);
      expect(before.text).toContain(id);
      expect(before.text).toContain("No deliveries yet.");

      const tool = manifest({ url: `${up.url}/charges`, approval: "always" });
      const { runId, name } = await setup(tool);
      const res = await turn(runId, [
        { id: "c1", name, arguments: { amount: 5, currency: "usd" } },
      ]);
      expect(res.body.results[0].status).toBe("awaiting_approval");

      // The delivery is asynchronous (queue consumer): read the page until it shows it (bounded).
      let page = before;
      for (let i = 0; i < 400 && !page.text.includes("approval.requested</td>"); i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        page = await get("/console/webhooks", session);
      }
      const section = page.text.slice(page.text.indexOf(`data-webhook="${id}"`));
      expect(section).toContain(`${up.url}/webhooks/console`);
      expect(section).toContain("approval.requested</td>");
      expect(section).toContain("delivered 200");
      // The approval card says its notification was delivered (from the delivery log).
      const inbox = await get("/console/approvals", session);
      const card = inbox.text.slice(
        inbox.text.indexOf(`data-operation="${res.body.results[0].operation_id}"`),
      );
      expect(card).toMatch(/Notification<\/dt><dd>delivered to 1 endpoint\(s\)<\/dd>/);

      const sent = async () =>
        (await up.state()).requests.filter((r) => r.path === "/webhooks/console").length;
      expect(await sent()).toBe(1);

      // Redeliver: the form is on the row; a webhooks:read key (same tenant) sees no form and its
      // POST is refused, nothing sent; the webhooks:write session sends the event again.
      const action = `/console/webhooks/${id}/redeliver`;
      expect(section).toContain(`action="${action}"`);
      const eventId = hidden(section, "event_id");
      expect(eventId).not.toBe("");
      const tenant = await testTenant();
      const readKey = await api(
        "POST",
        `/v1/admin/tenants/${tenant.tenantId}/keys`,
        { name: "reader", scopes: ["webhooks:read"] },
        { Authorization: `Bearer ${ADMIN}` },
      );
      expect(readKey.status).toBe(201);
      const reader = await signIn(readKey.body.key as string);
      const readerPage = await get("/console/webhooks", reader);
      expect(readerPage.status).toBe(200);
      expect(readerPage.text).toContain(id);
      expect(readerPage.text).not.toContain(`action="${action}"`);
      const refused = await post(
        action,
        { csrf: hidden(readerPage.text, "csrf"), event_id: eventId },
        reader,
      );
      expect(refused.status).toBe(403);
      expect(await sent()).toBe(1);

      const redelivered = await post(
        action,
        { csrf: hidden(page.text, "csrf"), event_id: eventId },
        session,
      );
      expect(redelivered.status).toBe(303);
      expect(await sent()).toBe(2);
      const after = await get("/console/webhooks", session);
      // The log shows the second attempt of the same event, made by hand.
      expect(after.text).toContain(
        "<td>approval.requested</td><td>2 (by hand)</td><td>delivered 200</td>",
      );
    },
  );
});

describe("console unknown-outcome cards", () => {
  it(
    "say whether their operation.outcome_unknown notification was delivered, not an earlier event of the same operation",
    { timeout: 30_000 },
    async () => {
      const up = upstream();
      const hooks = upstream(); // the receivers' own namespace: their faults are not the tool's
      const early = `wh_${crypto.randomUUID().slice(0, 8)}`;
      const late = `wh_${crypto.randomUUID().slice(0, 8)}`;
      for (const [id, path, events] of [
        [early, "a", ["approval.requested"]],
        [late, "u", ["operation.outcome_unknown"]],
      ] as const) {
        const put = await api("PUT", `/v1/webhooks/${id}`, {
          url: `${hooks.url}/webhooks/${path}`,
          events,
          format: "standard",
        });
        expect(put.status).toBe(201);
      }
      const tool = manifest({
        url: up.url,
        timeout_ms: 300,
        idempotency: { mode: "none" },
        approval: "always",
      });
      const { runId, name } = await setup(tool);
      const asked = await turn(runId, [
        { id: "c1", name, arguments: { amount: 5, currency: "usd" } },
      ]);
      const operationId = asked.body.results[0].operation_id as string;
      // approval.requested reached the first endpoint: this operation has a delivered notification.
      await hooks.waitForRequests(1);
      // The outcome_unknown notification's first attempt is answered 500.
      await hooks.script({ kind: "status", status: 500 });
      await up.script({ kind: "commit_then_hang" });
      expect((await api("POST", `/v1/operations/${operationId}/approve`, {})).status).toBe(200);
      expect((await operation(operationId, 5)).body.phase).toBe("outcome_unknown");

      const session = await signIn((await testTenant()).key);
      const cardText = async () => {
        const page = await get("/console/unknown-outcomes", session);
        expect(page.status).toBe(200);
        const at = page.text.indexOf(`data-operation="${operationId}"`);
        expect(at).toBeGreaterThan(-1);
        return page.text.slice(at, page.text.indexOf("</article>", at));
      };
      const line = /Notification<\/dt><dd>([^<]*)<\/dd>/;
      let card = await cardText();
      for (let i = 0; i < 400 && !card.match(line)?.[1]?.startsWith("failing"); i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        card = await cardText();
      }
      expect(card.match(line)?.[1]).toBe("failing (1 endpoint(s))");

      // Sent again by hand (or by the queue's retry meanwhile): the card says delivered.
      const log = await api("GET", `/v1/webhooks/${late}/deliveries`);
      const eventId = log.body.deliveries[0].event_id as string;
      const again = await api("POST", `/v1/webhooks/${late}/redeliver`, { event_id: eventId });
      expect(again.status).toBe(200);
      expect(again.body.delivered).toBe(true);
      expect((await cardText()).match(line)?.[1]).toBe("delivered to 1 endpoint(s)");
    },
  );
});
