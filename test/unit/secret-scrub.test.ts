// No fragment of a secret leaves toolgate: upstream text is scrubbed whole and only then cut (the
// 200-character error snippet the model reads, the 4 KiB verify evidence), and a cut never leaves
// the start of a secret or of a redacted argument. fetch is stubbed; the executor is the real one.
import { afterEach, describe, expect, it, vi } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/domain/canonical-json.ts";
import { classify } from "../../src/domain/classify.ts";
import { cutClear, redactionFor, scrub } from "../../src/domain/redact.ts";
import { compileManifest } from "../../src/tools/manifest/compile.ts";
import { sendAttempt } from "../../src/tools/http-tool.ts";
import { sendProbe } from "../../src/tools/probe.ts";

/** How much of an error body the model is shown, and how much verify evidence is kept. */
const SNIPPET_CHARS = 200;
const EVIDENCE_BYTES = 4096;

const SECRET = "Zq9xK2mPv7Lw4Rt8Hn3B";
const spec = (() => {
  const compiled = compileManifest(
    {
      name: "charge",
      description: "Charge.",
      input_schema: {
        type: "object",
        properties: { amount: { type: "integer" }, note: { type: "string" } },
        required: ["amount", "note"],
      },
      risk: "write",
      request: {
        method: "POST",
        url: "http://127.0.0.1:1/charges",
        headers: { Authorization: "Bearer {secret:SHOP_KEY}" },
      },
      idempotency: { mode: "header", header: "Idempotency-Key" },
      redact: ["/note"],
    },
    { allowlist: [], allowLoopback: true },
  );
  if (!compiled.ok) throw new Error(compiled.error.detail);
  return compiled.value;
})();

async function frozen(value: Record<string, unknown>) {
  const canonical = canonicalJson(value);
  return { value, canonical, hash: await sha256Hex(canonical) };
}
const ctx = {
  idempotencyKey: "tg_test",
  secrets: { SHOP_KEY: SECRET },
  config: {},
  signal: null,
  fencingToken: null,
  route: { to: "production" as const },
};
const upstreamAnswers = (status: number, body: string) =>
  vi.stubGlobal(
    "fetch",
    vi.fn(async () => new Response(body, { status })),
  );
/** Every prefix of `value` of at least `min` characters that occurs in `text`. */
const prefixesIn = (text: string, value: string, min: number) =>
  Array.from({ length: value.length - min + 1 }, (_, i) => value.slice(0, min + i)).filter(
    (prefix) => text.includes(prefix),
  );

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("the error snippet the model reads", () => {
  it("a 400 body with the secret starting at character 192: the message holds no part of it", async () => {
    const body = `${"x".repeat(180)}invalid key ${SECRET} (check your dashboard)`;
    expect(body.indexOf(SECRET)).toBe(192);
    upstreamAnswers(400, body);
    const observed = await sendAttempt(spec, await frozen({ amount: 1, note: "n" }), ctx);
    const decision = classify("keyed", observed);
    expect(decision).toMatchObject({ kind: "fail", code: "invalid_arguments" });
    const message = decision.kind === "fail" ? decision.message : "";
    expect(message).toContain("invalid key");
    expect(prefixesIn(message, SECRET, 2)).toEqual([]);
  });

  it("wherever an echoed argument puts the secret, no prefix of it survives the cut", async () => {
    const starts = Array.from(
      { length: SECRET.length + 5 },
      (_, i) => SNIPPET_CHARS - SECRET.length - 2 + i,
    );
    for (const start of starts) {
      upstreamAnswers(422, `${"y".repeat(start)}${SECRET}${"z".repeat(50)}`);
      const observed = await sendAttempt(spec, await frozen({ amount: 1, note: "n" }), ctx);
      expect(observed.kind).toBe("http_error");
      const detail = observed.kind === "http_error" ? observed.detail : "";
      expect(detail.length).toBeLessThanOrEqual(SNIPPET_CHARS);
      expect(prefixesIn(detail, SECRET, 2), `secret at ${start}`).toEqual([]);
    }
  });

  it("a body that itself ends the text with the start of a secret (4+ characters) is cut before it", async () => {
    upstreamAnswers(404, `${"w".repeat(SNIPPET_CHARS - 5)}${SECRET.slice(0, 9)}${"w".repeat(40)}`);
    const observed = await sendAttempt(spec, await frozen({ amount: 1, note: "n" }), ctx);
    const detail = observed.kind === "http_error" ? observed.detail : "";
    expect(detail).toBe("w".repeat(SNIPPET_CHARS - 5));
  });

  it("a redacted argument straddling the cut is not split, so the console's scrub hides all of it", async () => {
    const note = "customer-private-note-1234";
    const input = await frozen({ amount: 1, note });
    upstreamAnswers(400, `${"v".repeat(SNIPPET_CHARS - 10)}${note} is not allowed`);
    const observed = await sendAttempt(spec, input, ctx);
    const decision = classify("keyed", observed);
    const message = decision.kind === "fail" ? decision.message : "";
    const shown = scrub(message, redactionFor(spec.redact, input.value));
    expect(prefixesIn(shown, note, 2)).toEqual([]);
  });
});

describe("verify evidence", () => {
  it("a 200 body with the secret at the 4096-character evidence cut keeps no part of it", async () => {
    const head = `{"id":"eff_1","pad":"`;
    const pad = "p".repeat(EVIDENCE_BYTES - 6 - head.length - `","echo":"`.length);
    const body = `${head}${pad}","echo":"${SECRET}","tail":"${"t".repeat(100)}"}`;
    expect(body.indexOf(SECRET)).toBe(EVIDENCE_BYTES - 6);
    upstreamAnswers(200, body);
    const exchange = await sendProbe(spec, "request", await frozen({ amount: 1, note: "n" }), ctx);
    expect(exchange.received).toMatchObject({ kind: "response", status: 200, truncated: true });
    const evidence = JSON.stringify(exchange);
    expect(prefixesIn(evidence, SECRET, 2)).toEqual([]);
    expect(exchange.sent.headers.Authorization).toBe("Bearer [redacted]");
  });
});

describe("cutClear", () => {
  it.each([
    ["short text is kept whole", "abc", 10, ["abcd"], "abc"],
    ["a plain cut", "abcdefghij", 4, ["zzzz"], "abcd"],
    ["a value straddling the cut is dropped whole", "xx[redacted]yy", 6, ["[redacted]"], "xx"],
    ["even one character of a straddling value", "xxxxxSECRETyy", 6, ["SECRET"], "xxxxx"],
    ["a tail that starts a value (4+ chars)", "xxSECRyyyyyyy", 6, ["SECRET"], "xx"],
    ["a 3-character coincidence is kept", "xxxSECyyyyyy", 6, ["SECRET"], "xxxSEC"],
    ["a whole value ending at the cut is not a fragment", "xxSECRETyy", 8, ["SECRET"], "xxSECRET"],
    ["repeated until no fragment is left", "xxKESECRETzz", 8, ["SECRET", "KESE"], "xx"],
  ])("%s", (_what, text, max, hidden, expected) => {
    expect(cutClear(text, max, hidden)).toBe(expected);
  });
});
