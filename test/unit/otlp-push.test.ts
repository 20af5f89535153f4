// The background OTLP push's retry policy (src/durable/otlp-push.ts), with fetch and time stubbed:
// retryable answers (429/502/503/504, a failed or timed-out connection) are pushed again after 1 s
// and 3 s with the same body; anything else is final; a failure is logged without the secret headers.
import { afterEach, describe, expect, it, vi } from "vitest";
import { collectorFor, PUSH_RETRY_DELAYS_MS, pushSpans } from "../../src/durable/otlp-push.ts";
import type { Env } from "../../src/durable/env.ts";

const env = {
  OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example/",
  OTEL_EXPORTER_OTLP_HEADERS: "x-otel-token=secret-value",
} as unknown as Env;
const trace = { resourceSpans: [{ scopeSpans: [{ spans: [{ spanId: "ab" }] }] }] } as never;

function collector(answers: Array<number | "network">) {
  const calls: Array<{ url: string; body: string; at: number }> = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit) => {
      calls.push({ url, body: String(init.body), at: Date.now() });
      const answer = answers.shift() ?? 200;
      if (answer === "network") throw new TypeError("Network connection lost.");
      return new Response("{}", { status: answer });
    }),
  );
  return calls;
}
const logged = () => {
  const lines: string[] = [];
  vi.spyOn(console, "error").mockImplementation((line: unknown) => void lines.push(String(line)));
  return lines;
};
async function push() {
  const done = pushSpans(env, trace, "op_1");
  for (const delay of PUSH_RETRY_DELAYS_MS) await vi.advanceTimersByTimeAsync(delay);
  await done;
}

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

describe("pushSpans", () => {
  it.each([
    ["503, 503, 200", [503, 503, 200], 3, false],
    ["429 then 200", [429, 200], 2, false],
    ["a lost connection then 200", ["network", 200], 2, false],
    ["200 at once", [200], 1, false],
    ["400: not retried", [400], 1, true],
    ["401: not retried", [401], 1, true],
    ["504 three times: given up", [504, 504, 504, 200], 3, true],
  ] as const)("%s → %d pushes", async (_name, answers, pushes, fails) => {
    vi.useFakeTimers();
    const lines = logged();
    const calls = collector([...answers]);
    await push();
    expect(calls).toHaveLength(pushes);
    expect(new Set(calls.map((c) => c.url))).toEqual(
      new Set(["https://collector.example/v1/traces"]),
    );
    expect(new Set(calls.map((c) => c.body)).size).toBe(1);
    const gaps = calls.slice(1).map((c, i) => c.at - calls[i]!.at);
    expect(gaps).toEqual(PUSH_RETRY_DELAYS_MS.slice(0, pushes - 1));
    expect(lines.some((l) => l.includes("toolgate.otlp_push_failed"))).toBe(fails);
    expect(lines.join("\n")).not.toContain("secret-value");
  });

  it("logs the attempts and the last answer, never the request", async () => {
    vi.useFakeTimers();
    const lines = logged();
    collector(["network", 503, 502]);
    await push();
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      level: "warn",
      event: "toolgate.otlp_push_failed",
      operation_id: "op_1",
      attempts: 3,
      status: 502,
    });
  });
});

describe("OTEL_EXPORTER_OTLP_HEADERS", () => {
  const withHeaders = (headers: string) =>
    ({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example",
      OTEL_EXPORTER_OTLP_HEADERS: headers,
    }) as unknown as Env;

  it("a malformed entry (stray %, no name, a name fetch refuses) is dropped and logged once without its value; the rest are sent; nothing throws", () => {
    const lines = logged();
    const env = withHeaders(
      "x-token=a%2Cb, bad=sk_100%_off,=orphan-value,bad name=sk_hidden,x-other=ok,",
    );
    for (let i = 0; i < 3; i++)
      expect(collectorFor(env)).toEqual({
        url: "https://collector.example/v1/traces",
        headers: { "Content-Type": "application/json", "x-token": "a,b", "x-other": "ok" },
      });
    expect(lines).toHaveLength(3);
    expect(lines.map((l) => JSON.parse(l).event)).toEqual([
      "toolgate.otlp_header_dropped",
      "toolgate.otlp_header_dropped",
      "toolgate.otlp_header_dropped",
    ]);
    expect(lines.join("\n")).not.toMatch(/sk_100|orphan-value|sk_hidden/);
  });

  it("the spans are still pushed with the well-formed headers", async () => {
    vi.useFakeTimers();
    logged();
    const sent: Array<Record<string, string>> = [];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (_url: string, init: RequestInit) => {
        sent.push(init.headers as Record<string, string>);
        return new Response("{}", { status: 200 });
      }),
    );
    await pushSpans(withHeaders("x-token=ok,x-bad=%E0%A4%A"), trace, "op_2");
    expect(sent).toEqual([{ "Content-Type": "application/json", "x-token": "ok" }]);
  });
});
