// One answer to "is this tool verified?" (issue 31 item 7, first-use finding 12-05): a tool whose
// checks passed only against a sandbox origin reads `verified_sandbox_only` — "verified against
// the sandbox only: runs treat it as unverified" — in the verify answer, GET /v1/tools/{name},
// GET /v1/tools, POST /v1/runs' warnings, the operation's trace and the console's tools and run
// pages; verified against its own origin, every one of them says verified and nothing is flagged.
import { describe, expect, it } from "vitest";
import { ALL_SCOPES, api, manifest, newTenant, unique, upstream } from "../support/api.ts";
import { consolePage } from "../support/console-page.ts";

const SANDBOX_ONLY = "verified against the sandbox only: runs treat it as unverified";
const ARGS = { arguments: { amount: 500, currency: "usd" } };

/** The HTML of one element, from its opening tag's `marker` to the closing `</tag>`. */
function element(html: string, marker: string, tag: string): string {
  const at = html.indexOf(marker);
  expect(at, `${marker} in the page`).toBeGreaterThan(-1);
  return html.slice(at, html.indexOf(`</${tag}>`, at));
}

async function shop() {
  const t = await newTenant(ALL_SCOPES);
  const as = { Authorization: `Bearer ${t.key}` };
  const up = upstream();
  const tool = manifest({ url: up.url, name: unique("charge_card") });
  const name = tool.name;
  expect((await api("PUT", `/v1/tools/${name}`, tool, as)).status).toBe(201);
  // The same fake shop under another origin (loopback by name): the sandbox.
  const sandbox = new URL(up.url.replace("127.0.0.1", "localhost")).origin;
  const call = (method: string, path: string, body?: unknown) => api(method, path, body, as);
  const newRun = async () => {
    const run = await call("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools: [name] });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    return run.body as { run_id: string; run_token: string; warnings: any[] };
  };
  return { key: t.key, name, sandbox, call, newRun };
}

describe("a tool verified against a sandbox origin only", () => {
  it("reads verified_sandbox_only, counts_for_runs false, the same line, in the API, the run warning, the trace and the console", async () => {
    const { key, name, sandbox, call, newRun } = await shop();
    const verified = await call("POST", `/v1/tools/${name}/verify`, { ...ARGS, base_url: sandbox });
    expect(verified.status, JSON.stringify(verified.body)).toBe(200);
    const answer = {
      status: "verified_sandbox_only",
      counts_for_runs: false,
      summary: SANDBOX_ONLY,
      base_url: sandbox,
    };
    expect(verified.body.verification).toMatchObject(answer);
    expect((await call("GET", `/v1/tools/${name}`)).body.verification).toMatchObject(answer);
    const listed = (await call("GET", "/v1/tools")).body.tools.find((t: any) => t.name === name);
    expect(listed.verification).toMatchObject(answer);

    const run = await newRun();
    expect(run.warnings).toEqual([
      {
        tool: name,
        code: "idempotency_unverified",
        status: "verified_sandbox_only",
        enforced: false,
        detail: expect.stringContaining(SANDBOX_ONLY),
      },
    ]);
    const turn = await call("POST", `/v1/runs/${run.run_id}/turns?format=native`, {
      calls: [{ id: "c1", name, arguments: ARGS.arguments }],
    });
    expect(turn.body.results[0].status).toBe("succeeded");
    const events = (await call("GET", `/v1/runs/${run.run_id}/trace`)).body.events as any[];
    expect(events.find((e) => e.type === "idempotency_unverified")).toMatchObject({
      status: "verified_sandbox_only",
      detail: expect.stringContaining(SANDBOX_ONLY),
    });

    const toolRow = element(await consolePage("/console/tools", key), `id="tool-${name}"`, "tr");
    expect(toolRow).toContain('class="badge verified_sandbox_only"');
    expect(toolRow).toContain(SANDBOX_ONLY);
    expect(toolRow).not.toMatch(/>verified</);
    const runPage = await consolePage(`/console/runs/${run.run_id}`, key);
    const badge = element(runPage, 'class="badge verified_sandbox_only"', "span");
    expect(badge).toContain(SANDBOX_ONLY);
    expect(badge).toContain("idempotency verified sandbox only");
  });

  it("verified against its own origin afterwards: verified everywhere, counts for runs, nothing flagged", async () => {
    const { key, name, sandbox, call, newRun } = await shop();
    await call("POST", `/v1/tools/${name}/verify`, { ...ARGS, base_url: sandbox });
    const own = await call("POST", `/v1/tools/${name}/verify`, ARGS);
    const answer = {
      status: "verified",
      counts_for_runs: true,
      summary: "verified against its own origin: runs rely on its idempotency key",
      base_url: null,
    };
    expect(own.body.verification).toMatchObject(answer);
    expect((await call("GET", `/v1/tools/${name}`)).body.verification).toMatchObject(answer);
    const run = await newRun();
    expect(run.warnings).toEqual([]);
    const toolRow = element(await consolePage("/console/tools", key), `id="tool-${name}"`, "tr");
    expect(toolRow).toContain('class="badge verified"');
    expect(await consolePage(`/console/runs/${run.run_id}`, key)).not.toContain("idempotency ");
  });
});
