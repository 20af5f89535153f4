// /console/freezes (issue 34): the tenant's freezes — those in force (scope, mode, reason, who, when,
// until when) with a Lift button, the latest lifted ones, whether the chain of freezes and lifts
// checks out, a form to freeze now (scope, mode, writes only, reason, expiry), and the tenant's
// tripwires with the freezes each made (a trip's freeze names its tripwire in its scope). Viewing needs
// freezes:write or runs:read, like GET /v1/freezes; the forms (CSRF-checked POSTs, as every
// console POST) need freezes:write and go through the same schema and store as the API.
import type { Context } from "hono";
import { z } from "zod";
import { FreezeBody, freezeOf, type FreezeView } from "../domain/freeze.ts";
import { describeSubject } from "../domain/limit/claims.ts";
import type { tripwireView } from "../domain/tripwire.ts";
import { tenantStub } from "../durable/stubs.ts";
import { FREEZE_ID } from "../http/freezes-routes.ts";
import { describeInvalid } from "../domain/invalid-input.ts";
import { utc } from "./format.ts";
import { setFlash, takeFlash } from "./flash.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";

export const FREEZES_HREF = "/console/freezes";
const SCOPES = ["tenant", "tool", "origin", "user", "run"] as const;

async function showFreezes(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  const canWrite = session.scopes.includes("freezes:write");
  if (!canWrite && !session.scopes.includes("runs:read"))
    return problemPage(
      c,
      403,
      "Not allowed",
      "Freezes are shown to API keys with the scope freezes:write or runs:read.",
    );
  const tenant = tenantStub(c.env, session.tenantId);
  const [listed, { tripwires }, flash] = await Promise.all([
    tenant.listFreezes(),
    tenant.listTripwires(),
    takeFlash(c),
  ]);
  const csrf = canWrite ? session.csrf : null;
  return render(
    c,
    "Freezes",
    <>
      <h1>Freezes</h1>
      <p class="lede">
        Stop calls now: a hold parks them (nothing sent) until the lift, a refuse ends those not yet
        sent. Calls whose outcome is unknown keep their lock; status lookups go on.
      </p>
      <FlashBox flash={flash} />
      <h2>In force</h2>
      {listed.freezes.length === 0 ? (
        <p class="empty">Nothing is frozen.</p>
      ) : (
        <FreezeTable freezes={listed.freezes} csrf={csrf} />
      )}
      {csrf && <FreezeForm csrf={csrf} />}
      <h2>Lifted</h2>
      {listed.lifted.length === 0 ? (
        <p class="empty">No freeze has been lifted.</p>
      ) : (
        <FreezeTable freezes={listed.lifted} csrf={null} />
      )}
      <p class="hint" data-chain={listed.chain.ok ? "ok" : "broken"}>
        {listed.chain.ok
          ? `The chain of freezes and lifts checks out (${listed.chain.events} entries).`
          : `The chain of freezes and lifts is broken at entry ${listed.chain.broken_at.seq}.`}
      </p>
      <h2>Tripwires</h2>
      {tripwires.length === 0 ? (
        <p class="empty">No tripwire is set (PUT /v1/tripwires/&#123;id&#125;).</p>
      ) : (
        <TripwireTable tripwires={tripwires} freezes={[...listed.freezes, ...listed.lifted]} />
      )}
    </>,
  );
}

/** "tool refund", "the whole tenant", "tripwire tw1: customer_id cus_1, tool refund", … */
export const scopeText = (scope: FreezeView["scope"]) =>
  "tenant" in scope
    ? "the whole tenant"
    : "tripwire" in scope
      ? `tripwire ${scope.tripwire}: ${describeSubject(scope.subject)}${scope.tool ? `, tool ${scope.tool}` : ""}`
      : Object.entries(scope)
          .map(([kind, value]) => `${kind} ${String(value)}`)
          .join(", ");

/** A freeze's scope; a trip's freeze links to the tripwire that made it. */
const ScopeCell = ({ freeze }: { freeze: FreezeView }) => (
  <td>
    {"tripwire" in freeze.scope ? (
      <a href={`#tripwire-${freeze.scope.tripwire}`} data-made-by={freeze.scope.tripwire}>
        {scopeText(freeze.scope)}
      </a>
    ) : (
      scopeText(freeze.scope)
    )}
    {freeze.writes_only ? " (writes only)" : ""}
  </td>
);

/** The tenant's tripwires: what each counts, when it trips, what it does then, the freezes it made. */
const TripwireTable = ({
  tripwires,
  freezes,
}: {
  tripwires: Array<ReturnType<typeof tripwireView>>;
  freezes: FreezeView[];
}) => (
  <table>
    <thead>
      <tr>
        <th>Tripwire</th>
        <th>Measure</th>
        <th>Tool</th>
        <th>Subject</th>
        <th>Window</th>
        <th>Threshold</th>
        <th>Then</th>
        <th>Freezes made</th>
      </tr>
    </thead>
    <tbody>
      {tripwires.map((t) => {
        const made = freezes.filter((f) => "tripwire" in f.scope && f.scope.tripwire === t.id);
        return (
          <tr id={`tripwire-${t.id}`} data-tripwire={t.id}>
            <td class="mono">{t.id}</td>
            <td class="mono">{t.measure}</td>
            <td>{t.tool ?? "every write"}</td>
            <td>{t.subject}</td>
            <td>{t.window}</td>
            <td>
              {t.threshold}
              {"min_calls" in t ? ` (after ${t.min_calls} calls)` : ""}
            </td>
            <td>
              <span class={`badge ${t.then.mode === "refuse" ? "failed" : "pending"}`}>
                {t.then.mode}
              </span>{" "}
              {t.then.reason}
            </td>
            <td>
              {made.length === 0
                ? "none"
                : made.map((f, i) => (
                    <>
                      {i > 0 ? ", " : ""}
                      <a class="mono" href={`#freeze-${f.id}`}>
                        {f.id}
                      </a>
                    </>
                  ))}
            </td>
          </tr>
        );
      })}
    </tbody>
  </table>
);

const FreezeTable = ({
  freezes,
  csrf,
}: {
  freezes: Array<FreezeView & { lifted_at?: string }>;
  /** Only for the freezes in force of a freezes:write session: the Lift forms' token. */
  csrf: string | null;
}) => (
  <table>
    <thead>
      <tr>
        <th>Freeze</th>
        <th>Scope</th>
        <th>Mode</th>
        <th>Reason</th>
        <th>By, when</th>
        <th>{csrf ? "Until" : "Lifted"}</th>
        {csrf && <th>Lift</th>}
      </tr>
    </thead>
    <tbody>
      {freezes.map((f) => (
        <tr id={`freeze-${f.id}`} data-freeze={f.id}>
          <td class="mono">{f.id}</td>
          <ScopeCell freeze={f} />
          <td>
            <span class={`badge ${f.mode === "refuse" ? "failed" : "pending"}`}>{f.mode}</span>
          </td>
          <td>{f.reason}</td>
          <td>
            {f.created_by}, {utc(f.created_at)}
          </td>
          <td>
            {f.lifted_at ? utc(f.lifted_at) : f.expires_at ? utc(f.expires_at) : "until lifted"}
          </td>
          {csrf && (
            <td>
              <form method="post" action={`${FREEZES_HREF}/${encodeURIComponent(f.id)}/lift`}>
                <input type="hidden" name="csrf" value={csrf} />
                <button type="submit" aria-label={`Lift ${f.id}`}>
                  Lift
                </button>
              </form>
            </td>
          )}
        </tr>
      ))}
    </tbody>
  </table>
);

const FreezeForm = ({ csrf }: { csrf: string }) => (
  <form method="post" action={FREEZES_HREF} class="stack card" aria-label="Freeze calls">
    <h2>Freeze now</h2>
    <input type="hidden" name="csrf" value={csrf} />
    <div>
      <label for="freeze-id">Name</label>
      <input
        type="text"
        id="freeze-id"
        name="id"
        required
        pattern={FREEZE_ID.source}
        maxlength={100}
      />
    </div>
    <div>
      <label for="freeze-scope">Scope</label>
      <select id="freeze-scope" name="scope">
        {SCOPES.map((s) => (
          <option value={s}>{s}</option>
        ))}
      </select>
      <label for="freeze-value">Tool, origin, user or run</label>
      <input type="text" id="freeze-value" name="value" aria-describedby="freeze-value-hint" />
      <p class="hint" id="freeze-value-hint">
        Empty for the whole tenant; an origin is scheme, host and port, e.g.
        https://api.example.com.
      </p>
    </div>
    <fieldset>
      <legend>Mode</legend>
      <div class="choice">
        <input type="radio" id="freeze-hold" name="mode" value="hold" required checked />
        <label for="freeze-hold">Hold: park calls, continue them after the lift</label>
      </div>
      <div class="choice">
        <input type="radio" id="freeze-refuse" name="mode" value="refuse" />
        <label for="freeze-refuse">Refuse: end calls not yet sent (rejected, nothing sent)</label>
      </div>
    </fieldset>
    <div class="choice">
      <input type="checkbox" id="freeze-writes" name="writes_only" value="1" />
      <label for="freeze-writes">Writes only (reads still run)</label>
    </div>
    <div>
      <label for="freeze-reason">Reason</label>
      <input type="text" id="freeze-reason" name="reason" required maxlength={500} />
    </div>
    <div>
      <label for="freeze-expires">Lifts by itself at (UTC, optional)</label>
      <input id="freeze-expires" name="expires_at" type="datetime-local" />
    </div>
    <button type="submit">Freeze</button>
  </form>
);

const FormFields = z.object({
  id: z.string().regex(FREEZE_ID),
  scope: z.enum(SCOPES),
  value: z.string().trim().default(""),
  mode: z.string(),
  writes_only: z.literal("1").optional(),
  reason: z.string(),
  expires_at: z.string().default(""),
});

/** The form as the API's body: the same strict schema, so the console accepts nothing the API refuses. */
function bodyOf(form: Record<string, unknown>) {
  const fields = FormFields.safeParse(form);
  if (!fields.success) return fields;
  const { scope, value, expires_at, writes_only, mode, reason } = fields.data;
  return FreezeBody.safeParse({
    scope: scope === "tenant" ? { tenant: true } : { [scope]: value },
    mode,
    reason,
    ...(writes_only ? { writes_only: true } : {}),
    // datetime-local has no zone: read as UTC, as every time on the console is shown.
    ...(expires_at
      ? { expires_at: `${expires_at.length === 16 ? `${expires_at}:00` : expires_at}Z` }
      : {}),
  });
}

async function createFreeze(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  if (!session.scopes.includes("freezes:write"))
    return problemPage(c, 403, "Not allowed", "Freezing needs the scope freezes:write.");
  const form = await c.req.parseBody();
  const body = bodyOf(form);
  const id = typeof form.id === "string" ? form.id : "";
  if (!body.success) {
    await setFlash(c, {
      tone: "error",
      text: `Nothing was frozen: ${describeInvalid(body.error)}`,
    });
    return c.redirect(FREEZES_HREF, 303);
  }
  const freeze = freezeOf(id, body.data, session.keyName, Date.now());
  if (!freeze.ok) {
    await setFlash(c, { tone: "error", text: `Nothing was frozen: ${freeze.error.detail}` });
    return c.redirect(FREEZES_HREF, 303);
  }
  const put = await tenantStub(c.env, session.tenantId).putFreeze(session.tenantId, freeze.value);
  await setFlash(c, {
    tone: "ok",
    text: `Freeze ${id} is in force (${put.runs_told} runs told${put.runs_pending ? `, ${put.runs_pending} to follow` : ""}).`,
  });
  return c.redirect(FREEZES_HREF, 303);
}

async function liftFreeze(c: Context<ConsoleEnv>) {
  const session = c.get("session");
  if (!session.scopes.includes("freezes:write"))
    return problemPage(c, 403, "Not allowed", "Lifting needs the scope freezes:write.");
  const id = c.req.param("id") ?? "";
  const lifted = FREEZE_ID.test(id)
    ? await tenantStub(c.env, session.tenantId).deleteFreeze(session.tenantId, id, session.keyName)
    : null;
  await setFlash(
    c,
    lifted
      ? { tone: "ok", text: `Freeze ${id} lifted: what it held continues, a batch at a time.` }
      : { tone: "error", text: `No freeze ${id} is in force: nothing was lifted.` },
  );
  return c.redirect(FREEZES_HREF, 303);
}

export const freezesPage = definePage({
  nav: { label: "Freezes", href: FREEZES_HREF },
  routes: consoleRoutes()
    .get("/freezes", showFreezes)
    .post("/freezes", createFreeze)
    .post("/freezes/:id/lift", liftFreeze),
});
