// The console as a signed-in person sees it, through the Worker's public HTTP API: the sign-in form
// (its CSRF token and login cookie), the POST with a tenant key, then the page with the session cookie.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { testTenant } from "./api.ts";

/** The console page at `path`, signed in with `key` (default: the shared test tenant's). */
export async function consolePage(path: string, key?: string): Promise<string> {
  return (await consoleSession(key)).get(path);
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
