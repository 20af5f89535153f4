// /console/passkeys (issue 35): a person's passkeys for step-up approvals — the ones registered to
// them (the decider: the person Access verified, else the session's key name), the registration
// options (GET /console/passkeys/options, JSON, over a challenge bound to this session) and the
// registration itself (POST, the browser's credential as JSON in `response`, CSRF like every form).
// The browser side is /console/assets/passkey.js; an approval card of a step-up tool uses it too.
import type { Context } from "hono";
import { tenantStub } from "../durable/stubs.ts";
import { registerPasskey, registrationOptions } from "../http/passkey.ts";
import { ApiProblem } from "../http/problem.ts";
import { PasskeyRegistration } from "../http/schemas.ts";
import { consoleDecider } from "./approvals.tsx";
import { setFlash, takeFlash } from "./flash.ts";
import { FlashBox, problemPage, render } from "./layout.tsx";
import { consoleRoutes, definePage, type ConsoleEnv } from "./page.ts";
import { passkeyRegistrationChallenge } from "./session.ts";
import { signingKey } from "./sign-in.tsx";
import { utc } from "./format.ts";

const HOME = "/console/passkeys";

const challengeOf = (c: Context<ConsoleEnv>) =>
  passkeyRegistrationChallenge(signingKey(c)!, c.get("session").sid);

async function showPasskeys(c: Context<ConsoleEnv>) {
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const tenant = tenantStub(c.env, c.get("session").tenantId);
  const [mine, flash] = await Promise.all([tenant.passkeysOf(by.id), takeFlash(c)]);
  return render(
    c,
    "Passkeys",
    <>
      <h1>Passkeys</h1>
      <p class="lede">
        A tool may ask for a passkey before a person approves it (<code>approval.step_up</code>):
        the passkey signs that one call's arguments, so a stolen session cannot approve it. Passkeys
        here belong to <span class="mono">{by.id}</span>.
      </p>
      <FlashBox flash={flash} />
      {mine.length === 0 ? (
        <p class="empty">No passkey is registered to you yet.</p>
      ) : (
        <ul data-role="passkeys">
          {mine.map((passkey) => (
            <li>
              <span class="mono">{passkey.credential_id}</span>, registered{" "}
              {utc(new Date(passkey.created_at_ms).toISOString())}
            </li>
          ))}
        </ul>
      )}
      <form method="post" action={HOME} class="stack" id="passkey-register">
        <input type="hidden" name="csrf" value={c.get("session").csrf} />
        <input type="hidden" name="response" value="" />
        <button type="button" data-passkey="register" data-options={`${HOME}/options`}>
          Register a passkey
        </button>
      </form>
      <script src="/console/assets/passkey.js" defer></script>
    </>,
  );
}

async function options(c: Context<ConsoleEnv>) {
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const tenantId = c.get("session").tenantId;
  return c.json(await registrationOptions(c.env, c.req.url, tenantId, by.id, await challengeOf(c)));
}

async function register(c: Context<ConsoleEnv>) {
  const by = await consoleDecider(c);
  if (by instanceof Response) return by;
  const form = await c.req.parseBody();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(typeof form.response === "string" ? form.response : "");
  } catch {}
  const registration = PasskeyRegistration.safeParse(parsed);
  if (!registration.success)
    return problemPage(
      c,
      400,
      "Not registered",
      "The browser's answer was not a passkey registration.",
    );
  try {
    await registerPasskey(
      c.env,
      c.req.url,
      c.get("session").tenantId,
      by.id,
      await challengeOf(c),
      registration.data,
      Date.now(),
    );
  } catch (error) {
    if (!(error instanceof ApiProblem)) throw error;
    return problemPage(c, 400, "Not registered", error.error.detail);
  }
  await setFlash(c, { tone: "ok", text: `Passkey registered for ${by.id}.` });
  return c.redirect(HOME, 303);
}

export const passkeysPage = definePage({
  nav: { label: "Passkeys", href: HOME },
  routes: consoleRoutes()
    .get("/passkeys", showPasskeys)
    .get("/passkeys/options", options)
    .post("/passkeys", register),
});
