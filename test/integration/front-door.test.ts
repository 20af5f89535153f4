// `GET /`: the front door of a running toolgate points at the console and the API docs (a page for
// a browser, JSON for a program), never a JSON 404; its links start where every link toolgate makes
// starts (config.ts consoleOrigin: TOOLGATE_CONSOLE_URL, unset here, so the request's origin).
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

const get = (path: string, accept: string) =>
  (exports as unknown as { default: Fetcher }).default.fetch(
    new Request(`http://toolgate.test${path}`, { headers: { Accept: accept } }),
  );

describe("GET /", { timeout: 60_000 }, () => {
  it("a program gets the console's, the docs' and the OpenAPI document's URLs", async () => {
    const res = await get("/", "application/json");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      name: "toolgate",
      console: "http://toolgate.test/console",
      docs: "http://toolgate.test/docs",
      openapi: "http://toolgate.test/openapi.json",
    });
  });

  it("a browser gets a page linking to both", async () => {
    const res = await get("/", "text/html,application/xhtml+xml");
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toContain("text/html");
    const page = await res.text();
    expect(page).toContain('href="http://toolgate.test/console"');
    expect(page).toContain('href="http://toolgate.test/docs"');
  });
});
