// The console as a signed-in person sees it, through the Worker's public HTTP API: the sign-in form
// (its CSRF token and login cookie), the POST with a tenant key, then pages with the session cookie
// (`consoleAs`: GET a page with the flash of the last POST, POST a form with the session's token).
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { testTenant } from "./api.ts";

const ORIGIN = "http://toolgate.test";
const fetcher = () => (exports as unknown as { default: Fetcher }).default;

async function send(request: Request) {
  const response = await fetcher().fetch(request);
  return { status: response.status, text: await response.text(), headers: response.headers };
}
const cookiePair = (setCookie: string) => setCookie.split(";")[0]!;
/** A hidden form field's value on a console page ("" when the page has none). */
export const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? "";

/** A signed-in console session: GET a page (with the flash of the last POST), POST a form. */
export async function consoleAs(key: string) {
  const form = await fetcher().fetch(
    new Request(`${ORIGIN}/console/sign-in`, { redirect: "manual" }),
  );
  const login = cookiePair(
    form.headers.getSetCookie().find((c) => c.startsWith("tg_console_login="))!,
  );
  const signedIn = await fetcher().fetch(
    new Request(`${ORIGIN}/console/sign-in`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: login },
      body: new URLSearchParams({
        csrf: hidden(await form.text(), "csrf"),
        next: "/console",
        api_key: key,
      }).toString(),
      redirect: "manual",
    }),
  );
  expect(signedIn.status).toBe(303);
  const session = cookiePair(
    signedIn.headers.getSetCookie().find((c) => c.startsWith("tg_console="))!,
  );
  let flash = "";
  const get = async (path: string) => {
    const cookie = flash ? `${session}; ${flash}` : session;
    flash = "";
    return send(
      new Request(`${ORIGIN}${path}`, { headers: { Cookie: cookie }, redirect: "manual" }),
    );
  };
  const csrf = async () => hidden((await get("/console")).text, "csrf");
  const post = async (path: string, fields: Record<string, string>, withCsrf = true) => {
    const body = new URLSearchParams({ ...(withCsrf ? { csrf: await csrf() } : {}), ...fields });
    const res = await send(
      new Request(`${ORIGIN}${path}`, {
        method: "POST",
        headers: {
          "Content-Type": "application/x-www-form-urlencoded",
          Origin: ORIGIN,
          Cookie: session,
        },
        body: body.toString(),
        redirect: "manual",
      }),
    );
    const set = res.headers.getSetCookie().find((c) => c.startsWith("tg_console_flash="));
    if (set) flash = cookiePair(set);
    return res;
  };
  return { get, post };
}

/** The console page at `path`, signed in with `key` (default: the shared test tenant's). */
export async function consolePage(path: string, key?: string): Promise<string> {
  const page = await (await consoleAs(key ?? (await testTenant()).key)).get(path);
  expect(page.status).toBe(200);
  return page.text;
}

/**
 * A signed-in console session for `key` (default: the shared test tenant's): `get` a page, `post`
 * a form with this session's CSRF token (extra headers such as an Access token pass through).
 */
export async function consoleSession(key?: string) {
  const fetcher = (exports as unknown as { default: Fetcher }).default;
  const pair = (r: Response, name: string) =>
    r.headers
      .getSetCookie()
      .find((c) => c.startsWith(`${name}=`))!
      .split(";")[0]!;
  const csrfOf = (html: string) => /name="csrf" value="([^"]*)"/.exec(html)?.[1] ?? "";
  const form = await fetcher.fetch(new Request("http://toolgate.test/console/sign-in"));
  const signedIn = await fetcher.fetch(
    new Request("http://toolgate.test/console/sign-in", {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Cookie: pair(form, "tg_console_login"),
      },
      body: new URLSearchParams({
        csrf: csrfOf(await form.text()),
        next: "/console",
        api_key: key ?? (await testTenant()).key,
      }),
      redirect: "manual",
    }),
  );
  const cookie = pair(signedIn, "tg_console");
  const get = async (path: string) =>
    (
      await fetcher.fetch(
        new Request(`http://toolgate.test${path}`, { headers: { Cookie: cookie } }),
      )
    ).text();
  const csrf = csrfOf(await get("/console"));
  const post = async (
    path: string,
    fields: Array<[string, string]>,
    headers: Record<string, string> = {},
  ) => {
    const response = await fetcher.fetch(
      new Request(`http://toolgate.test${path}`, {
        method: "POST",
        headers: {
          "Content-Type": "application/x-www-form-urlencoded",
          Cookie: cookie,
          ...headers,
        },
        body: new URLSearchParams([["csrf", csrf], ...fields]).toString(),
        redirect: "manual",
      }),
    );
    return { status: response.status, text: await response.text() };
  };
  return { get, post };
}
