// The console through the public HTTP surface (exports.default.fetch): sign-in with a tenant key,
// the session cookie's attributes, CSRF on every POST, revocation ending sessions, tenant scoping,
// and escaping of every value (run data and tool output are untrusted). The real-browser flow is
// test/e2e/console.test.ts.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN, api, manifest, newTenant, upstream } from "../support/api.ts";

const ORIGIN = "http://toolgate.test";

async function get(path: string, cookie?: string, headers: Record<string, string> = {}) {
  return send(new Request(`${ORIGIN}${path}`, { headers: { ...headers, ...(cookie ? { Cookie: cookie } : {}) }, redirect: "manual" }));
}

async function post(path: string, form: Record<string, string>, cookie?: string, headers: Record<string, string> = {}) {
  return send(
    new Request(`${ORIGIN}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers, ...(cookie ? { Cookie: cookie } : {}) },
      body: new URLSearchParams(form).toString(),
      redirect: "manual",
    }),
  );
}

async function send(request: Request) {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(request);
  return { status: response.status, text: await response.text(), headers: response.headers, cookies: response.headers.getSetCookie() };
}

const hidden = (html: string, name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? "";
const cookiePair = (setCookie: string) => setCookie.split(";")[0]!;

/** Signs in through the form; returns the session cookie and the page's CSRF token. */
async function signIn(key: string) {
  const form = await get("/console/sign-in");
  const login = cookiePair(form.cookies.find((c) => c.startsWith("tg_console_login="))!);
  const signedIn = await post("/console/sign-in", { csrf: hidden(form.text, "csrf"), next: "/console", api_key: key }, login);
  expect(signedIn.status).toBe(303);
  const session = cookiePair(signedIn.cookies.find((c) => c.startsWith("tg_console="))!);
  const home = await get("/console", session);
  expect(home.status).toBe(200);
  return { session, csrf: hidden(home.text, "csrf"), home };
}

describe("console sign-in and sessions", () => {
  it("redirects to sign-in, refuses a wrong key, and issues a strict short-lived cookie for a right one", async () => {
    const t = await newTenant(["runs:read", "traces:read"]);
    const anonymous = await get("/console");
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get("Location")).toBe("/console/sign-in?next=%2Fconsole");

    const form = await get("/console/sign-in");
    expect(form.status).toBe(200);
    expect(form.text).toMatch(/^<!DOCTYPE html>/);
    expect(form.text).toContain('<label for="api_key">');
    expect(form.headers.get("Content-Security-Policy")).toContain("default-src 'none'");
    const loginCookie = form.cookies.find((c) => c.startsWith("tg_console_login="))!;
    expect(loginCookie).toMatch(/HttpOnly/);
    expect(loginCookie).toMatch(/Secure/);
    expect(loginCookie).toMatch(/SameSite=Strict/);
    const login = cookiePair(loginCookie);
    const csrf = hidden(form.text, "csrf");

    const wrong = await post("/console/sign-in", { csrf, next: "/console", api_key: `${t.key}x` }, login);
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("That API key is not valid");
    expect(wrong.cookies.some((c) => c.startsWith("tg_console="))).toBe(false);

    // The sign-in form itself needs the nonce cookie it was served with (no login CSRF).
    expect((await post("/console/sign-in", { csrf, next: "/console", api_key: t.key })).status).toBe(403);

    const right = await post("/console/sign-in", { csrf, next: "/console/runs/../../v1", api_key: t.key }, login);
    expect(right.status).toBe(303);
    expect(right.headers.get("Location")).toBe("/console");
    const session = right.cookies.find((c) => c.startsWith("tg_console="))!;
    for (const attribute of ["HttpOnly", "Secure", "SameSite=Strict", "Path=/console", "Max-Age=1800"]) expect(session).toContain(attribute);
    expect(session).not.toContain(t.key.split(".")[3]!);

    const home = await get("/console", cookiePair(session));
    expect(home.status).toBe(200);
    expect(home.text).toContain(t.tenantId);
    expect(home.headers.get("Cache-Control")).toBe("no-store");
  });

  it("every POST needs this session's CSRF token and a same-origin Origin; a GET changes nothing", async () => {
    const t = await newTenant(["runs:read"]);
    const { session, csrf } = await signIn(t.key);
    expect(csrf.length).toBeGreaterThan(20);
    const other = await signIn(t.key);
    expect(other.csrf).not.toBe(csrf);

    expect((await post("/console/sign-out", {}, session)).status).toBe(403);
    expect((await post("/console/sign-out", { csrf: other.csrf }, session)).status).toBe(403);
    expect((await post("/console/sign-out", { csrf }, session, { Origin: "https://evil.example" })).status).toBe(403);
    expect((await post("/console/sign-out", { csrf }, session, { Origin: "null" })).status).toBe(403);
    expect((await get("/console/sign-out?csrf=" + csrf, session)).status).toBe(404);
    expect((await get("/console", session)).status).toBe(200);

    const out = await post("/console/sign-out", { csrf }, session, { Origin: ORIGIN });
    expect(out.status).toBe(303);
    expect(out.headers.get("Location")).toBe("/console/sign-in?ended=signed_out");
    expect(out.cookies.find((c) => c.startsWith("tg_console="))).toMatch(/Max-Age=0/);
  });

  it("a forged, tampered or foreign session cookie is no session", async () => {
    const t = await newTenant(["runs:read"]);
    const { session } = await signIn(t.key);
    const [name, value] = session.split("=") as [string, string];
    const [payload, signature] = value.split(".") as [string, string];
    const claims = JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/")));
    const forged = btoa(JSON.stringify({ ...claims, scopes: ["runs:read", "traces:read", "approvals:decide"] })).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    for (const cookie of [`${name}=${forged}.${signature}`, `${name}=${payload}.${signature}x`, `${name}=garbage`]) {
      expect((await get("/console", cookie)).status).toBe(303);
    }
  });

  it("revoking the key ends its sessions on the next request", async () => {
    const t = await newTenant(["runs:read"]);
    const { session } = await signIn(t.key);
    const revoked = await api("DELETE", `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`, undefined, { Authorization: `Bearer ${ADMIN}` });
    expect(revoked.status).toBeLessThan(300);
    const after = await get("/console", session);
    expect(after.status).toBe(303);
    expect(after.headers.get("Location")).toBe("/console/sign-in?next=%2Fconsole&ended=expired");
    expect((await get("/console/runs/run_01ARZ3NDEKTSV4RRFFQ69G5FAV", session)).status).toBe(303);
  });
});

describe("console run page", () => {
  it("shows the run and every transition, with every value escaped", async () => {
    const t = await newTenant(["runs:write", "runs:read", "tools:write", "traces:read"]);
    const up = upstream();
    const tool = manifest({ url: up.url });
    const auth = { Authorization: `Bearer ${t.key}` };
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
    const evil = `<script>alert("x")</script>`;
    const run = await api("POST", "/v1/runs", { user: { id: evil, scopes: [] }, tools: [tool.name], context: { note: `<img src=x onerror=alert(1)>` }, budgets: { max_turns: 5 } }, auth);
    const runId = run.body.run_id as string;
    await up.script({ kind: "status", status: 503 }, { kind: "ok" });
    const first = await api("POST", `/v1/runs/${runId}/turns?format=native`, { calls: [{ id: "call_<b>1</b>", name: tool.name, arguments: { amount: 5, currency: "usd" } }] }, { ...auth, Prefer: "wait=5" });
    const operationId = first.body.results[0].operation_id as string;

    const { session } = await signIn(t.key);
    const page = await get(`/console/runs/${runId}`, session);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain(evil);
    expect(page.text).not.toContain("<img src=x");
    expect(page.text).not.toContain("<b>1</b>");
    expect(page.text).toContain("&lt;script&gt;");
    expect(page.text).toContain(operationId);
    expect(page.text).toContain(tool.name);
    expect(page.text).toContain("Attempt 1 sent");
    expect(page.text).toContain("Attempt 1 answered");
    expect(page.text).toContain("Retry scheduled");
    expect(page.text).toMatch(/<th scope="row">Turns<\/th><td class="num">1<\/td><td class="num">5<\/td>/);

    // Another tenant's run is indistinguishable from a missing one; so is a malformed id.
    const stranger = await newTenant(["runs:read", "traces:read"]);
    const strangerSession = (await signIn(stranger.key)).session;
    const foreign = await get(`/console/runs/${runId}`, strangerSession);
    expect(foreign.status).toBe(404);
    expect(foreign.text).not.toContain(operationId);
    expect((await get(`/console/runs/not-a-run`, strangerSession)).status).toBe(404);
  });

  it("needs runs:read and traces:read; the open-a-run form only navigates", async () => {
    const t = await newTenant(["runs:read"]);
    const { session } = await signIn(t.key);
    const runId = "run_01ARZ3NDEKTSV4RRFFQ69G5FAV";
    expect((await get(`/console/runs/run_01ARZ3NDEKTSV4RRFFQ69G5FAV`, session)).status).toBe(403);
    expect((await get(`/console/runs?run_id=nope`, session)).status).toBe(400);
    const go = await get(`/console/runs?run_id=${runId}`, session);
    expect(go.status).toBe(303);
    expect(go.headers.get("Location")).toBe(`/console/runs/${runId}`);
  });

  it("placeholders for the approval and unknown-outcome queues are linked from the nav", async () => {
    const t = await newTenant(["runs:read"]);
    const { home, session } = await signIn(t.key);
    expect(home.text).toContain('href="/console/approvals"');
    expect(home.text).toContain('href="/console/unknown-outcomes"');
    expect((await get("/console/approvals", session)).status).toBe(200);
    expect((await get("/console/unknown-outcomes", session)).status).toBe(200);
    expect((await get("/console/nothing-here", session)).status).toBe(404);
  });
});
