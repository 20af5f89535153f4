// The README's first hour is true to the code: its walkthrough is the one `npm start` prints
// (scripts/lib/walkthrough.mjs; test/e2e/readme.test.ts runs it), with ids kept by the steps that
// make them instead of placeholders to fill by hand; "The two commands" are two; every setting
// `npm start` reads from the environment is documented; it cites nothing outside the repo.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  FAULTS,
  README,
  readmeWithWalkthrough,
  walkthrough,
} from "../../scripts/lib/walkthrough.mjs";

const ROOT = join(import.meta.dirname, "..", "..");
const readme = readFileSync(README, "utf8");
const section = (title: string) => {
  const from = readme.indexOf(`\n## ${title}\n`);
  expect(from, `README section ${title}`).toBeGreaterThan(0);
  return readme.slice(from, readme.indexOf("\n## ", from + 1));
};

describe("README", () => {
  it("its walkthrough is the banner's, generated from one file (node scripts/lib/walkthrough.mjs --write-readme)", () => {
    expect(readme).toBe(readmeWithWalkthrough(readme));
  });

  it("the banner prints the real values and nothing to fill in by hand", () => {
    const real = {
      TG: "http://127.0.0.1:9001",
      UP: "http://127.0.0.1:9002",
      TENANT: "ten_01REAL",
      ADMIN: "dev-admin-token",
      KEY: "tgk.ten_01REAL.secret",
      RUN: "run_01REAL",
      RT: "rt.REAL",
    };
    const text = walkthrough(real);
    for (const value of Object.values(real)) expect(text).toContain(value);
    // Comments show expected answers ("turn_…"); the commands themselves are complete.
    const commands = text
      .split("\n")
      .map((line) => line.replace(/(^|\s)#.*$/, ""))
      .join("\n");
    expect(commands).not.toMatch(/<[a-z_ ]+>|from above|…/i);
    // Every variable a step uses is set by an earlier line.
    const used = new Set([...text.matchAll(/\$([A-Z][A-Z0-9]*)\b/g)].map((m) => m[1]!));
    const set = new Set([...text.matchAll(/\b([A-Z][A-Z0-9]*)=/g)].map((m) => m[1]!));
    expect([...used].filter((name) => !set.has(name))).toEqual([]);
    const start = readFileSync(join(ROOT, "scripts", "start.mjs"), "utf8");
    expect(start).toContain("walkthrough(values)");
    expect(start).toContain("FAULTS");
  });

  it("lists every fault the demo upstream knows", () => {
    const upstream = readFileSync(join(ROOT, "demo", "upstream.ts"), "utf8");
    const kinds = [...upstream.matchAll(/case "([a-z_]+)":/g)]
      .map((m) => m[1]!)
      .filter((kind) => !kind.startsWith("_"));
    expect(kinds.length).toBeGreaterThan(8);
    for (const kind of kinds) expect(FAULTS).toContain(`\`${kind}\``);
  });

  it('"The two commands" shows two, and the demo\'s stated duration is its measured one', () => {
    const commands = section("The two commands").match(/```sh\n([\s\S]*?)```/)![1]!;
    expect(commands.trim().split("\n")).toHaveLength(2);
    expect(commands).toContain("(~10 s)");
    expect(readme).not.toMatch(/1 minute\)|60-second/);
  });

  it("documents every setting npm start takes from the environment", () => {
    const start = readFileSync(join(ROOT, "scripts", "start.mjs"), "utf8");
    const forwarded = [...start.matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1]!);
    expect(forwarded).toContain("TOOLGATE_UPSTREAM_ALLOWLIST");
    const first = section("The two commands");
    for (const name of forwarded) expect(first, name).toContain(`\`${name}\``);
  });

  it("cites no document outside the repo", () => {
    expect(readme).not.toMatch(/DESIGN/);
  });
});
