// Who approved (issue 35 item 5), through the public API and the console: a Cloudflare Access JWT
// verified with jose against the team's JWKS (served here by a fetch spy: the test deployment's
// team is made up, vitest.config.ts) names the person; a token that fails any check is a typed 401
// with nothing decided; a header the caller sets is never the decider.
import { describe, expect, it } from "vitest";
import { api, manifest, operation, trace, unique, until, upstream } from "../support/api.ts";
import { ACCESS, accessTeam, AUD, TEAM } from "../support/access.ts";
import { consoleSession } from "../support/console-page.ts";

const team = accessTeam();
const accessToken = team.token;

/** `alg: none`: an unsigned token with otherwise perfect claims. */
function unsignedToken(): string {
  const part = (value: unknown) =>
    btoa(JSON.stringify(value)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
  const now = Math.floor(Date.now() / 1000);
  return `${part({ alg: "none", kid: "team-1" })}.${part({ iss: TEAM, aud: [AUD], sub: "x", email: "mallory@example.com", exp: now + 300 })}.`;
}

async function pendingCall() {
  const up = upstream();
  const tool = manifest({ url: up.url, risk: "irreversible_write", approval: "always" });
  await api("PUT", `/v1/tools/${tool.name}`, tool);
  const run = await api("POST", "/v1/runs", {
    user: { id: "u1", scopes: [] },
    tools: [tool.name],
  });
  const posted = await api(
    "POST",
    `/v1/runs/${run.body.run_id}/turns?format=native`,
    { calls: [{ id: unique("call"), name: tool.name, arguments: { amount: 7, currency: "usd" } }] },
    { Prefer: "wait=0" },
  );
  const id = posted.body.results[0].operation_id as string;
  const view = await api("GET", `/v1/operations/${id}`);
  return {
    up,
    id,
    runId: run.body.run_id as string,
    hash: view.body.approval.input_hash as string,
  };
}

describe("Cloudflare Access names the person who decided", () => {
  it("a verified token: the person's email, via access, in the answer, the trace, the inbox and the console's decided tab", async () => {
    const call = await pendingCall();
    const decided = await api(
      "POST",
      `/v1/operations/${call.id}/approve`,
      { reason: "checked" },
      { [ACCESS]: await accessToken() },
    );
    expect(decided.status).toBe(200);
    expect(decided.body.approval).toMatchObject({
      state: "approved",
      decided_by: "alice@example.com",
      decided_via: "access",
    });
    const traced = (await trace(call.runId)).find((e) => e.type === "approval_decided");
    expect(traced).toMatchObject({ by: "alice@example.com", via: "access" });
    const inbox = await api("GET", "/v1/approvals?state=decided");
    expect(inbox.body.items.find((i: any) => i.operation_id === call.id)).toMatchObject({
      decided_by: "alice@example.com",
      decided_via: "access",
    });
    // The approval.decided event (webhooks, Slack, the feed) names the verified person too.
    const event = await until(
      async () =>
        (await api("GET", "/v1/events?type=approval.decided&limit=500")).body.events.find(
          (e: any) => e.operation_id === call.id,
        ),
      (found) => found !== undefined,
    );
    expect(event.data).toMatchObject({ decided_by: "alice@example.com", decided_via: "access" });
    const page = await (await consoleSession()).get("/console/approvals?state=decided");
    const row = page.slice(page.indexOf(`data-operation="${call.id}"`));
    expect(row.slice(0, row.indexOf("</tr>"))).toMatch(
      /alice@example\.com<\/span>.*verified by Cloudflare Access/s,
    );
    expect((await operation(call.id, 5)).body.result.status).toBe("succeeded");
    expect(team.certsFetched()).toBeGreaterThan(0);
  });

  const refusals: Array<[string, () => Promise<string>, string]> = [
    ["a wrong audience", () => accessToken({ aud: "someone-elses-app" }), "audience"],
    ["a wrong issuer", () => accessToken({ iss: "https://evil.cloudflareaccess.com" }), "issuer"],
    ["an expired token", () => accessToken({ exp: Math.floor(Date.now() / 1000) - 10 }), "expired"],
    [
      "a bad signature (the team's kid, another key)",
      () => accessToken({}, team.rogueKey()),
      "signature",
    ],
    ["an unknown kid", () => accessToken({}, team.rogueKey(), "not-the-team"), "unknown_key"],
    ["alg none", async () => unsignedToken(), "algorithm"],
    ["not a JWT", async () => "garbage", "malformed"],
  ];
  for (const [what, token, reason] of refusals)
    it(`${what}: 401 access_denied (${reason}), nothing decided, nothing sent — single and batch`, async () => {
      const call = await pendingCall();
      const single = await api(
        "POST",
        `/v1/operations/${call.id}/approve`,
        {},
        { [ACCESS]: await token() },
      );
      expect(single.status).toBe(401);
      expect(single.body).toMatchObject({ code: "access_denied", reason });
      const batch = await api(
        "POST",
        "/v1/approvals/batch",
        [{ operation_id: call.id, input_hash: call.hash, decision: "approve" }],
        { [ACCESS]: await token() },
      );
      expect(batch.status).toBe(401);
      expect(batch.body).toMatchObject({ code: "access_denied", reason });
      expect((await operation(call.id)).body.approval.state).toBe("pending");
      expect((await call.up.state()).requests).toHaveLength(0);
    });

  it("the decider is never a header the caller set: Access's user-email header alone is the key; with a verified token, the token's person", async () => {
    const spoof = { "Cf-Access-Authenticated-User-Email": "ceo@example.com" };
    const byKey = await pendingCall();
    const first = await api("POST", `/v1/operations/${byKey.id}/approve`, {}, spoof);
    expect(first.body.approval).toMatchObject({ decided_by: "test", decided_via: "api_key" });
    const byPerson = await pendingCall();
    const second = await api(
      "POST",
      "/v1/approvals/batch",
      [{ operation_id: byPerson.id, input_hash: byPerson.hash, decision: "approve" }],
      { ...spoof, [ACCESS]: await accessToken({ email: "bob@example.com" }) },
    );
    expect(second.body).toMatchObject({ decided_by: "bob@example.com", decided_via: "access" });
    expect((await operation(byPerson.id)).body.approval).toMatchObject({
      decided_by: "bob@example.com",
      decided_via: "access",
    });
    // approver.id (delegation) and an Access person at once: refused, not one silently preferred.
    const both = await pendingCall();
    const refused = await api(
      "POST",
      `/v1/operations/${both.id}/approve`,
      { approver: { id: "carol" } },
      { [ACCESS]: await accessToken() },
    );
    expect(refused.status).toBe(400);
    expect((await operation(both.id)).body.approval.state).toBe("pending");
  });

  it("the console: a verified Access token names the person; a bad one is a 401 and decides nothing; none is the session's key", async () => {
    const console = await consoleSession();
    const [bad, good, plain] = [await pendingCall(), await pendingCall(), await pendingCall()];
    // What the card's own form carries: the input hash and tool version it showed.
    const fields = async (call: { id: string; hash: string }): Promise<Array<[string, string]>> => [
      ["input_hash", call.hash],
      [
        "policy_version",
        (await api("GET", `/v1/operations/${call.id}`)).body.approval.policy_version,
      ],
    ];
    const refused = await console.post(`/console/approvals/${bad.id}/approve`, await fields(bad), {
      [ACCESS]: await accessToken({ aud: "wrong" }),
    });
    expect(refused.status).toBe(401);
    expect((await operation(bad.id)).body.approval.state).toBe("pending");
    const accepted = await console.post(
      `/console/approvals/${good.id}/approve`,
      await fields(good),
      {
        [ACCESS]: await accessToken({ email: "dana@example.com" }),
      },
    );
    expect(accepted.status).toBe(303);
    expect((await operation(good.id)).body.approval).toMatchObject({
      decided_by: "dana@example.com",
      decided_via: "access",
    });
    await console.post(`/console/approvals/${plain.id}/approve`, await fields(plain));
    expect((await operation(plain.id)).body.approval).toMatchObject({
      decided_by: "test",
      decided_via: "console",
    });
  });

  it("the console's batch form: ticked cards decided together, each as if alone (a stale one skipped)", async () => {
    const console = await consoleSession();
    const [a, b] = [await pendingCall(), await pendingCall()];
    const inbox = await console.get("/console/approvals");
    const box = (id: string) => new RegExp(`name="item" value="(${id}~[^"]+)"`).exec(inbox)?.[1];
    expect(box(a.id)).toBeDefined();
    expect(inbox).toMatch(/id="batch"/);
    const stale = `${b.id}~${"0".repeat(64)}~${box(b.id)!.split("~")[2]}`;
    const posted = await console.post("/console/approvals/batch", [
      ["item", box(a.id)!],
      ["item", stale],
      ["decision", "reject"],
      ["reason", "batch says no"],
    ]);
    expect(posted.status).toBe(303);
    expect((await operation(a.id)).body).toMatchObject({
      approval: { state: "rejected", decided_via: "console", reason: "batch says no" },
      result: { code: "approval_rejected", reason: "batch says no" },
    });
    expect((await operation(b.id)).body.approval.state).toBe("pending");
    expect((await a.up.state()).requests).toHaveLength(0);
    expect((await b.up.state()).requests).toHaveLength(0);
  });
});
