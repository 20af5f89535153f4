// Outcome classification, as DESIGN.md's table: every observation × every repeat-safety class.
import { describe, expect, it } from "vitest";
import { classify, repeatSafety, type RepeatSafety } from "../../src/domain/classify.ts";
import type { Observation } from "../../src/domain/observation.ts";

const http = (status: number, retryAfterMs: number | null = null): Observation => ({
  kind: "http_error",
  status,
  retryAfterMs,
  detail: "x",
});
type Row = [string, Observation, Record<RepeatSafety, string>];

// Expected decision per class, written as kind[/status/code][/reconcile]; a retry that may hide an
// applied effect is `retry/may_have_applied/<code>` (the state remembers it: see operation.ts).
const MAYBE = "retry/may_have_applied/upstream_error_unknown";
const table: Row[] = [
  [
    "2xx valid",
    { kind: "ok", result: { id: 1 } },
    { read: "succeed", keyed: "succeed", lookup: "succeed", neither: "succeed" },
  ],
  [
    "2xx invalid",
    { kind: "invalid_output", detail: "x" },
    {
      read: "fail/failed/invalid_output",
      keyed: "fail/failed/invalid_output",
      lookup: "fail/failed/invalid_output",
      neither: "fail/failed/invalid_output",
    },
  ],
  [
    "2xx, body stalled past the timeout",
    { kind: "body_lost", timedOut: true, detail: "x" },
    {
      read: "retry",
      keyed: "unknown/timeout_unknown/resend",
      lookup: "fail/failed/invalid_output",
      neither: "fail/failed/invalid_output",
    },
  ],
  [
    "2xx, body dropped mid-stream",
    { kind: "body_lost", timedOut: false, detail: "x" },
    {
      read: "retry",
      keyed: "unknown/connection_lost/resend",
      lookup: "fail/failed/invalid_output",
      neither: "fail/failed/invalid_output",
    },
  ],
  [
    "400",
    http(400),
    {
      read: "fail/rejected/invalid_arguments",
      keyed: "fail/rejected/invalid_arguments",
      lookup: "fail/rejected/invalid_arguments",
      neither: "fail/rejected/invalid_arguments",
    },
  ],
  [
    "422",
    http(422),
    {
      read: "fail/rejected/invalid_arguments",
      keyed: "fail/rejected/invalid_arguments",
      lookup: "fail/rejected/invalid_arguments",
      neither: "fail/rejected/invalid_arguments",
    },
  ],
  [
    "401",
    http(401),
    {
      read: "fail/failed/upstream_forbidden",
      keyed: "fail/failed/upstream_forbidden",
      lookup: "fail/failed/upstream_forbidden",
      neither: "fail/failed/upstream_forbidden",
    },
  ],
  [
    "403",
    http(403),
    {
      read: "fail/failed/upstream_forbidden",
      keyed: "fail/failed/upstream_forbidden",
      lookup: "fail/failed/upstream_forbidden",
      neither: "fail/failed/upstream_forbidden",
    },
  ],
  [
    "404",
    http(404),
    {
      read: "fail/failed/permanent_failure",
      keyed: "fail/failed/permanent_failure",
      lookup: "fail/failed/permanent_failure",
      neither: "fail/failed/permanent_failure",
    },
  ],
  [
    "409",
    http(409),
    {
      read: "fail/failed/permanent_failure",
      keyed: MAYBE,
      lookup: "fail/failed/permanent_failure",
      neither: "fail/failed/permanent_failure",
    },
  ],
  [
    "410",
    http(410),
    {
      read: "fail/failed/permanent_failure",
      keyed: "fail/failed/permanent_failure",
      lookup: "fail/failed/permanent_failure",
      neither: "fail/failed/permanent_failure",
    },
  ],
  [
    "302 redirect",
    http(302),
    {
      read: "fail/failed/permanent_failure",
      keyed: "unknown/redirect_unknown/human",
      lookup: "unknown/redirect_unknown/lookup",
      neither: "unknown/redirect_unknown/human",
    },
  ],
  [
    "303 See Other",
    http(303),
    {
      read: "fail/failed/permanent_failure",
      keyed: "unknown/redirect_unknown/human",
      lookup: "unknown/redirect_unknown/lookup",
      neither: "unknown/redirect_unknown/human",
    },
  ],
  [
    "307 redirect",
    http(307),
    {
      read: "fail/failed/permanent_failure",
      keyed: "unknown/redirect_unknown/human",
      lookup: "unknown/redirect_unknown/lookup",
      neither: "unknown/redirect_unknown/human",
    },
  ],
  [
    "408",
    http(408),
    {
      read: "retry",
      keyed: MAYBE,
      lookup: "unknown/upstream_error_unknown/lookup",
      neither: "unknown/upstream_error_unknown/human",
    },
  ],
  ["429", http(429), { read: "retry", keyed: "retry", lookup: "retry", neither: "retry" }],
  [
    "500",
    http(500),
    {
      read: "retry",
      keyed: MAYBE,
      lookup: "unknown/upstream_error_unknown/lookup",
      neither: "unknown/upstream_error_unknown/human",
    },
  ],
  [
    "503",
    http(503),
    {
      read: "retry",
      keyed: MAYBE,
      lookup: "unknown/upstream_error_unknown/lookup",
      neither: "unknown/upstream_error_unknown/human",
    },
  ],
  [
    "520 (Cloudflare: origin answered something unexpected)",
    http(520),
    {
      read: "retry",
      keyed: MAYBE,
      lookup: "unknown/upstream_error_unknown/lookup",
      neither: "unknown/upstream_error_unknown/human",
    },
  ],
  [
    "521 (Cloudflare: origin refused the connection)",
    http(521),
    { read: "retry", keyed: "retry", lookup: "retry", neither: "retry" },
  ],
  [
    "522 (Cloudflare: connecting to the origin timed out)",
    http(522),
    { read: "retry", keyed: "retry", lookup: "retry", neither: "retry" },
  ],
  [
    "523 (Cloudflare: origin unreachable)",
    http(523),
    { read: "retry", keyed: "retry", lookup: "retry", neither: "retry" },
  ],
  [
    "524 (Cloudflare: origin connected, then timed out)",
    http(524),
    {
      read: "retry",
      keyed: MAYBE,
      lookup: "unknown/upstream_error_unknown/lookup",
      neither: "unknown/upstream_error_unknown/human",
    },
  ],
  [
    "timeout after send",
    { kind: "timeout", detail: "x" },
    {
      read: "retry",
      keyed: "unknown/timeout_unknown/resend",
      lookup: "unknown/timeout_unknown/lookup",
      neither: "unknown/timeout_unknown/human",
    },
  ],
  [
    "connection lost (refused, reset and dropped look alike in workerd)",
    { kind: "connection_lost", detail: "x" },
    {
      read: "retry",
      keyed: "unknown/connection_lost/resend",
      lookup: "unknown/connection_lost/lookup",
      neither: "unknown/connection_lost/human",
    },
  ],
  [
    "crash mid-attempt",
    { kind: "crash" },
    {
      read: "retry",
      keyed: "unknown/crash_unknown/resend",
      lookup: "unknown/crash_unknown/lookup",
      neither: "unknown/crash_unknown/human",
    },
  ],
  [
    "not sent: toolgate could not prepare the request (its tenant did not answer)",
    { kind: "not_sent", detail: "x" },
    { read: "retry", keyed: "retry", lookup: "retry", neither: "retry" },
  ],
  [
    "misconfigured",
    { kind: "config_error", detail: "x" },
    {
      read: "fail/failed/permanent_failure",
      keyed: "fail/failed/permanent_failure",
      lookup: "fail/failed/permanent_failure",
      neither: "fail/failed/permanent_failure",
    },
  ],
];

function summary(safety: RepeatSafety, observation: Observation): string {
  const d = classify(safety, observation);
  switch (d.kind) {
    case "succeed":
      return d.kind;
    case "retry":
      return d.mayHaveApplied ? `retry/may_have_applied/${d.mayHaveApplied}` : "retry";
    case "fail":
      return `fail/${d.status}/${d.code}`;
    case "unknown":
      return `unknown/${d.code}/${d.reconcile}`;
  }
}

describe("classify", () => {
  for (const [what, observation, expected] of table) {
    it(what, () => {
      const actual = Object.fromEntries(
        (["read", "keyed", "lookup", "neither"] as const).map((s) => [s, summary(s, observation)]),
      );
      expect(actual).toEqual(expected);
    });
  }

  it("carries Retry-After on retries", () => {
    expect(classify("neither", http(429, 2000))).toMatchObject({
      kind: "retry",
      retryAfterMs: 2000,
    });
    expect(classify("keyed", http(503, 5000))).toMatchObject({ kind: "retry", retryAfterMs: 5000 });
  });

  it("Cloudflare's proof that nothing was sent says so", () => {
    expect(classify("neither", http(521))).toMatchObject({
      kind: "retry",
      mayHaveApplied: null,
      reason: expect.stringMatching(/^nothing was sent/),
    });
  });

  it("a 2xx whose body was lost says the effect happened, never that it did not", () => {
    const d = classify("neither", { kind: "body_lost", timedOut: true, detail: "x" });
    expect(d.kind === "fail" && d.message).toMatch(/took effect/);
    expect(d.kind === "fail" && d.message).not.toMatch(/did not/);
  });

  it.each(["keyed", "lookup", "neither"] as const)(
    "a write answered 2xx with invalid output (%s) says it took effect, never that it failed to",
    (safety) => {
      const d = classify(safety, { kind: "invalid_output", detail: "response is not JSON" });
      expect(d).toMatchObject({ kind: "fail", status: "failed", code: "invalid_output" });
      expect(d.kind === "fail" && d.message).toMatch(/took effect/);
      expect(d.kind === "fail" && d.message).toMatch(/response is not JSON/);
      expect(d.kind === "fail" && d.message).not.toMatch(/did not|not executed|failed/);
    },
  );

  it("a read answered with invalid output says nothing about an effect", () => {
    const d = classify("read", { kind: "invalid_output", detail: "x" });
    expect(d.kind === "fail" && d.message).not.toMatch(/took effect/);
  });

  // A keyed upstream answers a repeated key from its idempotency layer, so its definite answer
  // settles the earlier attempts too; a refusal of credentials or a tool that no longer compiles
  // never reached that layer and proves nothing about them.
  it.each([
    ["404 to the same key", http(404), true],
    ["422 to the same key", http(422), true],
    ["2xx with invalid output", { kind: "invalid_output", detail: "x" } as Observation, true],
    ["401 (credentials refused before the key was looked at)", http(401), false],
    ["403", http(403), false],
    [
      "tool no longer compiles (nothing sent)",
      { kind: "config_error", detail: "x" } as Observation,
      false,
    ],
  ])(
    "a definite failure on a resend: %s covers earlier attempts = %s",
    (_what, observation, covers) => {
      expect(classify("keyed", observation)).toMatchObject({
        kind: "fail",
        coversEarlierAttempts: covers,
      });
    },
  );

  it("refusal messages tell the model not to retry", () => {
    const d = classify("keyed", http(404));
    expect(d.kind === "fail" && d.message).toMatch(/Do not retry/);
  });

  it("maps risk × idempotency mode × reconcile to a repeat-safety class", () => {
    expect(repeatSafety("read", "none", false)).toBe("read");
    expect(repeatSafety("write", "header", false)).toBe("keyed");
    expect(repeatSafety("irreversible_write", "header", true)).toBe("keyed");
    expect(repeatSafety("write", "natural", false)).toBe("keyed");
    expect(repeatSafety("write", "none", true)).toBe("lookup");
    expect(repeatSafety("write", "none", false)).toBe("neither");
  });
});
