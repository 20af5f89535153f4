// /console/grants (issue 35 item 1): the tenant's standing grants — tools, subject, bounds, used and
// remaining, expiry, state — and one grant's page: each use linking to its operation, its entries in
// the tenant's chain (checked), Revoke, and Confirm while it is proposed (four eyes: another person
// than its proposer). Viewing needs approvals:decide or runs:read, like GET /v1/grants; the forms
// (CSRF-checked POSTs, as every console POST) need approvals:decide, go through the same schema
// (`GrantBody`), the same identity (the Access sign-in, else the key's name) and the same store.
import type { Context } from "hono";
import { ulid } from "ulid";
import { z } from "zod";
import { GRANT_ID, GrantBody, grantOf, type GrantView } from "../domain/grant.ts";
import { describeInvalid } from "../domain/invalid-input.ts";
import { tenantStub } from "../durable/stubs.ts";
import { consoleDecider } from "./approvals.tsx";
import { setFlash, takeFlash } from "./flash.ts";
import { utc } from "./format.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";

export const GRANTS_HREF = "/console/grants";
/** Grants whose use is read for the list (each asks its counters); the rest show it on their page. */
const USE_SHOWN = 50;

type Shown = NonNullable<Awaited<ReturnType<ReturnType<typeof tenantStub>["showGrant"]>>>;

const canView = (c: Context<ConsoleEnv>) =>
  ["approvals:decide", "runs:read"].some((s) => c.get("session").scopes.includes(s as never));
const canDecide = (c: Context<ConsoleEnv>) => c.get("session").scopes.includes("approvals:decide");
const notAllowed = (c: Context<ConsoleEnv>, what: string) =>
  problemPage(c, 403, "Not allowed", `${what} needs the scope approvals:decide.`);

const subjectText = (subject: GrantView["subject"]) =>
  subject === "any"
    ? "any subject"
    : Object.entries(subject)
        .map(([k, v]) => `${k} = ${v}`)
        .join(", ");

/** "amount ≤ 50 per call; ≤ 100 in all; 10 calls" */
function boundsText(g: GrantView): string {
  const parts: string[] = [];
  if (g.per_call_max !== null) parts.push(`${g.field} ≤ ${g.per_call_max} per call`);
  if (g.total_max !== null) parts.push(`${g.field} ≤ ${g.total_max} in all`);
  if (g.count !== null) parts.push(`${g.count} calls`);
  return parts.join("; ");
}

/** "3 calls, 60 of 100 (40 left)" */
function usedText(g: GrantView, used: Shown["used"] | null): string {
  if (!used) return "see its page";
  const calls = `${used.calls}${g.count !== null ? ` of ${g.count}` : ""} calls`;
  if (g.total_max === null || used.sum === undefined) return calls;
  return `${calls}, ${used.sum} of ${g.total_max} (${g.total_max - used.sum} left)`;
}

const StateBadge = ({ state }: { state: GrantView["state"] }) => (
  <span
    class={`badge ${state === "live" ? "succeeded" : state === "proposed" ? "pending" : "failed"}`}
  >
    {state}
  </span>
);

async function showGrants(c: Context<ConsoleEnv>) {
  if (!canView(c))
    return problemPage(
      c,
      403,
      "Not allowed",
      "Grants are shown to API keys with the scope approvals:decide or runs:read.",
    );
  const { tenantId } = c.get("session");
  const tenant = tenantStub(c.env, tenantId);
  const [{ grants }, flash] = await Promise.all([tenant.listGrants(), takeFlash(c)]);
  const used = await Promise.all(
    grants.map((g, i) => (i < USE_SHOWN ? tenant.showGrant(tenantId, g.id) : null)),
  );
  const csrf = canDecide(c) ? c.get("session").csrf : null;
  return render(
    c,
    "Standing grants",
    <>
      <h1>Standing grants</h1>
      <p class="lede">
        A person's pre-approval: a call inside a live grant's bounds runs without asking and is
        counted against it once; outside them, it asks a person as usual.
      </p>
      <FlashBox flash={flash} />
      {grants.length === 0 ? (
        <p class="empty">No grant has been made.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Grant</th>
              <th>Tools</th>
              <th>Subject</th>
              <th>Bounds</th>
              <th>Used</th>
              <th>Expires</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {grants.map((g, i) => (
              <tr data-grant={g.id}>
                <td>
                  <a class="mono" href={`${GRANTS_HREF}/${g.id}`}>
                    {g.id}
                  </a>
                  <div class="hint">{g.reason}</div>
                </td>
                <td>{g.tools.join(", ")}</td>
                <td>{subjectText(g.subject)}</td>
                <td>{boundsText(g)}</td>
                <td>{usedText(g, used[i]?.used ?? null)}</td>
                <td>{utc(g.expires_at)}</td>
                <td>
                  <StateBadge state={g.state} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {csrf && <GrantForm csrf={csrf} />}
    </>,
  );
}

async function showGrant(c: Context<ConsoleEnv>) {
  if (!canView(c))
    return problemPage(
      c,
      403,
      "Not allowed",
      "Grants are shown to API keys with the scope approvals:decide or runs:read.",
    );
  const id = c.req.param("id") ?? "";
  const { tenantId } = c.get("session");
  const g = GRANT_ID.test(id) ? await tenantStub(c.env, tenantId).showGrant(tenantId, id) : null;
  if (!g) return problemPage(c, 404, "No such grant", `There is no grant ${id} in this tenant.`);
  const flash = await takeFlash(c);
  const csrf = canDecide(c) ? c.get("session").csrf : null;
  const open = g.state === "live" || g.state === "proposed";
  return render(
    c,
    `Grant ${g.id}`,
    <>
      <h1>
        Grant <span class="mono">{g.id}</span> <StateBadge state={g.state} />
      </h1>
      <p class="lede">{g.reason}</p>
      <FlashBox flash={flash} />
      <dl class="facts">
        <dt>Tools</dt>
        <dd>{g.tools.join(", ")}</dd>
        <dt>Subject</dt>
        <dd>{subjectText(g.subject)}</dd>
        <dt>Bounds</dt>
        <dd>{boundsText(g)}</dd>
        <dt>Used</dt>
        <dd>{usedText(g, g.used)}</dd>
        <dt>Expires</dt>
        <dd>{utc(g.expires_at)}</dd>
        <dt>Made by</dt>
        <dd>
          {g.created_by} ({g.created_via}), {utc(g.created_at)}
        </dd>
        {g.four_eyes && (
          <>
            <dt>Confirmed by</dt>
            <dd>
              {g.confirmed_by && g.confirmed_at
                ? `${g.confirmed_by}, ${utc(g.confirmed_at)}`
                : "not yet (four eyes: another person than its proposer)"}
            </dd>
          </>
        )}
        {g.revoked_at && (
          <>
            <dt>Revoked</dt>
            <dd>
              {g.revoked_by}, {utc(g.revoked_at)}
            </dd>
          </>
        )}
      </dl>
      {csrf && open && (
        <div class="actions">
          {g.state === "proposed" && (
            <form method="post" action={`${GRANTS_HREF}/${g.id}/confirm`}>
              <input type="hidden" name="csrf" value={csrf} />
              <button type="submit">Confirm</button>
            </form>
          )}
          <form method="post" action={`${GRANTS_HREF}/${g.id}/revoke`}>
            <input type="hidden" name="csrf" value={csrf} />
            <button type="submit">Revoke</button>
          </form>
        </div>
      )}
      <h2>Uses</h2>
      {g.uses.length === 0 ? (
        <p class="empty">No call has used it.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Operation</th>
              <th>Amount</th>
              <th>When</th>
              <th>Counts</th>
            </tr>
          </thead>
          <tbody>
            {g.uses.map((u) => (
              <tr data-use={u.operation_id}>
                <td>
                  <a class="mono" href={`/console/operations/${u.operation_id}`}>
                    {u.operation_id}
                  </a>
                </td>
                <td>{u.amount ?? "—"}</td>
                <td>{utc(u.at)}</td>
                <td>{u.state === "held" ? "yes" : "no (nothing applied)"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>In the tenant's chain</h2>
      <p class="hint" data-chain={g.chain.check.ok ? "ok" : "broken"}>
        {g.chain.check.ok
          ? `The tenant's chain checks out (${g.chain.check.events} entries).`
          : `The tenant's chain is broken at entry ${g.chain.check.broken_at.seq}.`}
      </p>
      <ol>
        {g.chain.entries.map((e) => (
          <li>
            {utc(e.at_ms)}: {e.type.replace("grant_", "")}
            {"by" in e ? ` by ${String(e.by)}` : ""}
            {"operation_id" in e ? ` — ${String(e.operation_id)}` : ""}
          </li>
        ))}
      </ol>
    </>,
  );
}

const GrantForm = ({ csrf }: { csrf: string }) => (
  <form method="post" action={GRANTS_HREF} class="stack card" aria-label="Make a grant">
    <h2>Make a grant</h2>
    <input type="hidden" name="csrf" value={csrf} />
    <div>
      <label for="grant-tools">Tools (comma-separated)</label>
      <input type="text" id="grant-tools" name="tools" required />
    </div>
    <div>
      <label for="grant-subject-field">Subject: context field (empty: any subject)</label>
      <input type="text" id="grant-subject-field" name="subject_field" placeholder="customer_id" />
      <label for="grant-subject-value">Its value</label>
      <input type="text" id="grant-subject-value" name="subject_value" />
    </div>
    <div>
      <label for="grant-field">Bounded argument</label>
      <input type="text" id="grant-field" name="field" placeholder="amount" />
      <label for="grant-per-call">Per call at most</label>
      <input type="number" id="grant-per-call" name="per_call_max" min="0" step="any" />
      <label for="grant-total">In all at most</label>
      <input type="number" id="grant-total" name="total_max" min="0" step="any" />
      <label for="grant-count">Calls at most</label>
      <input type="number" id="grant-count" name="count" min="1" step="1" />
    </div>
    <div>
      <label for="grant-expires">Expires at (UTC)</label>
      <input id="grant-expires" name="expires_at" type="datetime-local" required />
    </div>
    <div>
      <label for="grant-reason">Reason</label>
      <input type="text" id="grant-reason" name="reason" required maxlength={500} />
    </div>
    <button type="submit">Make grant</button>
  </form>
);

const text = z.string().trim().default("");
const FormFields = z.object({
  tools: text,
  subject_field: text,
  subject_value: text,
  field: text,
  per_call_max: text,
  total_max: text,
  count: text,
  expires_at: text,
  reason: z.string().default(""),
});

/** The form as the API's body: the same strict schema, so the console accepts nothing the API refuses. */
function bodyOf(form: Record<string, unknown>) {
  const fields = FormFields.safeParse(form);
  if (!fields.success) return fields;
  const f = fields.data;
  const num = (name: string, s: string) => (s === "" ? {} : { [name]: Number(s) });
  return GrantBody.safeParse({
    tools: f.tools
      .split(",")
      .map((t) => t.trim())
      .filter((t) => t !== ""),
    subject: f.subject_field === "" ? "any" : { [`context.${f.subject_field}`]: f.subject_value },
    ...(f.field ? { field: f.field } : {}),
    ...num("per_call_max", f.per_call_max),
    ...num("total_max", f.total_max),
    ...num("count", f.count),
    // datetime-local has no zone: read as UTC, as every time on the console is shown.
    expires_at: f.expires_at
      ? `${f.expires_at.length === 16 ? `${f.expires_at}:00` : f.expires_at}Z`
      : "",
    reason: f.reason,
  });
}

async function createGrant(c: Context<ConsoleEnv>) {
  if (!canDecide(c)) return notAllowed(c, "Making a grant");
  const body = bodyOf(await c.req.parseBody());
  if (!body.success) {
    await setFlash(c, { tone: "error", text: `No grant was made: ${describeInvalid(body.error)}` });
    return c.redirect(GRANTS_HREF, 303);
  }
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const grant = grantOf(`gr_${ulid()}`, body.data, by, Date.now());
  if (!grant.ok) {
    await setFlash(c, { tone: "error", text: `No grant was made: ${grant.error.detail}` });
    return c.redirect(GRANTS_HREF, 303);
  }
  const { tenantId } = c.get("session");
  const made = await tenantStub(c.env, tenantId).createGrant(tenantId, grant.value);
  await setFlash(c, {
    tone: "ok",
    text:
      made.grant.state === "proposed"
        ? `Grant ${made.grant.id} is proposed: another person must confirm it before it covers any call.`
        : `Grant ${made.grant.id} is live (${made.runs_told} runs told).`,
  });
  return c.redirect(`${GRANTS_HREF}/${made.grant.id}`, 303);
}

async function changeGrant(c: Context<ConsoleEnv>, change: "confirm" | "revoke") {
  if (!canDecide(c)) return notAllowed(c, change === "confirm" ? "Confirming" : "Revoking");
  const id = c.req.param("id") ?? "";
  if (!GRANT_ID.test(id))
    return problemPage(c, 404, "No such grant", `There is no grant ${id} in this tenant.`);
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const { tenantId } = c.get("session");
  const tenant = tenantStub(c.env, tenantId);
  if (change === "revoke") {
    const revoked = await tenant.revokeGrant(tenantId, id, by.id);
    await setFlash(
      c,
      revoked
        ? { tone: "ok", text: `Grant ${id} is revoked: calls not yet sent under it ask a person.` }
        : { tone: "error", text: `There is no grant ${id}: nothing was revoked.` },
    );
  } else {
    const confirmed = await tenant.confirmGrant(tenantId, id, by.id);
    await setFlash(
      c,
      confirmed.ok
        ? { tone: "ok", text: `Grant ${id} is confirmed by ${by.id} and live.` }
        : { tone: "error", text: `Not confirmed: ${confirmed.error.detail}` },
    );
  }
  return c.redirect(`${GRANTS_HREF}/${id}`, 303);
}

export const grantsPage = definePage({
  nav: { label: "Grants", href: GRANTS_HREF },
  routes: consoleRoutes()
    .get("/grants", showGrants)
    .post("/grants", createGrant)
    .get("/grants/:id", showGrant)
    .post("/grants/:id/confirm", (c) => changeGrant(c, "confirm"))
    .post("/grants/:id/revoke", (c) => changeGrant(c, "revoke")),
});
