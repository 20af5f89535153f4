// Sign-in and sign-out. A person pastes a tenant API key once; toolgate checks it as the API does
// (its tag in the Worker, then hashed, constant time, not revoked, by the tenant's own object) and
// answers with a short session cookie (HttpOnly, Secure, SameSite=Strict, Path=/console). The key
// itself is never stored in the browser. The form is protected against login CSRF by a nonce cookie
// set when the form was served.
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { randomSecret } from "../crypto.ts";
import { checkApiKey } from "../http/api-keys.ts";
import { problemPage, render } from "./layout.tsx";
import { consoleRoutes, type ConsoleEnv } from "./page.ts";
import {
  LOGIN_TTL_MS,
  loginToken,
  loginTokenValid,
  sealSession,
  SESSION_TTL_MS,
} from "./session.ts";
import { SIGNING_KEY_MISSING, signingKeyOf } from "../config.ts";

export const SESSION_COOKIE = "tg_console";
const LOGIN_COOKIE = "tg_console_login";
const COOKIE = { httpOnly: true, secure: true, sameSite: "Strict", path: "/console" } as const;

/** Only a path inside the console may be a post-sign-in destination (no open redirect). */
export function safeNext(next: unknown): string {
  return typeof next === "string" &&
    /^\/console(\/[A-Za-z0-9_\-/]*)?$/.test(next) &&
    !next.includes("//")
    ? next
    : "/console";
}

export function signingKey(c: Context<ConsoleEnv>): string | null {
  return signingKeyOf(c.env);
}

/** The page for a deployment without a signing key: no session can be sealed or opened (500). */
export const signingKeyMissing = (c: Context<ConsoleEnv>, consequence = "") =>
  problemPage(c, 500, "Console unavailable", `${SIGNING_KEY_MISSING}${consequence}.`);

const ENDED: Record<string, string> = {
  signed_out: "You are signed out.",
  expired: "Your session ended: it expired, or its API key was revoked. Sign in again to continue.",
};

async function signInForm(
  c: Context<ConsoleEnv>,
  options: { error?: string; notice?: string; next: string; status?: 200 | 401 | 403 },
) {
  const key = signingKey(c);
  if (!key) return signingKeyMissing(c, ", so the console cannot sign anyone in");
  const nonce = randomSecret();
  setCookie(c, LOGIN_COOKIE, nonce, { ...COOKIE, maxAge: LOGIN_TTL_MS / 1000 });
  const token = await loginToken(key, nonce);
  return render(
    c,
    "Sign in",
    <section aria-labelledby="sign-in-title" class="panel">
      <h1 id="sign-in-title">Sign in</h1>
      <p class="lede">
        Use a tenant API key. It is checked once and never kept in your browser; the session ends
        after {SESSION_TTL_MS / 60_000} minutes or when the key is revoked.
      </p>
      {options.notice && (
        <div class="notice" role="status">
          <p>{options.notice}</p>
        </div>
      )}
      {options.error && (
        <div class="alert" role="alert" id="sign-in-error">
          <p>{options.error}</p>
        </div>
      )}
      <form class="stack" method="post" action="/console/sign-in">
        <input type="hidden" name="csrf" value={token} />
        <input type="hidden" name="next" value={options.next} />
        <div>
          <label for="api_key">Tenant API key</label>
          <p class="hint" id="api_key_hint">
            Starts with <code>tgk.</code> — issued by{" "}
            <code>POST /v1/admin/tenants/{"{tenant}"}/keys</code>.
          </p>
          <input
            type="password"
            id="api_key"
            name="api_key"
            required
            autocomplete="off"
            spellcheck={false}
            aria-describedby={options.error ? "api_key_hint sign-in-error" : "api_key_hint"}
            aria-invalid={options.error ? "true" : undefined}
          />
        </div>
        <div>
          <button type="submit">Sign in</button>
        </div>
      </form>
    </section>,
    options.status ?? 200,
  );
}

export const signInRoutes = consoleRoutes()
  .get("/sign-in", (c) =>
    signInForm(c, {
      next: safeNext(c.req.query("next")),
      notice: ENDED[c.req.query("ended") ?? ""],
    }),
  )
  .post("/sign-in", async (c) => {
    const key = signingKey(c);
    if (!key) return signingKeyMissing(c);
    const form = await c.req.parseBody();
    const next = safeNext(form.next);
    if (!(await loginTokenValid(key, getCookie(c, LOGIN_COOKIE), form.csrf))) {
      return problemPage(
        c,
        403,
        "Sign-in form expired",
        "This sign-in form was not issued to this browser session (or it is older than 15 minutes). Nothing was done. Open the sign-in page again.",
        { href: "/console/sign-in", label: "Sign in again" },
      );
    }
    const nowMs = Date.now();
    // The API's own check: a key whose tag is wrong never reaches the tenant's object.
    const checked =
      typeof form.api_key === "string"
        ? await checkApiKey(c.env, key, form.api_key.trim(), nowMs)
        : null;
    if (!checked?.ok)
      return signInForm(c, {
        error:
          checked?.code === "api_key_outdated"
            ? "That API key has the old format and cannot be checked right now. Ask your admin to issue a new key, then sign in with it."
            : "That API key is not valid, or it has been revoked. Check it and try again.",
        next,
        status: 401,
      });
    const token = await sealSession(key, {
      sid: randomSecret(),
      tenantId: checked.key.tenantId,
      keyId: checked.key.keyId,
      keyName: checked.key.name,
      scopes: checked.key.scopes,
      expiresAtMs: nowMs + SESSION_TTL_MS,
    });
    deleteCookie(c, LOGIN_COOKIE, COOKIE);
    setCookie(c, SESSION_COOKIE, token, { ...COOKIE, maxAge: SESSION_TTL_MS / 1000 });
    return c.redirect(next, 303);
  });

export function endSession(c: Context<ConsoleEnv>) {
  deleteCookie(c, SESSION_COOKIE, COOKIE);
}
