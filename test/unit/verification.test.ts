// Verification judges as tables: what was sent and what came back → each named check's verdict;
// the one-argument change; and the policy: (risk × mode × verdict × setting) → what an operation
// relies on. Plain data in and out, no upstream.
import { describe, expect, it } from "vitest";
import {
  changeOneArgument,
  judgeChangedBody,
  judgeConcurrent,
  judgeFirstSend,
  judgeLookupFound,
  judgeLookupMissing,
  judgeReplay,
  skippedCheck,
  verdictOf,
} from "../../src/domain/verification-judges.ts";
import {
  idempotencyTrust,
  verificationFor,
  UNVERIFIED,
  type Exchange,
  type VerificationStatus,
  verificationStatus,
  verificationView,
} from "../../src/domain/verification.ts";
import { requireVerifiedIdempotency } from "../../src/config.ts";
import type { Env } from "../../src/durable/env.ts";

const sent = { method: "POST", url: "https://api.example.test/charges", headers: {}, body: {} };
const answer = (status: number, id: string | null = "eff_1", valid = true): Exchange => ({
  idempotency_key: "k",
  sent,
  received: {
    kind: "response",
    status,
    body: id === null ? { error: "x" } : { id },
    digest: `${status}:${id}`,
    truncated: false,
    valid_output: valid,
  },
});
const silence: Exchange = {
  idempotency_key: "k",
  sent,
  received: { kind: "no_response", detail: "no complete response within 1000 ms" },
};

describe("judges", () => {
  it.each<[string, () => { status: string; observed: string }, string, RegExp]>([
    ["first send 200", () => judgeFirstSend(answer(200)), "passed", /^HTTP 200 \(id eff_1\)$/],
    ["first send 500", () => judgeFirstSend(answer(500, null)), "failed", /^HTTP 500$/],
    ["first send timeout", () => judgeFirstSend(silence), "failed", /^no response/],
    ["replay identical", () => judgeReplay(answer(200), answer(200)), "passed", /identical/],
    [
      "replay is a new effect",
      () => judgeReplay(answer(200), answer(200, "eff_2")),
      "failed",
      /id eff_2.*id eff_1.*second effect/,
    ],
    [
      "replay with another status",
      () => judgeReplay(answer(201), answer(200)),
      "failed",
      /^HTTP 200 instead of the stored HTTP 201$/,
    ],
    [
      "replay answered 409",
      () => judgeReplay(answer(200), answer(409, null)),
      "failed",
      /HTTP 409 instead of the stored HTTP 200/,
    ],
    ["changed body 422", () => judgeChangedBody("amount", answer(422, null)), "passed", /422/],
    ["changed body 400", () => judgeChangedBody("amount", answer(400, null)), "passed", /400/],
    [
      "changed body accepted",
      () => judgeChangedBody("amount", answer(200, "eff_9")),
      "failed",
      /^amount changed: accepted, HTTP 200 \(id eff_9\)/,
    ],
    [
      "changed body 500",
      () => judgeChangedBody("amount", answer(500, null)),
      "failed",
      /not a clear refusal/,
    ],
    [
      "concurrent: identical replay",
      () => judgeConcurrent(answer(200), answer(200)),
      "passed",
      /identical/,
    ],
    [
      "concurrent: 200 and 409",
      () => judgeConcurrent(answer(200), answer(409, null)),
      "passed",
      /one effect/,
    ],
    [
      "concurrent: 409 and 200",
      () => judgeConcurrent(answer(409, null), answer(200)),
      "passed",
      /one effect/,
    ],
    [
      "concurrent: two effects",
      () => judgeConcurrent(answer(200), answer(200, "eff_2")),
      "failed",
      /two effects for one key/,
    ],
    [
      "concurrent: both 409",
      () => judgeConcurrent(answer(409, null), answer(409, null)),
      "failed",
      /expected one success/,
    ],
    [
      "concurrent: one timed out",
      () => judgeConcurrent(answer(200), silence),
      "failed",
      /expected one success/,
    ],
    ["lookup finds it", () => judgeLookupFound(answer(200)), "passed", /HTTP 200/],
    ["lookup 404", () => judgeLookupFound(answer(404, null)), "failed", /does not find/],
    [
      "lookup 200, not a result",
      () => judgeLookupFound(answer(200, "x", false)),
      "failed",
      /not a valid result/,
    ],
    ["unknown key 404", () => judgeLookupMissing(answer(404, null)), "passed", /404/],
    [
      "unknown key found",
      () => judgeLookupMissing(answer(200, "eff_1")),
      "failed",
      /never used must answer 404/,
    ],
  ])("%s → %s", (_what, judge, status, observed) => {
    const check = judge();
    expect(check.status).toBe(status);
    expect(check.observed).toMatch(observed);
  });

  it("the verdict is verified only when every check passed; skipped proves nothing", () => {
    const passed = judgeFirstSend(answer(200));
    const v = verdictOf([passed, passed], "2026-01-01T00:00:00.000Z", "h1", null);
    expect(v.status).toBe("verified");
    expect(verdictOf([passed, skippedCheck("same_key_replay")], "t", "h1", null).status).toBe(
      "failed",
    );
    expect(verdictOf([judgeFirstSend(silence)], "t", "h1", null).status).toBe("failed");
  });

  it("a stored verdict holds only for the settings it was checked with", () => {
    const v = verdictOf([judgeFirstSend(answer(200))], "t", "h1", null);
    expect(verificationFor(v, "h1")).toBe(v);
    expect(verificationFor(v, "h2")).toEqual(UNVERIFIED);
    expect(verificationFor(null, "h1")).toEqual(UNVERIFIED);
  });

  it("only a verdict from the tool's own origin counts; a sandbox's is verified_sandbox_only, which runs treat as unverified", () => {
    const passed = judgeFirstSend(answer(200));
    const own = verdictOf([passed], "t", "h1", null);
    const sandbox = verdictOf([passed], "t", "h1", "https://sandbox.example.test");
    expect(sandbox.status).toBe("verified");
    expect(verificationStatus(own)).toBe("verified");
    expect(verificationStatus(sandbox)).toBe("verified_sandbox_only");
    const failedSandbox = verdictOf([judgeFirstSend(silence)], "t", "h1", "https://s.example.test");
    expect(verificationStatus(failedSandbox)).toBe("failed");
    expect(verificationStatus(UNVERIFIED)).toBe("unverified");
    expect(verificationView(own)).toMatchObject({ status: "verified", counts_for_runs: true });
    expect(verificationView(sandbox)).toMatchObject({
      status: "verified_sandbox_only",
      counts_for_runs: false,
      summary: "verified against the sandbox only: runs treat it as unverified",
      base_url: "https://sandbox.example.test",
    });
    // What a run relies on follows the same answer: a sandbox verdict is flagged like no verdict.
    expect(
      idempotencyTrust("write", "header", false, verificationStatus(sandbox), false).unverified,
    ).toEqual({ status: "verified_sandbox_only", enforced: false });
    expect(
      idempotencyTrust("write", "header", false, verificationStatus(sandbox), true).safety,
    ).toBe("neither");
  });
});

describe("changeOneArgument", () => {
  const accepts = (c: Record<string, unknown>) =>
    typeof c.amount === "number" && c.amount > 0 && c.amount <= 10;
  it.each<[string, Record<string, unknown>, Set<string>, unknown]>([
    ["increments a number", { amount: 5 }, new Set(), { field: "amount", input: { amount: 6 } }],
    ["a number at its maximum goes down", { amount: 10 }, new Set(), { amount: 9 }],
    ["bound and URL fields are never changed", { amount: 5 }, new Set(["amount"]), null],
  ])("%s", (_what, input, skip, expected) => {
    const changed = changeOneArgument(input, {}, skip, accepts);
    if (expected === null) expect(changed).toBeNull();
    else if ("field" in (expected as object)) expect(changed).toEqual(expected);
    else expect(changed?.input).toEqual(expected);
  });

  it("picks another enum value, in sorted field order, validated by the tool", () => {
    const changed = changeOneArgument(
      { currency: "usd", amount: 1 },
      { currency: { enum: ["usd", "eur"] } },
      new Set(["amount"]),
      (c) => ["usd", "eur"].includes(c.currency as string),
    );
    expect(changed).toEqual({ field: "currency", input: { currency: "eur", amount: 1 } });
  });
});

describe("idempotencyTrust", () => {
  type Row = [
    string,
    Parameters<typeof idempotencyTrust>,
    { safety: string; hasLookup: boolean; unverified: unknown },
  ];
  const status = (s: VerificationStatus | null) => s;
  it.each<Row>([
    [
      "verified header write: keyed, not flagged",
      ["write", "header", true, status("verified"), true],
      { safety: "keyed", hasLookup: true, unverified: null },
    ],
    [
      "unverified, policy off: keyed, flagged",
      ["write", "header", true, status("unverified"), false],
      { safety: "keyed", hasLookup: true, unverified: { status: "unverified", enforced: false } },
    ],
    [
      "failed, policy off: keyed, flagged",
      ["irreversible_write", "header", false, status("failed"), false],
      { safety: "keyed", hasLookup: false, unverified: { status: "failed", enforced: false } },
    ],
    [
      "unverified, policy on: mode none, the lookup not trusted either",
      ["write", "header", true, status("unverified"), true],
      { safety: "neither", hasLookup: false, unverified: { status: "unverified", enforced: true } },
    ],
    [
      "failed, policy on: mode none",
      ["write", "header", false, status("failed"), true],
      { safety: "neither", hasLookup: false, unverified: { status: "failed", enforced: true } },
    ],
    [
      "a read is never affected",
      ["read", "header", false, status("unverified"), true],
      { safety: "read", hasLookup: false, unverified: null },
    ],
    [
      "mode natural, a code tool (no verdict exists): keyed",
      ["write", "natural", false, status(null), true],
      { safety: "keyed", hasLookup: false, unverified: null },
    ],
    [
      "mode natural manifest (verify cannot check it), policy on: mode none, no resend",
      ["write", "natural", true, status("unverified"), true],
      { safety: "neither", hasLookup: false, unverified: { status: "unverified", enforced: true } },
    ],
    [
      "mode natural manifest, policy off: keyed, flagged",
      ["irreversible_write", "natural", false, status("unverified"), false],
      { safety: "keyed", hasLookup: false, unverified: { status: "unverified", enforced: false } },
    ],
    [
      "mode none promises nothing: never flagged",
      ["write", "none", false, status("unverified"), true],
      { safety: "neither", hasLookup: false, unverified: null },
    ],
    [
      "mode none with a lookup",
      ["write", "none", true, status(null), true],
      { safety: "lookup", hasLookup: true, unverified: null },
    ],
    [
      "a code tool (no verdict exists)",
      ["write", "header", false, status(null), true],
      { safety: "keyed", hasLookup: false, unverified: null },
    ],
  ])("%s", (_what, args, expected) => {
    expect(idempotencyTrust(...args)).toEqual(expected);
  });

  it.each([
    [undefined, false],
    ["", false],
    ["false", false],
    ["0", false],
    ["OFF", false],
    ["true", true],
    ["1", true],
    ["on", true],
    ["ture", true], // a misspelt safety setting fails closed
  ])("TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY=%j → %s", (value, on) => {
    const env = { TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY: value } as unknown as Env;
    expect(requireVerifiedIdempotency(env)).toBe(on);
  });
});
