// npm run verify-upstream: its command line and the table it prints (scripts/lib/verify-table.mjs).
import { describe, expect, it } from "vitest";
import { formatTable, parseArgs } from "../../scripts/lib/verify-table.mjs";

describe("parseArgs", () => {
  it("reads the manifest, the arguments, a context and a sandbox base URL", () => {
    expect(
      parseArgs([
        "tool.json",
        "--arguments",
        '{"amount":500}',
        "--context",
        '{"customer_id":"cus_1"}',
        "--base-url",
        "https://sandbox.example.com",
      ]),
    ).toEqual({
      manifest: "tool.json",
      arguments: { amount: 500 },
      context: { customer_id: "cus_1" },
      baseUrl: "https://sandbox.example.com",
      tool: null,
      upstreamUrl: null,
    });
  });

  it.each([
    [["tool.json"], /--arguments is required/],
    [["--arguments", "{}"], /a manifest file is required/],
    [["tool.json", "--arguments", "[1]"], /--arguments must be a JSON object/],
    [["tool.json", "--arguments", "{nope"], /--arguments must be a JSON object/],
    [["tool.json", "--arguments", "{}", "--dry-run"], /unknown option --dry-run/],
    [["tool.json", "--arguments"], /--arguments needs a value/],
  ])("%j → a usage error", (argv, message) => {
    const parsed = parseArgs(argv);
    expect(parsed.error).toMatch(message);
    expect(parsed.error).toMatch(/usage: npm run verify-upstream/);
  });
});

describe("formatTable", () => {
  it("one row per check, the failing one marked, long observations wrapped", () => {
    const table = formatTable(
      "charge_card",
      {
        status: "failed",
        checked_at: "2026-01-01T00:00:00.000Z",
        base_url: "https://sandbox.example.com",
        checks: [
          { name: "first_send", status: "passed", observed: "HTTP 200 (id eff_1)" },
          {
            name: "same_key_replay",
            status: "failed",
            observed:
              "HTTP 200 with a different body (id eff_2) than the first (id eff_1): the key was not honoured, a second effect",
          },
        ],
      },
      60,
    );
    const lines = table.split("\n");
    expect(lines[0]).toBe(
      "charge_card: failed against https://sandbox.example.com (checked 2026-01-01T00:00:00.000Z)",
    );
    expect(lines[1]).toMatch(/^check +\| result \| observed$/);
    expect(lines[3]).toMatch(/^first_send +\| pass +\| HTTP 200 \(id eff_1\)$/);
    expect(lines[4]).toMatch(/^same_key_replay \| FAIL +\| HTTP 200 with a different body/);
    expect(lines.length).toBeGreaterThan(5); // the long observation wrapped onto more lines
    expect(lines.slice(1).every((line) => line.length <= 60)).toBe(true);
  });

  it("prints toolgate's one answer under the header when the verdict carries it", () => {
    const lines = formatTable("charge_card", {
      status: "verified_sandbox_only",
      summary: "verified against the sandbox only: runs treat it as unverified",
      checked_at: "2026-01-01T00:00:00.000Z",
      base_url: "https://sandbox.example.com",
      checks: [{ name: "first_send", status: "passed", observed: "HTTP 200 (id eff_1)" }],
    }).split("\n");
    expect(lines[0]).toBe(
      "charge_card: verified_sandbox_only against https://sandbox.example.com (checked 2026-01-01T00:00:00.000Z)",
    );
    expect(lines[1]).toBe("verified against the sandbox only: runs treat it as unverified");
    expect(lines[2]).toMatch(/^check +\| result \| observed$/);
  });
});
