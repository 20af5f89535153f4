// The passkey step-up (issue 35 item 5), through the console's registration routes and the public
// API, with a software authenticator (test/support/soft-authenticator.ts) verified by
// @simplewebauthn/server like a real passkey: approving a step-up tool's call needs an assertion
// made for that operation's input hash, by a passkey registered to the decider. Counted upstream.
import { beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN,
  api,
  manifest,
  operation,
  testTenant,
  trace,
  unique,
  upstream,
} from "../support/api.ts";
import { consoleSession } from "../support/console-page.ts";
import { SoftAuthenticator } from "../support/soft-authenticator.ts";

const ORIGIN = "http://toolgate.test";
const RP_ID = "toolgate.test";

let passkey: SoftAuthenticator;
let console: Awaited<ReturnType<typeof consoleSession>>;

beforeAll(async () => {
  // "test" (the shared key's name, the decider) registers a passkey in the console.
  console = await consoleSession();
  passkey = await SoftAuthenticator.create();
  const options = JSON.parse(await console.get("/console/passkeys/options"));
  expect(options.rp.id).toBe(RP_ID);
  const registered = await console.post("/console/passkeys", [
    ["response", JSON.stringify(await passkey.register(options, ORIGIN))],
  ]);
  expect(registered.status).toBe(303);
  expect(await console.get("/console/passkeys")).toContain(passkey.id);
});

async function stepUpCalls(count: number) {
  const up = upstream();
  const tool = manifest({
    url: up.url,
    risk: "irreversible_write",
    approval: { mode: "always", step_up: "passkey" },
  });
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool)).status).toBe(201);
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: [tool.name] });
  const calls = [];
  for (let i = 0; i < count; i++) {
    const posted = await api(
      "POST",
      `/v1/runs/${run.body.run_id}/turns?format=native`,
      {
        calls: [
          { id: unique("call"), name: tool.name, arguments: { amount: 10 + i, currency: "usd" } },
        ],
      },
      { Prefer: "wait=0" },
    );
    const id = posted.body.results[0].operation_id as string;
    const approval = (await api("GET", `/v1/operations/${id}`)).body.approval;
    expect(approval.step_up).toMatchObject({ kind: "passkey", challenge: expect.any(String) });
    calls.push({
      id,
      hash: approval.input_hash as string,
      challenge: approval.step_up.challenge as string,
    });
  }
  return { up, runId: run.body.run_id as string, calls };
}

const approve = (id: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  api("POST", `/v1/operations/${id}/approve`, body, headers);

describe("passkey step-up on approval", () => {
  it("an assertion made for another operation is refused; one made for this one approves it, once", async () => {
    const { up, runId, calls } = await stepUpCalls(2);
    const [a, b] = calls as [(typeof calls)[0], (typeof calls)[0]];
    const none = await approve(a.id, { input_hash: a.hash });
    expect(none.status).toBe(403);
    expect(none.body.code).toBe("step_up_required");
    const forB = await passkey.assert(b.challenge, RP_ID, ORIGIN);
    const crossed = await approve(a.id, { input_hash: a.hash, passkey: forB });
    expect(crossed.status).toBe(401);
    expect(crossed.body.code).toBe("step_up_failed");
    // The same assertion with b's hash but aimed at a: the operation's own challenge differs again.
    const aimed = await approve(a.id, {
      input_hash: b.hash,
      passkey: await passkey.assert(b.challenge, RP_ID, ORIGIN),
    });
    expect(aimed.status).toBe(401);
    const batch = await api("POST", "/v1/approvals/batch", [
      { operation_id: a.id, input_hash: a.hash, decision: "approve" },
    ]);
    expect(batch.body.items[0]).toMatchObject({ result: "skipped", reason: "step_up_required" });
    expect((await operation(a.id)).body.approval.state).toBe("pending");
    expect((await up.state()).requests).toHaveLength(0);

    const forA = await passkey.assert(a.challenge, RP_ID, ORIGIN);
    const approved = await approve(a.id, { input_hash: a.hash, passkey: forA });
    expect(approved.status).toBe(200);
    expect(approved.body.approval).toMatchObject({ state: "approved", decided_by: "test" });
    const decided = (await trace(runId)).find(
      (e) => e.type === "approval_decided" && e.operation_id === a.id,
    );
    expect(decided).toMatchObject({ by: "test", via: "api_key", step_up: "passkey" });
    expect((await operation(a.id, 5)).body.result.status).toBe("succeeded");
    expect((await up.state()).effects).toHaveLength(1);
    // A replayed assertion (its counter already spent) decides nothing, even for its own operation.
    const replayed = await approve(b.id, { input_hash: b.hash, passkey: forB });
    expect(replayed.status).toBe(401);
    expect((await operation(b.id)).body.approval.state).toBe("pending");
  });

  it("someone else's passkey does not step up this decider; rejecting needs none", async () => {
    const { up, calls } = await stepUpCalls(1);
    const [call] = calls as [(typeof calls)[0]];
    const { tenantId } = await testTenant();
    const bob = await api(
      "POST",
      `/v1/admin/tenants/${tenantId}/keys`,
      { name: "bob", scopes: ["approvals:decide", "runs:read"] },
      { Authorization: `Bearer ${ADMIN}` },
    );
    const asBob = { Authorization: `Bearer ${bob.body.key}` };
    const stolen = await passkey.assert(call.challenge, RP_ID, ORIGIN);
    const refused = await approve(call.id, { input_hash: call.hash, passkey: stolen }, asBob);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("step_up_failed");
    expect((await operation(call.id)).body.approval.state).toBe("pending");
    const rejected = await api("POST", `/v1/operations/${call.id}/reject`, { reason: "no" }, asBob);
    expect(rejected.body.approval).toMatchObject({ state: "rejected", decided_by: "bob" });
    expect((await up.state()).requests).toHaveLength(0);
  });

  it("the console's approve form: its passkey field steps up; another operation's assertion is a 401 and decides nothing", async () => {
    const { up, calls } = await stepUpCalls(2);
    const [a, b] = calls as [(typeof calls)[0], (typeof calls)[0]];
    const inbox = await console.get("/console/approvals");
    expect(inbox).toContain(`data-challenge="${a.challenge}"`);
    expect(inbox).toContain('src="/console/assets/passkey.js"');
    const version = (await api("GET", `/v1/operations/${a.id}`)).body.approval.policy_version;
    const form = (hash: string, assertion: unknown): Array<[string, string]> => [
      ["input_hash", hash],
      ["policy_version", version],
      ["passkey", JSON.stringify(assertion)],
    ];
    const crossed = await console.post(
      `/console/approvals/${a.id}/approve`,
      form(a.hash, await passkey.assert(b.challenge, RP_ID, ORIGIN)),
    );
    expect(crossed.status).toBe(401);
    expect((await operation(a.id)).body.approval.state).toBe("pending");
    const stepped = await console.post(
      `/console/approvals/${a.id}/approve`,
      form(a.hash, await passkey.assert(a.challenge, RP_ID, ORIGIN)),
    );
    expect(stepped.status).toBe(303);
    expect((await operation(a.id, 5)).body).toMatchObject({
      approval: { state: "approved", decided_via: "console" },
      result: { status: "succeeded" },
    });
    expect((await up.state()).effects).toHaveLength(1);
  });
});
