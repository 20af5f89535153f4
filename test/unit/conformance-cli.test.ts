// The conformance CLI's own behaviour, without a deployment: the table a person reads, and a
// command line it cannot run refused with its usage (exit 2, distinct from "a promise is broken").
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { formatResults } from "../../scripts/lib/conformance/suite.mjs";

const ROOT = join(import.meta.dirname, "..", "..");

async function cli(...args: string[]) {
  try {
    await promisify(execFile)(
      process.execPath,
      [join(ROOT, "scripts", "conformance.mjs"), ...args],
      {
        env: { ...process.env, TOOLGATE_URL: "", TOOLGATE_ADMIN_TOKEN: "" },
      },
    );
    return { code: 0, stderr: "" };
  } catch (error) {
    const failed = error as { code: number; stderr: string };
    return { code: failed.code, stderr: failed.stderr };
  }
}

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
    const missing = await cli("--url", "http://127.0.0.1:1");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--url and --admin-token are required");
    expect(missing.stderr).toContain("usage: npm run conformance");
    const unknown = await cli("--url", "http://x", "--admin-token", "t", "--only", "nope");
    expect(unknown).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("unknown check: nope"),
    });
  });

  it("a deployment it cannot reach is exit 2, not a verdict", async () => {
    const unreachable = await cli("--url", "http://127.0.0.1:9", "--admin-token", "t");
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toContain("conformance could not run");
  });
});
