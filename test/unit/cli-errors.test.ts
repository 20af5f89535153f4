// Every toolgate CLI answers what it cannot do in one line with a documented exit code (0 ok, 1 a
// promise broken, 2 could not run; conformance adds 3, cleanup failed), never a stack trace: each
// row spawns the real script with node against bad input, a missing file or a toolgate that is not
// there. And verify-upstream takes the demo's own manifest file (an array, with placeholders),
// against a fake toolgate that records what it was sent.
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
let closedPort = 0;

beforeAll(async () => {
  // A port nothing listens on: bound, then released.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closedPort = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
});

async function cli(script: string, args: string[], env: Record<string, string> = {}) {
  const clean: Record<string, string | undefined> = {
    ...process.env,
    TOOLGATE_URL: "",
    TOOLGATE_API_KEY: "",
    TOOLGATE_ADMIN_TOKEN: "",
  };
  for (const name of Object.keys(clean)) if (name.startsWith("SOAK_")) delete clean[name];
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, "scripts", script), ...args],
      { cwd: ROOT, env: { ...clean, ...env }, timeout: 30_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

const down = () => `http://127.0.0.1:${closedPort}`;
const KEY = { TOOLGATE_API_KEY: "tgk.x" };
const ADMIN = { TOOLGATE_ADMIN_TOKEN: "t" };
const charge = ["--arguments", '{"amount":100,"currency":"usd"}'];

// [script, args, env, exit code, the first line of stderr]
const TABLE: Array<[string, string[], () => Record<string, string>, number, RegExp]> = [
  ["verify-upstream.mjs", [], () => KEY, 2, /^verify-upstream: a manifest file is required$/],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", "--arguments", "{nope"],
    () => KEY,
    2,
    /--arguments must be a JSON object$/,
  ],
  [
    "verify-upstream.mjs",
    ["nope.json", ...charge],
    () => KEY,
    2,
    /^verify-upstream: cannot read nope.json \(ENOENT\)$/,
  ],
  [
    "verify-upstream.mjs",
    ["tsconfig.json", ...charge],
    () => KEY,
    2,
    /tsconfig.json is not a tool manifest/,
  ],
  [
    "verify-upstream.mjs",
    ["README.md", ...charge],
    () => KEY,
    2,
    /^verify-upstream: README.md is not JSON \(/,
  ],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", ...charge],
    () => KEY,
    2,
    /holds 5 manifests: pick one with --tool \(refund_charge, charge_card/,
  ],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", "--tool", "nope", ...charge],
    () => KEY,
    2,
    /has no tool nope/,
  ],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", "--tool", "charge_card", ...charge],
    () => ({}),
    2,
    /TOOLGATE_API_KEY is not set/,
  ],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", "--tool", "charge_card", ...charge],
    () => ({ ...KEY, TOOLGATE_URL: "nope" }),
    2,
    /TOOLGATE_URL "nope" is not a URL/,
  ],
  [
    "verify-upstream.mjs",
    ["demo/tools.json", "--tool", "charge_card", ...charge],
    () => ({ ...KEY, TOOLGATE_URL: down() }),
    2,
    /^verify-upstream: toolgate at http:\/\/127\.0\.0\.1:\d+ did not answer \(ECONNREFUSED\)$/,
  ],
  ["reindex.mjs", [], () => ADMIN, 2, /^usage: TOOLGATE_ADMIN_TOKEN=/],
  ["reindex.mjs", ["ten_1"], () => ({}), 2, /^usage: /],
  ["reindex.mjs", ["--all"], () => ADMIN, 2, /^usage: /],
  [
    "reindex.mjs",
    ["ten_1"],
    () => ({ ...ADMIN, TOOLGATE_URL: down() }),
    2,
    /^reindex: toolgate at .* did not answer \(ECONNREFUSED\)$/,
  ],
  ["reindex.mjs", ["tenant 1"], () => ADMIN, 2, /^reindex: "tenant 1" is not a tenant id/],
  [
    "conformance.mjs",
    [],
    () => ADMIN,
    2,
    /^--url \(or TOOLGATE_URL\) and TOOLGATE_ADMIN_TOKEN are required$/,
  ],
  [
    "conformance.mjs",
    ["--url", "http://127.0.0.1:1", "--upstream-port", "x"],
    () => ADMIN,
    2,
    /^--upstream-port must be a port number/,
  ],
  [
    "conformance.mjs",
    ["--url", "http://example.com"],
    () => ADMIN,
    2,
    /^refusing to send the admin token over plain http/,
  ],
  [
    "conformance.mjs",
    ["--url", "http://127.0.0.1:1", "--admin-token", "t"],
    () => ADMIN,
    2,
    /^--admin-token is not accepted/,
  ],
  [
    "conformance.mjs",
    [],
    () => ({ ...ADMIN, TOOLGATE_URL: down() }),
    2,
    /^conformance could not run: .*did not answer 200/,
  ],
  ["soak.mjs", ["--fast"], () => ({}), 2, /^soak: takes no arguments/],
  [
    "soak.mjs",
    [],
    () => ({ SOAK_SEED: "abc" }),
    2,
    /^soak: SOAK_SEED must be a whole number, not "abc"$/,
  ],
  ["soak.mjs", [], () => ({ SOAK_KILL_MS: "-5" }), 2, /^soak: SOAK_KILL_MS must be a whole number/],
  [
    "soak-kill.mjs",
    [],
    () => ({ SOAK_KILL_OPS: "many" }),
    2,
    /^soak-kill: could not run: SOAK_KILL_OPS must be a whole number/,
  ],
];

describe("every CLI: one line and a documented exit code", () => {
  it.each(TABLE)("%s %j", async (script, args, env, code, firstLine) => {
    const result = await cli(script, args, env());
    expect(result.code).toBe(code);
    expect(result.stderr.split("\n")[0]).toMatch(firstLine);
    // Never a stack trace.
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(result.stdout).not.toMatch(/^\s+at /m);
  });
});

describe("verify-upstream on the demo's own manifest file", () => {
  let server: Server;
  let url = "";
  let verdict = "verified_sandbox_only";
  const seen: Array<{ method: string; path: string; body: any }> = [];
  beforeAll(async () => {
    server = createServer(async (req, res) => {
      let text = "";
      for await (const chunk of req) text += chunk;
      const body = text ? JSON.parse(text) : null;
      seen.push({ method: req.method!, path: req.url!, body });
      res.writeHead(200, { "Content-Type": "application/json" });
      if (req.method === "PUT") return res.end(JSON.stringify(body));
      const status = verdict === "failed" ? "failed" : "passed";
      res.end(
        JSON.stringify({
          name: "charge_card",
          verification: {
            status: verdict,
            checked_at: "2026-12-05T00:00:00.000Z",
            base_url: body.base_url ?? null,
            checks: [{ name: "same_key_replay", status, observed: "HTTP 200" }],
          },
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());

  const args = (extra: string[] = []) => [
    "demo/tools.json",
    "--tool",
    "charge_card",
    ...charge,
    "--context",
    '{"customer_id":"cus_test","charge_limit":50000}',
    "--base-url",
    "http://127.0.0.1:8789",
    ...extra,
  ];

  it("registers the one tool named, its placeholders filled, and exits 0 when every check passed", async () => {
    seen.length = 0;
    verdict = "verified_sandbox_only";
    const result = await cli(
      "verify-upstream.mjs",
      args(["--upstream-url", "http://127.0.0.1:9999"]),
      {
        ...KEY,
        TOOLGATE_URL: url,
      },
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^charge_card: verified_sandbox_only against http:\/\/127\.0\.0\.1:8789/,
    );
    expect(seen.map((s) => `${s.method} ${s.path}`)).toEqual([
      "PUT /v1/tools/charge_card",
      "POST /v1/tools/charge_card/verify",
    ]);
    const manifest = JSON.stringify(seen[0]!.body);
    expect(seen[0]!.body.name).toBe("charge_card");
    expect(seen[0]!.body.request.url).toBe("http://127.0.0.1:9999/charges");
    expect(manifest).not.toContain("{{");
    expect(seen[1]!.body).toEqual({
      arguments: { amount: 100, currency: "usd" },
      context: { customer_id: "cus_test", charge_limit: 50000 },
      base_url: "http://127.0.0.1:8789",
    });
  });

  it("defaults the placeholders to npm start's shop, and exits 1 when a check failed", async () => {
    seen.length = 0;
    verdict = "failed";
    const result = await cli("verify-upstream.mjs", args(), { ...KEY, TOOLGATE_URL: url });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/same_key_replay \| FAIL/);
    expect(seen[0]!.body.request.url).toBe("http://127.0.0.1:8788/charges");
  });

  it("a refusal is one line naming the request and toolgate's problem, exit 2", async () => {
    const refusing = createServer((_req, res) => {
      res.writeHead(422, { "Content-Type": "application/problem+json" });
      res.end(JSON.stringify({ code: "invalid_manifest", detail: "request.url is not allowed" }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const port = (refusing.address() as AddressInfo).port;
    const result = await cli("verify-upstream.mjs", args(), {
      ...KEY,
      TOOLGATE_URL: `http://127.0.0.1:${port}`,
    });
    refusing.close();
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe(
      "verify-upstream: PUT /v1/tools/charge_card → 422 invalid_manifest: request.url is not allowed",
    );
  });
});
