// Quota definitions (domain/quota/definition.ts): one per key per tenant, and which of them a call
// is subject to — its origin's, its tool's (per user), and an origin the upstream paused.
import { describe, expect, it } from "vitest";
import {
  manifestQuota,
  quotaConflict,
  QuotaDefinition,
  quotasFor,
  type StoredQuota,
} from "../../../src/domain/quota/definition.ts";

const origin = "https://api.example.com";
const def = (body: unknown) => QuotaDefinition.parse(body);
const byOrigin: StoredQuota = {
  id: "o",
  definition: def({ scope: { origin }, rate: { limit: 5, window_ms: 1000 } }),
};
const byTool: StoredQuota = {
  id: "t",
  definition: def({ scope: { tool: "send" }, concurrency: 1 }),
};

describe("one definition per key", () => {
  it.each([
    ["the same id again: no conflict", "o", byOrigin.definition, null],
    ["another id, the same numbers: no conflict", "o2", byOrigin.definition, null],
    [
      "another id, other numbers: conflict",
      "o2",
      def({ scope: { origin }, rate: { limit: 6, window_ms: 1000 } }),
      "o",
    ],
    [
      "the origin written with its default port is the same key",
      "o2",
      def({ scope: { origin: `${origin}:443` }, concurrency: 3 }),
      "o",
    ],
    [
      "another key: no conflict",
      "o2",
      def({ scope: { origin: "https://other.example" }, concurrency: 3 }),
      null,
    ],
  ] as const)("%s", (_name, id, definition, conflictsWith) => {
    expect(quotaConflict(id, definition, [byOrigin, byTool])?.id ?? null).toBe(conflictsWith);
  });
});

describe("what a call is subject to", () => {
  const args = {
    tenantId: "tn_1",
    quotas: [byOrigin, byTool],
    pausedOrigins: {},
    tool: "send",
    toolQuota: null,
    userId: "u 1",
    nowMs: 1000,
  };
  it("its origin's quota (one object per tenant + origin) and its tool's (one per user)", () => {
    expect(quotasFor({ ...args, origin })).toEqual([
      { id: "o", object: `tn_1:${origin}`, rate: { limit: 5, windowMs: 1000, burst: 5 } },
      { id: "t", object: "tn_1:quota:user:u%201:tool:send", concurrency: 1 },
    ]);
  });
  it("nothing for another origin and another tool", () => {
    expect(quotasFor({ ...args, origin: "https://x.example", tool: "other" })).toEqual([]);
  });
  it("an origin paused with no quota: asked for its pause only; a pause already over: nothing", () => {
    const paused = { ...args, quotas: [], origin, pausedOrigins: { [origin]: 5000 } };
    expect(quotasFor(paused)).toEqual([{ id: null, object: `tn_1:${origin}` }]);
    expect(quotasFor({ ...paused, nowMs: 5000 })).toEqual([]);
  });
  it("the tool's manifest quota: per user, asked once when a PUT quota of the same tool agrees", () => {
    const own = { ...args, quotas: [], origin: null, toolQuota: { concurrency: 1 } };
    expect(quotasFor(own)).toEqual([
      { id: "manifest:send", object: "tn_1:quota:user:u%201:tool:send", concurrency: 1 },
    ]);
    expect(quotasFor({ ...own, quotas: [byTool] })).toEqual([
      { id: "t", object: "tn_1:quota:user:u%201:tool:send", concurrency: 1 },
    ]);
  });
});

describe("a manifest quota and a PUT one for the same tool", () => {
  it("agree, or the later is refused", () => {
    const manifest = manifestQuota("send", { concurrency: 2 });
    expect(quotaConflict(manifest.id, manifest.definition, [byTool])?.id).toBe("t");
    expect(
      quotaConflict("t", byTool.definition, [manifestQuota("send", { concurrency: 1 })]),
    ).toBeNull();
  });
});
