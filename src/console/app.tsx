// The console app, mounted at /console (outside the /v1 bearer-token middleware). Order matters:
// security headers and a body limit on everything; the stylesheet and sign-in are public; every
// other route needs a session whose key is re-verified with the tenant on this request (so a
// revoked key ends its sessions at once), and every POST needs this session's CSRF token and, when
// the browser sends one, a same-origin Origin. GETs never change state (mail scanners prefetch).
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { getCookie } from "hono/cookie";
import { tenantStub } from "../durable/stubs.ts";
import { problemPage } from "./layout.tsx";
import type { ConsoleEnv } from "./page.ts";
import { PAGES } from "./pages.ts";
import { csrfToken, csrfValid, openSession } from "./session.ts";
import {
  endSession,
  SESSION_COOKIE,
  signingKey,
  signingKeyMissing,
  signInRoutes,
} from "./sign-in.tsx";
import { CONSOLE_CSS } from "./styles.ts";
import { PASSKEY_JS } from "./passkey-script.ts";

const MAX_FORM_BYTES = 16 * 1024;
const CSP =
  "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const securityHeaders: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  await next();
  c.header("Content-Security-Policy", CSP);
  c.header("X-Content-Type-Options", "nosniff");
  c.header("X-Frame-Options", "DENY");
  // same-origin, not no-referrer: under no-referrer a form POST's Origin header becomes "null".
  c.header("Referrer-Policy", "same-origin");
  if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
};

const requireSession: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  const key = signingKey(c);
  if (!key) return signingKeyMissing(c);
  const claims = await openSession(key, getCookie(c, SESSION_COOKIE), Date.now());
  const current = claims ? await tenantStub(c.env, claims.tenantId).keyInfo(claims.keyId) : null;
  if (!claims || !current?.ok) {
    if (claims) endSession(c);
    if (c.req.method === "GET" || c.req.method === "HEAD") {
      const next = encodeURIComponent(c.req.path);
      return c.redirect(`/console/sign-in?next=${next}${claims ? "&ended=expired" : ""}`, 303);
    }
    return problemPage(
      c,
      403,
      "Not signed in",
      "Your console session has ended (or never began), so nothing was done. Sign in and try again.",
      { href: "/console/sign-in", label: "Sign in" },
    );
  }
  // Never more than the key held at sign-in, never more than it holds now.
  const scopes = claims.scopes.filter((scope) => current.value.scopes.includes(scope));
  c.set("session", {
    ...claims,
    keyName: current.value.name,
    scopes,
    csrf: await csrfToken(key, claims.sid),
  });
  return next();
};

const requireCsrf: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  if (c.req.method === "GET" || c.req.method === "HEAD") return next();
  const origin = c.req.header("Origin");
  const form = /^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(
    c.req.header("Content-Type") ?? "",
  )
    ? await c.req.parseBody()
    : {};
  const sameOrigin = origin === undefined || origin === new URL(c.req.url).origin;
  if (!sameOrigin || !(await csrfValid(signingKey(c)!, c.get("session").sid, form.csrf))) {
    return problemPage(
      c,
      403,
      "Request refused",
      "This form did not come from your console session (its security token is missing or wrong), so nothing was done. Reload the page and try again.",
    );
  }
  return next();
};

export const consoleApp = new Hono<ConsoleEnv>();

consoleApp.use("*", securityHeaders);
consoleApp.use(
  "*",
  bodyLimit({
    maxSize: MAX_FORM_BYTES,
    onError: (c) =>
      problemPage(
        c as Context<ConsoleEnv>,
        413,
        "Too large",
        `Console forms are limited to ${MAX_FORM_BYTES} bytes.`,
      ),
  }),
);
consoleApp.get("/assets/console.css", (c) =>
  c.body(CONSOLE_CSS, 200, {
    "Content-Type": "text/css; charset=utf-8",
    "Cache-Control": "public, max-age=300",
  }),
);
// The passkey step-up's browser side (issue 35): the console's only script, public like the stylesheet.
consoleApp.get("/assets/passkey.js", (c) =>
  c.body(PASSKEY_JS, 200, {
    "Content-Type": "text/javascript; charset=utf-8",
    "Cache-Control": "public, max-age=300",
  }),
);
consoleApp.route("/", signInRoutes);
consoleApp.use("*", requireSession);
consoleApp.use("*", requireCsrf);
consoleApp.use("*", async (c, next) => {
  c.set(
    "nav",
    PAGES.flatMap((page) => (page.nav ? [page.nav] : [])),
  );
  return next();
});
consoleApp.post("/sign-out", (c) => {
  endSession(c);
  return c.redirect("/console/sign-in?ended=signed_out", 303);
});
for (const page of PAGES) consoleApp.route("/", page.routes);
consoleApp.all("*", (c) =>
  problemPage(c, 404, "Not found", "There is no console page at this address."),
);
consoleApp.onError((error, c) => {
  console.error("console error", error);
  return problemPage(
    c,
    500,
    "Something went wrong",
    "toolgate could not complete this request. Try again; if you submitted a form, check its result before you submit it again.",
  );
});
