// The console through the public HTTP surface (exports.default.fetch): sign-in with a tenant key,
// the session cookie's attributes, CSRF on every POST, revocation ending sessions, tenant scoping,
// and escaping of every value (run data and tool output are untrusted). The real-browser flow is
// test/e2e/console.test.ts.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN, api, manifest, newTenant, upstream } from "../support/api.ts";

const ORIGIN = "http://toolgate.test";

async function get(path: string, cookie?: string, headers: Record<string, string> = {}) {
  return send(
    new Request(`${ORIGIN}${path}`, {
      headers: { ...headers, ...(cookie ? { Cookie: cookie } : {}) },
      redirect: "manual",
    }),
  );
}

async function post(
  path: string,
  form: Record<string, string>,
  cookie?: string,
  headers: Record<string, string> = {},
) {
  return send(
    new Request(`${ORIGIN}${path}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        ...headers,
        ...(cookie ? { Cookie: cookie } : {}),
      },
      body: new URLSearchParams(form).toString(),
      redirect: "manual",
    }),
  );
}

async function send(request: Request) {
  const response = await (exports as unknown as { default: Fetcher }).default.fetch(request);
  return {
    status: response.status,
    text: await response.text(),
    headers: response.headers,
    cookies: response.headers.getSetCookie(),
  };
}

const hidden = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? "";
const cookiePair = (setCookie: string) => setCookie.split(";")[0]!;

/** Signs in through the form; returns the session cookie and the page's CSRF token. */
async function signIn(key: string) {
  const form = await get("/console/sign-in");
  const login = cookiePair(form.cookies.find((c) => c.startsWith("tg_console_login="))!);
  const signedIn = await post(
    "/console/sign-in",
    { csrf: hidden(form.text, "csrf"), next: "/console", api_key: key },
    login,
  );
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

    const wrong = await post(
      "/console/sign-in",
      { csrf, next: "/console", api_key: `${t.key}x` },
      login,
    );
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("That API key is not valid");
    expect(wrong.cookies.some((c) => c.startsWith("tg_console="))).toBe(false);

    // The sign-in form itself needs the nonce cookie it was served with (no login CSRF).
    expect(
      (await post("/console/sign-in", { csrf, next: "/console", api_key: t.key })).status,
    ).toBe(403);

    const right = await post(
      "/console/sign-in",
      { csrf, next: "/console/runs/../../v1", api_key: t.key },
      login,
    );
    expect(right.status).toBe(303);
    expect(right.headers.get("Location")).toBe("/console");
    const session = right.cookies.find((c) => c.startsWith("tg_console="))!;
    for (const attribute of [
      "HttpOnly",
      "Secure",
      "SameSite=Strict",
      "Path=/console",
      "Max-Age=1800",
    ])
      expect(session).toContain(attribute);
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
    expect(
      (await post("/console/sign-out", { csrf }, session, { Origin: "https://evil.example" }))
        .status,
    ).toBe(403);
    expect((await post("/console/sign-out", { csrf }, session, { Origin: "null" })).status).toBe(
      403,
    );
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
    const forged = btoa(
      JSON.stringify({ ...claims, scopes: ["runs:read", "traces:read", "approvals:decide"] }),
    )
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    for (const cookie of [
      `${name}=${forged}.${signature}`,
      `${name}=${payload}.${signature}x`,
      `${name}=garbage`,
    ]) {
      expect((await get("/console", cookie)).status).toBe(303);
    }
  });

  it("revoking the key ends its sessions on the next request", async () => {
    const t = await newTenant(["runs:read"]);
    const { session } = await signIn(t.key);
    const revoked = await api(
      "DELETE",
      `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`,
      undefined,
      { Authorization: `Bearer ${ADMIN}` },
    );
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
    const run = await api(
      "POST",
      "/v1/runs",
      {
        user: { id: evil, scopes: [] },
        tools: [tool.name],
        context: { note: `<img src=x onerror=alert(1)>` },
        budgets: { max_turns: 5 },
      },
      auth,
    );
    const runId = run.body.run_id as string;
    await up.script({ kind: "status", status: 503 }, { kind: "ok" });
    const first = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      {
        calls: [
          { id: "call_<b>1</b>", name: tool.name, arguments: { amount: 5, currency: "usd" } },
        ],
      },
      { ...auth, Prefer: "wait=5" },
    );
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
    expect(page.text).toMatch(/>\s*idempotency unverified\s*<\/span>/); // never verified
    expect(page.text).toContain("Attempt 1 sent");
    expect(page.text).toContain("Attempt 1 answered");
    expect(page.text).toContain("Retry scheduled");
    expect(page.text).toMatch(
      /<th scope="row">Turns<\/th><td class="num">1<\/td><td class="num">5<\/td>/,
    );

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

  it("links the approval and unknown-outcome queues from the nav; each needs its scope", async () => {
    const t = await newTenant(["runs:read"]);
    const { home, session } = await signIn(t.key);
    expect(home.text).toContain('href="/console/approvals"');
    expect(home.text).toContain('href="/console/unknown-outcomes"');
    expect((await get("/console/approvals", session)).status).toBe(403);
    expect((await get("/console/unknown-outcomes", session)).status).toBe(403);
    expect((await get("/console/nothing-here", session)).status).toBe(404);
  });
});

/** A tenant with a key for the console and one irreversible tool whose every call waits for approval. */
async function approvalTenant(toolOverrides: Record<string, unknown> = {}) {
  const t = await newTenant([
    "runs:write",
    "runs:read",
    "tools:write",
    "traces:read",
    "approvals:decide",
    "operations:resolve",
  ]);
  const auth = { Authorization: `Bearer ${t.key}` };
  const up = upstream();
  const tool = manifest({
    url: up.url,
    risk: "irreversible_write",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: { amount: { type: "integer" }, currency: { type: "string" } },
      required: ["amount", "currency"],
    },
    ...toolOverrides,
  });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
  const run = await api(
    "POST",
    "/v1/runs",
    { user: { id: "end_user", scopes: [] }, tools: [tool.name] },
    auth,
  );
  expect(run.status).toBe(201);
  const runId = run.body.run_id as string;
  const call = async (args: Record<string, unknown>) => {
    const res = await api(
      "POST",
      `/v1/runs/${runId}/turns?format=native`,
      {
        calls: [
          { id: `call_${Math.random().toString(36).slice(2)}`, name: tool.name, arguments: args },
        ],
      },
      { ...auth, Prefer: "wait=0" },
    );
    return res.body.results[0] as { status: string; operation_id: string };
  };
  return { t, auth, up, tool, runId, call, ...(await signIn(t.key)) };
}

const flashOf = async (session: string, path: string) => {
  const page = await get(path, session);
  return { page, flash: /data-flash="[a-z]+"><p>([\s\S]*?)<\/p>/.exec(page.text)?.[1] ?? "" };
};
const cookieAfter = (session: string, res: { cookies: string[] }) => {
  const flash = res.cookies.find((c) => c.startsWith("tg_console_flash="));
  return flash ? `${session}; ${cookiePair(flash)}` : session;
};

describe("console approvals", () => {
  it("the approval card shows each limit across runs as it stands, this call counted (issue 21)", async () => {
    const { call, session } = await approvalTenant({
      limits_across_runs: [
        { name: "spend_per_user_day", subject: "user", window: "24h", sum: "amount", max: 1000 },
      ],
    });
    const waiting = await call({ amount: 250, currency: "usd" });
    expect(waiting.status).toBe("awaiting_approval");
    const inbox = await get("/console/approvals", session);
    const card = inbox.text.slice(inbox.text.indexOf(`data-operation="${waiting.operation_id}"`));
    expect(card).toContain("Limit spend_per_user_day");
    expect(card).toContain(
      "250 of 1000 used for user end_user in the window (this call: 250, counted), 750 remains",
    );
  });

  it("shows exactly what will run; approve sends it once; the decided tab records who and why", async () => {
    const { up, tool, runId, call, session, csrf } = await approvalTenant();
    const waiting = await call({ amount: 250, currency: "<b>usd</b>" });
    expect(waiting.status).toBe("awaiting_approval");
    const inbox = await get("/console/approvals", session);
    expect(inbox.status).toBe(200);
    const card = inbox.text.slice(inbox.text.indexOf(`data-operation="${waiting.operation_id}"`));
    expect(card).toContain(tool.name);
    expect(card).toContain("&quot;amount&quot;: 250");
    expect(card).toContain("&lt;b&gt;usd&lt;/b&gt;");
    expect(card).not.toContain("<b>usd</b>");
    expect(card).toContain("end_user");
    expect(card).toContain(`/console/runs/${runId}`);
    // The run page's card for the waiting call links to where it is decided.
    const runPage = await get(`/console/runs/${runId}`, session);
    const opCard = runPage.text.slice(runPage.text.indexOf(`id="${waiting.operation_id}"`));
    expect(opCard.slice(0, opCard.indexOf("</header>"))).toContain(
      `href="/console/approvals#${waiting.operation_id}"`,
    );
    const inputHash = hidden(card, "input_hash");
    const policyVersion = hidden(card, "policy_version");
    expect(inputHash).toMatch(/^[0-9a-f]{64}$/);
    expect(policyVersion.length).toBeGreaterThan(8);
    expect((await up.state()).requests).toHaveLength(0);

    // A form bound to other arguments, or one that does not say, decides nothing.
    const path = `/console/approvals/${waiting.operation_id}/approve`;
    const mismatch = await post(
      path,
      { csrf, input_hash: "0".repeat(64), policy_version: policyVersion },
      session,
    );
    expect(mismatch.status).toBe(303);
    expect((await flashOf(cookieAfter(session, mismatch), "/console/approvals")).flash).toContain(
      "Nothing was decided",
    );
    const unbound = await post(path, { csrf }, session);
    expect((await flashOf(cookieAfter(session, unbound), "/console/approvals")).flash).toContain(
      "did not say which arguments",
    );
    expect(
      (
        await post(
          `/console/approvals/${waiting.operation_id}/reject`,
          { csrf, input_hash: inputHash, policy_version: policyVersion, reason: " " },
          session,
        )
      ).status,
    ).toBe(303);
    expect((await up.state()).requests).toHaveLength(0);

    const approved = await post(
      path,
      { csrf, input_hash: inputHash, policy_version: policyVersion, reason: "checked the order" },
      session,
    );
    expect(approved.status).toBe(303);
    expect(approved.headers.get("Location")).toBe("/console/approvals");
    expect((await flashOf(cookieAfter(session, approved), "/console/approvals")).flash).toContain(
      `Approved ${tool.name}`,
    );
    // Deciding again through the console is answered with the recorded decision, nothing more is sent.
    const again = await post(
      path,
      { csrf, input_hash: inputHash, policy_version: policyVersion },
      session,
    );
    expect((await flashOf(cookieAfter(session, again), "/console/approvals")).flash).toMatch(
      /Approved|already approved/,
    );
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests[0]!.body).toMatchObject({ amount: 250, currency: "<b>usd</b>" });

    const pending = await get("/console/approvals", session);
    expect(pending.text).not.toContain(`data-operation="${waiting.operation_id}"`);
    const decided = await get("/console/approvals?state=decided", session);
    const row = decided.text.slice(
      decided.text.indexOf(`data-operation="${waiting.operation_id}"`),
    );
    expect(row).toContain("checked the order");
    expect(row).toContain(`class="badge approved"`);
    expect((await get("/console/approvals?state=everything", session)).status).toBe(400);
  });

  it("P3: a field the tool hides from traces is shown to the approver, named as hidden, and to nobody else", async () => {
    const { t, auth, up, runId, call, session, csrf } = await approvalTenant({
      redact: ["/amount"],
      approval: "always",
    });
    const waiting = await call({ amount: 987654, currency: "usd" });
    expect(waiting.status).toBe("awaiting_approval");

    // The approver (approvals:decide) sees the real amount, and that traces hide it.
    const inbox = await get("/console/approvals", session);
    const card = inbox.text.slice(inbox.text.indexOf(`data-operation="${waiting.operation_id}"`));
    expect(card).toContain("&quot;amount&quot;: 987654");
    expect(card).not.toContain("[redacted]");
    const hiddenNote = /data-role="hidden-fields">([\s\S]*?)<\/p>/.exec(card)?.[1] ?? "";
    expect(hiddenNote).toContain("Hidden from traces");
    expect(hiddenNote).toContain("<code>/amount</code>");
    expect(inbox.text).not.toMatch(/exactly/i);

    // The API: the inbox copy stays redacted; the request itself shows the approver the amount.
    const listed = await api("GET", "/v1/approvals?state=pending", undefined, auth);
    const item = listed.body.items.find((i: any) => i.operation_id === waiting.operation_id);
    expect(item.arguments).toEqual({ amount: "[redacted]", currency: "usd" });
    const exact = await api("GET", `/v1/approvals/${waiting.operation_id}`, undefined, auth);
    expect(exact.status).toBe(200);
    expect(exact.body).toMatchObject({
      operation_id: waiting.operation_id,
      arguments: { amount: 987654, currency: "usd" },
      hidden: ["/amount"],
      input_hash: item.input_hash,
      policy_version: item.policy_version,
    });

    // A key of the same tenant without approvals:decide sees the amount nowhere.
    const reader = await api(
      "POST",
      `/v1/admin/tenants/${t.tenantId}/keys`,
      { name: "reader", scopes: ["runs:read", "traces:read"] },
      { Authorization: `Bearer ${ADMIN}` },
    );
    const readerAuth = { Authorization: `Bearer ${reader.body.key}` };
    expect(
      (await api("GET", `/v1/approvals/${waiting.operation_id}`, undefined, readerAuth)).status,
    ).toBe(403);
    const readerSession = (await signIn(reader.body.key)).session;
    const refused = await get("/console/approvals", readerSession);
    expect(refused.status).toBe(403);
    expect(refused.text).not.toContain("987654");
    const runPage = await get(`/console/runs/${runId}`, readerSession);
    expect(runPage.status).toBe(200);
    expect(runPage.text).toContain(waiting.operation_id);
    expect(runPage.text).not.toContain("987654");
    const trace = await api("GET", `/v1/runs/${runId}/trace`, undefined, readerAuth);
    expect(JSON.stringify(trace.body)).not.toContain("987654");

    // What the approver saw is what is sent, once.
    const approved = await post(
      `/console/approvals/${waiting.operation_id}/approve`,
      {
        csrf,
        input_hash: hidden(card, "input_hash"),
        policy_version: hidden(card, "policy_version"),
      },
      session,
    );
    expect((await flashOf(cookieAfter(session, approved), "/console/approvals")).flash).toContain(
      "Approved",
    );
    await api("GET", `/v1/operations/${waiting.operation_id}?wait=5`, undefined, auth);
    const state = await up.state();
    expect(state.effects).toHaveLength(1);
    expect(state.requests[0]!.body).toEqual({ amount: 987654, currency: "usd" });
  });

  it("reject needs a reason; a rejected call never runs; four eyes holds for the console too", async () => {
    const { up, tool, auth, call, session, csrf } = await approvalTenant();
    const waiting = await call({ amount: 900, currency: "usd" });
    const card = (await get("/console/approvals", session)).text;
    const bound = {
      csrf,
      input_hash: hidden(card, "input_hash"),
      policy_version: hidden(card, "policy_version"),
    };
    const rejected = await post(
      `/console/approvals/${waiting.operation_id}/reject`,
      { ...bound, reason: "customer withdrew" },
      session,
    );
    expect((await flashOf(cookieAfter(session, rejected), "/console/approvals")).flash).toContain(
      `Rejected ${tool.name}`,
    );
    const view = await api("GET", `/v1/operations/${waiting.operation_id}`, undefined, auth);
    expect(view.body.result).toMatchObject({ status: "rejected", code: "approval_rejected" });
    const late = await post(`/console/approvals/${waiting.operation_id}/approve`, bound, session);
    expect((await flashOf(cookieAfter(session, late), "/console/approvals")).flash).toContain(
      "already rejected",
    );
    expect((await up.state()).requests).toHaveLength(0);

    // The approver is the key's name ("test"); a run whose end user is "test" cannot be approved by it.
    const selfRun = await api(
      "POST",
      "/v1/runs",
      { user: { id: "test", scopes: [] }, tools: [tool.name] },
      auth,
    );
    const own = await api(
      "POST",
      `/v1/runs/${selfRun.body.run_id}/turns?format=native`,
      { calls: [{ id: "call_self", name: tool.name, arguments: { amount: 5, currency: "usd" } }] },
      { ...auth, Prefer: "wait=0" },
    );
    const ownOp = own.body.results[0].operation_id as string;
    const ownCard = (await get("/console/approvals", session)).text;
    const slice = ownCard.slice(ownCard.indexOf(`data-operation="${ownOp}"`));
    const self = await post(
      `/console/approvals/${ownOp}/approve`,
      {
        csrf,
        input_hash: hidden(slice, "input_hash"),
        policy_version: hidden(slice, "policy_version"),
      },
      session,
    );
    expect((await flashOf(cookieAfter(session, self), "/console/approvals")).flash).toContain(
      "four eyes",
    );
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("a flash cookie forged or taken from another session is not shown", async () => {
    const { session, csrf, t } = await approvalTenant();
    const unbound = await post(
      `/console/approvals/op_01ARZ3NDEKTSV4RRFFQ69G5FAV/approve`,
      { csrf },
      session,
    );
    const flashCookie = cookiePair(unbound.cookies.find((c) => c.startsWith("tg_console_flash="))!);
    const other = await signIn(t.key);
    expect((await flashOf(`${other.session}; ${flashCookie}`, "/console/approvals")).flash).toBe(
      "",
    );
    const [name, value] = flashCookie.split("=") as [string, string];
    const [, signature] = value.split(".");
    const forged = `${name}=${btoa(JSON.stringify({ tone: "ok", text: "Approved everything" })).replace(/=+$/, "")}.${signature}`;
    expect((await flashOf(`${session}; ${forged}`, "/console/approvals")).flash).toBe("");
    expect((await flashOf(`${session}; ${flashCookie}`, "/console/approvals")).flash).not.toBe("");
  });
});

describe("console unknown outcomes", () => {
  it("lists a write nobody can settle, with its attempts; a verdict form that does not parse changes nothing; a verdict settles it once", async () => {
    const t = await newTenant([
      "runs:write",
      "runs:read",
      "tools:write",
      "traces:read",
      "operations:resolve",
    ]);
    const auth = { Authorization: `Bearer ${t.key}` };
    const up = upstream();
    const tool = manifest({ url: up.url, timeout_ms: 300, idempotency: { mode: "none" } });
    expect((await api("PUT", `/v1/tools/${tool.name}`, tool, auth)).status).toBe(201);
    const run = await api(
      "POST",
      "/v1/runs",
      { user: { id: "u1", scopes: [] }, tools: [tool.name] },
      auth,
    );
    await up.script({ kind: "commit_then_hang" });
    const res = await api(
      "POST",
      `/v1/runs/${run.body.run_id}/turns?format=native`,
      { calls: [{ id: "c1", name: tool.name, arguments: { amount: 42, currency: "usd" } }] },
      { ...auth, Prefer: "wait=5" },
    );
    const op = res.body.results[0];
    expect(op.status).toBe("outcome_unknown");

    const { session, csrf } = await signIn(t.key);
    const list = await get("/console/unknown-outcomes", session);
    expect(list.status).toBe(200);
    const card = list.text.slice(list.text.indexOf(`data-operation="${op.operation_id}"`));
    expect(card).toContain(tool.name);
    expect(card).toContain("no idempotency key and no status lookup");
    expect(card).not.toContain('value="resend"');

    const path = `/console/unknown-outcomes/${op.operation_id}/resolve`;
    const badJson = await post(
      path,
      { csrf, outcome: "succeeded", result: "{not json", reason: "saw it in the ledger" },
      session,
    );
    expect(badJson.status).toBe(400);
    expect(badJson.text).toContain("not valid JSON");
    expect(badJson.text).toContain("saw it in the ledger");
    expect(
      (await post(path, { csrf, outcome: "resend", reason: "try again" }, session)).status,
    ).toBe(303);
    expect(
      (await api("GET", `/v1/operations/${op.operation_id}`, undefined, auth)).body.phase,
    ).toBe("outcome_unknown");

    const effect = (await up.state()).effects[0]!;
    const done = await post(
      path,
      {
        csrf,
        outcome: "succeeded",
        result: JSON.stringify({ id: effect.id }),
        reason: "saw it in the ledger",
      },
      session,
    );
    expect(done.status).toBe(303);
    expect(
      (await flashOf(cookieAfter(session, done), "/console/unknown-outcomes")).flash,
    ).toContain(`Recorded: ${tool.name} happened`);
    const view = await api("GET", `/v1/operations/${op.operation_id}`, undefined, auth);
    expect(view.body.result).toMatchObject({ status: "succeeded", result: { id: effect.id } });
    const second = await post(
      path,
      { csrf, outcome: "failed", reason: "changed my mind" },
      session,
    );
    expect(
      (await flashOf(cookieAfter(session, second), "/console/unknown-outcomes")).flash,
    ).toContain("Nothing was recorded");
    expect(
      (await api("GET", `/v1/operations/${op.operation_id}`, undefined, auth)).body.result.status,
    ).toBe("succeeded");
    expect((await get("/console/unknown-outcomes", session)).text).not.toContain(
      `data-operation="${op.operation_id}"`,
    );
    expect((await up.state()).requests).toHaveLength(1);
  });
});
