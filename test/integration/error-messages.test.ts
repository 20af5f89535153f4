// Every refusal names what was wrong in words a caller can act on (issue 33 item 6): a value
// outside a closed set is quoted with every valid choice, a value of the wrong type names its field
// and the expected type. One row per refusing path of the public API, through exports.default.fetch;
// each row's words were missing from the message before (query parameters, Prefer, path ids, the
// admin jurisdiction, a run's unknown tool), or are kept from regressing (bodies, manifests).
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN, api, manifest, setup, upstream } from "../support/api.ts";

const OP = `op_${"0".repeat(32)}`;
let runId = "";
let tool: ReturnType<typeof manifest>;

beforeAll(async () => {
  tool = manifest({ url: upstream().url });
  ({ runId } = await setup(tool));
});

type Row = {
  path: string;
  method?: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  code: string;
  /** Every one of these is in the detail, as written. */
  says: string[];
};

const rows: Record<string, () => Row> = {
  "GET /v1/operations ?status": () => ({
    path: "/v1/operations?status=bogus",
    status: 400,
    code: "invalid_request",
    says: ['"bogus"', '"succeeded", "rejected"', "status"],
  }),
  "GET /v1/runs ?status": () => ({
    path: "/v1/runs?status=bogus",
    status: 400,
    code: "invalid_request",
    says: ['"bogus"', '"active", "cancelled", "expired"', "status"],
  }),
  "GET /v1/runs ?limit (type)": () => ({
    path: "/v1/runs?limit=abc",
    status: 400,
    code: "invalid_request",
    says: ["expected number", "limit"],
  }),
  "GET /v1/runs/{id}/tools ?format": () => ({
    path: `/v1/runs/${runId}/tools?format=bogus`,
    status: 400,
    code: "invalid_request",
    says: ['"bogus"', '"anthropic", "openai-responses", "openai-chat", "native", "mcp"', "format"],
  }),
  "POST /v1/runs/{id}/turns ?format": () => ({
    method: "POST",
    path: `/v1/runs/${runId}/turns?format=bogus`,
    body: { calls: [] },
    status: 400,
    code: "invalid_request",
    says: ['"bogus"', '"anthropic", "openai-responses", "openai-chat", "native"', "format"],
  }),
  "GET /v1/runs/{id}/trace ?format": () => ({
    path: `/v1/runs/${runId}/trace?format=bogus`,
    status: 400,
    code: "invalid_request",
    says: ['"bogus"', '"json", "otlp"', "format"],
  }),
  "GET /v1/operations/{id} ?wait": () => ({
    path: `/v1/operations/${OP}?wait=abc`,
    status: 400,
    code: "invalid_request",
    says: ['"abc"', "?wait is a number of seconds"],
  }),
  // Before, a wait preference that was not digits was skipped as if none had been asked for.
  "GET /v1/operations/{id} Prefer: wait": () => ({
    path: `/v1/operations/${OP}`,
    headers: { Prefer: "respond-async, wait=soon" },
    status: 400,
    code: "invalid_request",
    says: ['"soon"', "Prefer: wait is a number of seconds"],
  }),
  "GET /v1/operations/{id} ?verify": () => ({
    path: `/v1/operations/${OP}?verify=yes`,
    status: 400,
    code: "invalid_request",
    says: ['"yes"', '"0", "1"', "verify"],
  }),
  "GET /v1/operations/{id}: a malformed id": () => ({
    path: "/v1/operations/op_bogus",
    status: 404,
    code: "not_found",
    says: ['"op_bogus" is not a operation id'],
  }),
  "GET /v1/runs/{id}: a malformed id": () => ({
    path: "/v1/runs/bogus",
    status: 404,
    code: "not_found",
    says: ['"bogus" is not a run id'],
  }),
  "GET /v1/events ?type": () => ({
    path: "/v1/events?type=aproval.requested",
    status: 400,
    code: "invalid_request",
    says: ['"aproval.requested"', '"approval.requested", "approval.decided"', "type"],
  }),
  "GET /v1/approvals ?state": () => ({
    path: "/v1/approvals?state=open",
    status: 400,
    code: "invalid_request",
    says: ['"open"', '"pending", "decided"', "state"],
  }),
  "GET /v1/unknown-outcomes ?limit (type)": () => ({
    path: "/v1/unknown-outcomes?limit=ten",
    status: 400,
    code: "invalid_request",
    says: ["expected number", "limit"],
  }),
  "PUT /v1/tools/{name} ?force": () => ({
    method: "PUT",
    path: `/v1/tools/${tool.name}?force=yes`,
    body: tool,
    status: 400,
    code: "invalid_request",
    says: ['"yes"', 'expected "1"', "force"],
  }),
  "PUT /v1/tools/{name}: a manifest's closed set": () => ({
    method: "PUT",
    path: "/v1/tools/risky",
    body: { ...tool, name: "risky", risk: "wrte" },
    status: 422,
    code: "invalid_manifest",
    says: ['"wrte"', '"read", "write", "irreversible_write"', "risk"],
  }),
  "PUT /v1/tools/{name}: a manifest's type": () => ({
    method: "PUT",
    path: "/v1/tools/typed",
    body: { ...tool, name: "typed", timeout_ms: "1000" },
    status: 422,
    code: "invalid_manifest",
    says: ["expected number, received string", "timeout_ms"],
  }),
  "PUT /v1/webhooks/{id}: an event type": () => ({
    method: "PUT",
    path: "/v1/webhooks/hook",
    body: { url: "https://api.example.test/h", format: "standard", events: ["aproval.requested"] },
    status: 400,
    code: "invalid_request",
    says: ['"aproval.requested"', '"*", "approval.requested"', "events[0]"],
  }),
  "PUT /v1/webhooks/{id}: a format": () => ({
    method: "PUT",
    path: "/v1/webhooks/hook",
    body: { url: "https://api.example.test/h", format: "slak", events: ["*"] },
    status: 400,
    code: "invalid_request",
    says: ['"slak"', '"standard", "slack"', "format"],
  }),
  "POST /v1/runs: a mode": () => ({
    method: "POST",
    path: "/v1/runs",
    body: { user: { id: "u", scopes: [] }, tools: [tool.name], mode: "shadw" },
    status: 400,
    code: "invalid_request",
    says: ['"shadw"', '"live", "shadow"', "mode"],
  }),
  "POST /v1/runs: a budget's type": () => ({
    method: "POST",
    path: "/v1/runs",
    body: { user: { id: "u", scopes: [] }, tools: [tool.name], budgets: { max_turns: "5" } },
    status: 400,
    code: "invalid_request",
    says: ["expected number, received string", "budgets.max_turns"],
  }),
  "POST /v1/runs: a tool the tenant lacks": () => ({
    method: "POST",
    path: "/v1/runs",
    body: { user: { id: "u", scopes: [] }, tools: [tool.name, "refund_ordr"] },
    status: 404,
    code: "not_found",
    says: ['no tool named "refund_ordr"', `"${tool.name}"`, '"create_shipment"'],
  }),
  "POST /v1/operations/{id}/resolve: an outcome": () => ({
    method: "POST",
    path: `/v1/operations/${OP}/resolve`,
    body: { outcome: "done", reason: "checked" },
    status: 400,
    code: "invalid_request",
    says: ['"done"', '"succeeded", "failed", "resend"', "outcome"],
  }),
  "POST /v1/admin/tenants: a jurisdiction": () => ({
    method: "POST",
    path: "/v1/admin/tenants",
    body: { name: "t", jurisdiction: "mars" },
    headers: { Authorization: `Bearer ${ADMIN}` },
    status: 422,
    code: "unsupported_jurisdiction",
    says: ['"mars"', '"eu", "fedramp"'],
  }),
};

describe("error messages name the bad value and the valid ones", () => {
  it.each(Object.keys(rows))("%s", async (name) => {
    const row = rows[name]!();
    const answer = await api(row.method ?? "GET", row.path, row.body, row.headers);
    expect({ status: answer.status, code: answer.body.code }).toEqual({
      status: row.status,
      code: row.code,
    });
    for (const words of row.says) expect(answer.body.detail).toContain(words);
  });

  it("a refused query changes nothing: the refused force=yes registered no tool", async () => {
    const renamed = { ...tool, name: "never_registered" };
    const refused = await api("PUT", `/v1/tools/never_registered?force=yes`, renamed);
    expect(refused.status).toBe(400);
    expect((await api("GET", "/v1/tools/never_registered")).status).toBe(404);
  });

  it("a good Prefer wait, quoted or not, and ?wait are read as before (the id is then looked up)", async () => {
    for (const [path, headers] of [
      [`/v1/operations/${OP}`, { Prefer: "wait=0" }],
      [`/v1/operations/${OP}`, { Prefer: 'wait="0", return=minimal' }],
      [`/v1/operations/${OP}?wait=0.5`, {}],
    ] as const)
      expect((await api("GET", path, undefined, headers)).body.code).toBe("not_found");
  });
});
