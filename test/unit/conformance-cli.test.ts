// The conformance CLI's own behaviour, without a real deployment: the table a person reads; a
// command line it cannot run refused with its usage (exit 2, distinct from "a promise is broken");
// the admin token only from the environment and never over plain http off loopback; and cleanup
// against a fake deployment (a local server that records what it is sent): what it can undo is
// undone, and a step that fails is reported and changes the exit code.
import { execFile } from "node:child_process";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { targetProblem } from "../../scripts/lib/conformance/client.mjs";
import {
  exitCodeOf,
  formatCleanup,
  formatResults,
  runConformance,
} from "../../scripts/lib/conformance/suite.mjs";

const ROOT = join(import.meta.dirname, "..", "..");

async function cli(args: string[], adminToken = "") {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, "scripts", "conformance.mjs"), ...args],
      { env: { ...process.env, TOOLGATE_URL: "", TOOLGATE_ADMIN_TOKEN: adminToken } },
    );
    return { code: 0, stdout, stderr: "" };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

type Seen = { method: string; path: string; authorization: string | null; body: any };

/**
 * A fake deployment on loopback: a tenant and key are created, one unknown outcome is listed,
 * every other route answers 404 (so a check fails fast), and revoking a key answers `revokeStatus`.
 */
async function fakeDeployment(revokeStatus: number) {
  const seen: Seen[] = [];
  const server = createServer(async (req: IncomingMessage, res) => {
    let text = "";
    for await (const chunk of req) text += chunk;
    const path = req.url ?? "/";
    seen.push({
      method: req.method ?? "",
      path,
      authorization: req.headers.authorization ?? null,
      body: text ? JSON.parse(text) : null,
    });
    const answer = (status: number, body: unknown = {}) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (path === "/healthz") return answer(200, { ok: true });
    if (req.method === "POST" && path === "/v1/admin/tenants")
      return answer(201, { tenant_id: "ten_FAKE", name: "x", jurisdiction: null });
    if (req.method === "POST" && path === "/v1/admin/tenants/ten_FAKE/keys")
      return answer(201, { key_id: "key_1", key: "tgk.fake-key" });
    if (path.startsWith("/v1/unknown-outcomes"))
      return answer(200, { operations: [{ operation_id: "op_left" }] });
    if (req.method === "GET" && path === "/v1/operations/op_left")
      return answer(200, { phase: "outcome_unknown" });
    if (req.method === "POST" && path === "/v1/operations/op_left/resolve") return answer(200);
    if (req.method === "DELETE" && path === "/v1/admin/tenants/ten_FAKE/keys/key_1")
      return revokeStatus === 204 ? (res.writeHead(204), res.end()) : answer(revokeStatus);
    return answer(404, { code: "not_found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  closers.push(close);
  return { url, seen };
}
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

describe("npm run conformance", () => {
  it("prints each check with PASS or FAIL, the broken promise's reason, the evidence and a verdict", () => {
    const text = formatResults([
      { id: "budget_stops", promise: "A budget stops", ok: true, evidence: ["2 effects"], ms: 900 },
      {
        id: "secrets_never_echoed",
        promise: "Secrets are never echoed",
        ok: false,
        failure: "the secret's value appeared in a response",
        evidence: ["responses holding the value: 5 of 45"],
        ms: 1200,
      },
    ]);
    expect(text).toMatch(/budget_stops\s+PASS\s+0\.9 s/);
    expect(text).toMatch(/secrets_never_echoed\s+FAIL\s+1\.2 s/);
    expect(text).toContain("✗ the secret's value appeared in a response");
    expect(text).toContain("· responses holding the value: 5 of 45");
    expect(text).toContain("1 of 2 promises BROKEN.");
  });

  it("refuses a command line it cannot run with its usage and exit 2", async () => {
    const missing = await cli(["--url", "http://127.0.0.1:1"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(
      "--url (or TOOLGATE_URL) and TOOLGATE_ADMIN_TOKEN are required",
    );
    expect(missing.stderr).toContain("npm run conformance");
    const unknown = await cli(["--url", "http://127.0.0.1:1", "--only", "nope"], "t");
    expect(unknown).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("unknown check: nope"),
    });
  });

  it("a deployment it cannot reach is exit 2, not a verdict", async () => {
    const unreachable = await cli(["--url", "http://127.0.0.1:9"], "t");
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toContain("conformance could not run");
  });

  it("takes the admin token from the environment only: on the command line it is refused before anything is sent", async () => {
    const deployment = await fakeDeployment(204);
    const argv = await cli(["--url", deployment.url, "--admin-token", "s3cret-admin"]);
    expect(argv.code).toBe(2);
    expect(argv.stderr).toContain("--admin-token is not accepted: set TOOLGATE_ADMIN_TOKEN");
    expect(argv.stderr).not.toContain("s3cret-admin");
    const joined = await cli(["--url", deployment.url, "--admin-token=s3cret-admin"]);
    expect(joined.code).toBe(2);
    expect(deployment.seen).toEqual([]);
  });

  it("sends the admin token over https, or plain http to loopback only", async () => {
    const table: Array<[string, boolean]> = [
      ["https://toolgate.example.com", true],
      ["https://10.0.0.5:8443", true],
      ["http://127.0.0.1:8787", true],
      ["http://localhost:8787", true],
      ["http://[::1]:8787", true],
      ["http://toolgate.example.com", false],
      ["http://10.0.0.5", false],
      ["http://127.0.0.1.nip.io", false],
      ["ftp://toolgate.example.com", false],
      ["toolgate.example.com", false],
    ];
    for (const [url, allowed] of table) expect(targetProblem(url) === null, url).toBe(allowed);
    const plain = await cli(["--url", "http://toolgate.example.com"], "s3cret-admin");
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain(
      "refusing to send the admin token over plain http to toolgate.example.com",
    );
  });

  it("cleans up what it can (the unknown outcome a check left is resolved, the key revoked) and reports a step that failed", async () => {
    const deployment = await fakeDeployment(500);
    const report = await runConformance({
      url: deployment.url,
      adminToken: "s3cret-admin",
      upstream: { controlUrl: "http://127.0.0.1:9", publicUrl: "http://127.0.0.1:9" },
      only: [],
    });
    const sent = deployment.seen.map((s) => `${s.method} ${s.path}`);
    expect(sent).toContain("POST /v1/operations/op_left/resolve");
    expect(deployment.seen.find((s) => s.path.endsWith("/resolve"))).toMatchObject({
      authorization: "Bearer tgk.fake-key",
      body: { outcome: "succeeded" },
    });
    expect(sent.at(-1)).toBe("DELETE /v1/admin/tenants/ten_FAKE/keys/key_1");
    expect(report.cleanup).toEqual({
      failures: [
        {
          step: "revoke key key_1 of tenant ten_FAKE",
          status: 500,
          detail: "{}",
        },
      ],
      tenants: ["ten_FAKE"],
    });
    expect(exitCodeOf(report)).toBe(3);
    const text = formatCleanup(report.cleanup, { upstreamUrl: "https://tunnel.example.net" });
    expect(text).toContain("cleanup FAILED: revoke key key_1 of tenant ten_FAKE answered 500");
    expect(text).toContain("left behind: tenant(s) ten_FAKE");
    expect(text).toContain("remove tunnel.example.net from TOOLGATE_UPSTREAM_ALLOWLIST");
    // Cleaned up in full: exit 0 when every promise is kept, 1 when one is broken either way.
    expect(exitCodeOf({ ok: true, cleanup: { failures: [], tenants: ["ten_FAKE"] } })).toBe(0);
    expect(exitCodeOf({ ok: false, cleanup: report.cleanup })).toBe(1);
  });

  it("the CLI prints a failed cleanup step, even with --json (on stderr)", async () => {
    const deployment = await fakeDeployment(500);
    const run = await cli(
      ["--url", deployment.url, "--only", "budget_stops", "--json"],
      "s3cret-admin",
    );
    expect(run.code).toBe(1); // the fake breaks the check: a broken promise outranks the cleanup
    expect(JSON.parse(run.stdout).cleanup.failures).toHaveLength(1);
    expect(run.stderr).toContain(
      "cleanup FAILED: revoke key key_1 of tenant ten_FAKE answered 500",
    );
  }, 30_000);
});
