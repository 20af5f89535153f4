// A purity fence: the domain core takes its clock, randomness and I/O from the caller.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";

const DOMAIN = join(import.meta.dirname, "../../src/domain");
const FORBIDDEN = [
  "Date.now(",
  "Math.random(",
  "crypto.randomUUID",
  "getRandomValues",
  "setTimeout",
  "fetch(",
  "new Date(",
  "cloudflare:",
];

it("src/domain uses no clock, randomness or I/O", () => {
  // Recursive: the fence covers the folders too (src/domain/operation/ …).
  const files = readdirSync(DOMAIN, { recursive: true, encoding: "utf8" }).filter((f) =>
    f.endsWith(".ts"),
  );
  expect(files.length).toBeGreaterThan(8);
  const offences = files.flatMap((file) => {
    const text = readFileSync(join(DOMAIN, file), "utf8");
    return FORBIDDEN.filter((token) => text.includes(token)).map((token) => `${file}: ${token}`);
  });
  expect(offences).toEqual([]);
});
