// The approvals inbox's edit-on-approve form and a routed card's votes (issue 35), through the
// console as a signed-in person, counted at the upstream: an edit lowers the amount and exactly
// the edited body is sent once; a bound field typed over is refused by name with nothing sent or
// changed; under four eyes the card shows the difference; a routed card shows who voted and who
// may still vote.
import { describe, expect, it } from "vitest";
import { ADMIN, api, manifest, testTenant, turn, unique, upstream } from "../support/api.ts";
import { tenantWithRefunds } from "../support/cedar.ts";
import { consoleAs } from "../support/console-page.ts";

const INBOX = "/console/approvals";

/** The card of operation `id` in an inbox page (its <article>), or "" when absent. */
function cardOf(html: string, id: string) {
  const start = html.indexOf(`<article class="item" id="${id}"`);
  return start < 0 ? "" : html.slice(start, html.indexOf("</article>", start));
}
/** The value of hidden field `name` inside the card's edit form. */
function editField(card: string, name: string) {
  const form = card.slice(card.indexOf('data-role="edit-form"'));
  const raw = new RegExp(`name="${name}" value="([^"]*)"`).exec(form)?.[1] ?? "";
  return raw.replaceAll("&quot;", '"').replaceAll("&amp;", "&");
}

/** A refund (customer_id bound from the run's context) awaiting a person, and a console session. */
async function pendingRefund(fourEyes: boolean, approval: Record<string, unknown> = {}) {
  const up = upstream();
  const t = await tenantWithRefunds(up.url, {
    approval: { mode: "always", four_eyes: fourEyes, ...approval },
  });
  const runId = await t.run();
  const first = await t.refund(runId, 100, 0);
  expect(first.status).toBe("awaiting_approval");
  const id = first.operation_id as string;
  const people = await consoleAs(t.as.Authorization.slice("Bearer ".length));
  const view = async () => (await api("GET", `/v1/operations/${id}`, undefined, t.as)).body;
  const card = async () => cardOf((await people.get(INBOX)).text, id);
  const post = async (args: string, reason: string, action?: string) => {
    const shown = await card();
    return people.post(`${INBOX}/${id}/edit`, {
      input_hash: editField(shown, "input_hash"),
      policy_version: editField(shown, "policy_version"),
      fixed: editField(shown, "fixed"),
      arguments: args,
      reason,
      ...(action ? { action } : {}),
    });
  };
  const edit = async (
    args: string,
    reason = "Goodwill refunds are capped at 40",
    action?: string,
  ) => {
    const res = await post(args, reason, action);
    expect(res.status).toBe(303);
    return (await people.get(INBOX)).text;
  };
  /** "Preview the difference": the inbox re-rendered (200) with this card's form and its diff. */
  const preview = async (args: string, reason = "capped") => {
    const res = await post(args, reason, "preview");
    expect(res.status).toBe(200);
    return cardOf(res.text, id);
  };
  return { up, id, view, card, edit, preview };
}

describe("console: edit and approve", { timeout: 30_000 }, () => {
  it("the card offers the arguments to edit with the bound field read-only; an edit lowering the amount sends exactly the edited body once", async () => {
    const r = await pendingRefund(false);
    const card = await r.card();
    expect(card).toContain('data-role="edit-form"');
    expect(card).toContain(`action="${INBOX}/${r.id}/edit"`);
    // The textarea holds the editable fields only; the bound one is shown, not editable.
    const textarea = /name="arguments"[^>]*>([^<]*)<\/textarea>/.exec(card)?.[1] ?? "";
    expect(textarea).toContain("&quot;amount&quot;: 100");
    expect(textarea).not.toContain("customer_id");
    expect(JSON.parse(editField(card, "fixed"))).toEqual({ customer_id: "cus_1" });
    const before = (await r.view()).input_hash;

    const page = await r.edit('{ "amount": 40 }');
    expect(page).toContain("Edited: amount: 100 → 40");
    await r.up.waitForEffects(1);
    const state = await r.up.state();
    expect(state.requests).toHaveLength(1);
    expect(state.effects).toHaveLength(1);
    expect(state.effects[0]!.body).toEqual({ amount: 40, customer_id: "cus_1" });
    const after = await r.view();
    expect(after.input_hash).not.toBe(before);
    expect(after.edited).toMatchObject({ by: expect.any(String), reason: expect.any(String) });
    expect(cardOf(page, r.id)).toBe("");
  });

  it("a bound field typed over, or arguments that are not JSON, are refused as the flash with nothing sent or changed", async () => {
    const r = await pendingRefund(false);
    const before = (await r.view()).input_hash;
    const bound = await r.edit('{ "amount": 40, "customer_id": "cus_2" }');
    expect(bound).toContain("Refused: customer_id is bound from the run");
    const broken = await r.edit('{ "amount": 40');
    expect(broken).toContain("The arguments are not a JSON object");
    const view = await r.view();
    expect(view).toMatchObject({ phase: "awaiting_approval", input_hash: before });
    expect(view.edited).toBeUndefined();
    expect((await r.up.state()).requests).toHaveLength(0);
    expect(cardOf(bound, r.id)).toContain('data-role="edit-form"');
  });

  it("under four eyes the edited call waits for another person and its card shows the difference", async () => {
    const r = await pendingRefund(true);
    const page = await r.edit('{ "amount": 40 }', "capped at 40");
    expect(page).toContain("waits for another person&#39;s approval");
    const card = cardOf(page, r.id);
    expect(card).toMatch(
      /data-role="edit-changes">by <span class="mono">[^<]+<\/span>: amount: 100 → 40 \(capped at 40\)/,
    );
    expect(JSON.parse(editField(card, "fixed"))).toEqual({ customer_id: "cus_1" });
    expect((await r.view()).phase).toBe("awaiting_approval");
    expect((await r.up.state()).requests).toHaveLength(0);
  });
});

describe("console: the edit form's preview and a passkey tool's edit", { timeout: 30_000 }, () => {
  it("Preview re-renders the card with the difference and the typed text, sending and changing nothing; Edit then runs it", async () => {
    const r = await pendingRefund(false);
    const before = (await r.view()).input_hash;
    const card = await r.preview('{ "amount": 40, "note": "goodwill" }', "capped at 40");
    const diff = card.slice(card.indexOf('data-role="edit-preview"'));
    expect(diff).toMatch(/data-field="amount">.*100.*40/s);
    expect(diff).toMatch(/data-field="note">.*\(absent\).*&quot;goodwill&quot;/s);
    expect(diff).not.toContain('data-field="customer_id"');
    expect(card).toMatch(/name="arguments"[^>]*>\{ &quot;amount&quot;: 40, &quot;note&quot;/);
    expect(card).toMatch(/name="reason"[^>]*>capped at 40</);
    expect(card).toMatch(/data-role="edit-form" open/);
    expect((await r.view()).input_hash).toBe(before);
    expect((await r.up.state()).requests).toHaveLength(0);
    // A bound field typed over is named in the preview, nothing changed.
    const bound = await r.preview('{ "amount": 40, "customer_id": "cus_2" }');
    expect(bound).toContain("customer_id cannot be changed");
    expect((await r.up.state()).requests).toHaveLength(0);
    // The same form, "Edit and approve": it runs the edited arguments once.
    await r.edit('{ "amount": 40 }', "capped at 40", "edit");
    await r.up.waitForEffects(1);
    expect((await r.up.state()).effects.map((e) => e.body)).toEqual([
      { amount: 40, customer_id: "cus_1" },
    ]);
  });

  it("a passkey step-up tool's card has the edit form: the edit is written, nothing sent, and the edited version waits for the passkey", async () => {
    const r = await pendingRefund(false, { step_up: "passkey" });
    const card = await r.card();
    expect(card).toContain('data-role="edit-form"');
    expect(card).toContain("Edit (then approve with your passkey)");
    const before = (await r.view()).approval;
    const page = await r.edit('{ "amount": 40 }', "capped at 40", "edit");
    expect(page).toContain("Approving the edited version needs your passkey");
    const after = (await r.view()).approval;
    expect(after.state).toBe("pending");
    expect(after.input_hash).not.toBe(before.input_hash);
    // The challenge is the edited version's: a passkey made for the old one approves nothing.
    expect(after.step_up.challenge).not.toBe(before.step_up.challenge);
    expect(cardOf(page, r.id)).toContain("amount: 100 → 40");
    expect((await r.up.state()).requests).toHaveLength(0);
  });
});

describe("console: a routed approval's votes", { timeout: 30_000 }, () => {
  it("a 2-of-3 card after one vote: 'Votes: 1 of 2 (bob); may still vote: finance (dave)'", async () => {
    const { tenantId, key } = await testTenant();
    const issued = await api(
      "POST",
      `/v1/admin/tenants/${tenantId}/keys`,
      { name: "bob", scopes: ["approvals:decide"] },
      { Authorization: `Bearer ${ADMIN}` },
    );
    const up = upstream();
    const approval = {
      mode: "always",
      quorum: 2,
      route: [{ group: { name: "finance", members: ["bob", "carol", "dave"] } }],
    };
    const tool = manifest({ url: up.url, risk: "irreversible_write", approval });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
    const run = await api("POST", "/v1/runs", {
      user: { id: "carol", scopes: [] },
      tools: [tool.name],
    });
    const call = {
      id: unique("call"),
      name: tool.name,
      arguments: { amount: 100, currency: "usd" },
    };
    const res = await turn(run.body.run_id, [call], 0);
    const id = res.body.results[0].operation_id as string;
    const vote = await api(
      "POST",
      `/v1/operations/${id}/approve`,
      {},
      {
        Authorization: `Bearer ${issued.body.key}`,
      },
    );
    expect(vote.status).toBe(200);
    const card = cardOf((await (await consoleAs(key)).get(INBOX)).text, id);
    expect(card).toContain(
      'data-role="route-votes">Votes: 1 of 2 (bob); may still vote: finance (dave)</span>',
    );
    expect((await up.state()).requests).toHaveLength(0);
  });
});
