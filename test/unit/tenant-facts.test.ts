// The tenant-facts bound as a table (domain/tenant-facts.ts), the slice one call may see, and the
// latency model's setting (config.ts devRpcDelays): development only, refused whole when malformed.
import { describe, expect, it, vi } from "vitest";
import {
  callFacts,
  FACTS_MAX_AGE_MS,
  FACTS_SCHEMA,
  FACTS_REFRESH_AFTER_MS,
  freshness,
  type TenantFacts,
} from "../../src/domain/tenant-facts.ts";
import { devRpcDelays } from "../../src/config.ts";

const READ_AT = 1_000_000;

describe("freshness: how old a snapshot may be", () => {
  it.each([
    [0, "fresh"],
    [FACTS_REFRESH_AFTER_MS, "fresh"],
    [FACTS_REFRESH_AFTER_MS + 1, "refresh"],
    [FACTS_MAX_AGE_MS, "refresh"],
    [FACTS_MAX_AGE_MS + 1, "stale"],
  ] as const)("%i ms old → %s", (ageMs, expected) => {
    expect(freshness({ schema: FACTS_SCHEMA, readAtMs: READ_AT }, READ_AT + ageMs)).toBe(expected);
  });

  it("another shape version is never used (5: before standing grants were in the facts)", () => {
    expect(freshness({ schema: 5 as 6, readAtMs: READ_AT }, READ_AT)).toBe("stale");
  });
});

describe("callFacts: a call sees its own tool's facts only", () => {
  const facts: TenantFacts = {
    schema: FACTS_SCHEMA,
    version: "v1",
    readAtMs: READ_AT,
    quotas: [],
    pausedOrigins: {},
    secrets: { PAY: { iv: "i", ciphertext: "c" }, MAIL: { iv: "j", ciphertext: "d" }, GONE: null },
    tools: {
      pay: { secrets: ["PAY", "GONE"], verification: null },
      mail: {
        secrets: ["MAIL"],
        verification: { settingsHash: "h", status: "verified" },
      },
    },
    policies: null,
    freezes: [],
    tripwires: [],
    grants: [],
  };

  it("the tool's secrets, deleted ones as null, and its verdict", () => {
    expect(callFacts(facts, "pay")).toEqual({
      version: "v1",
      readAtMs: READ_AT,
      secrets: { PAY: { iv: "i", ciphertext: "c" }, GONE: null },
      verification: null,
      policies: null,
      quotas: [],
      pausedOrigins: {},
      freezes: [],
      tripwires: [],
      grants: [],
    });
    expect(callFacts(facts, "mail")?.secrets).toEqual({ MAIL: { iv: "j", ciphertext: "d" } });
  });

  it("a tool the snapshot does not cover: null (the operation asks the tenant)", () => {
    expect(callFacts(facts, "other")).toBeNull();
  });
});

describe("TOOLGATE_DEV_RPC_DELAY", () => {
  const dev = (value: string) => ({ TOOLGATE_ENV: "development", TOOLGATE_DEV_RPC_DELAY: value });

  it("names object classes and whole ms in development", () => {
    expect(devRpcDelays(dev("TenantObject=150, RunObject=0"))).toEqual({
      TenantObject: 150,
      RunObject: 0,
    });
    expect(devRpcDelays({ TOOLGATE_ENV: "development" })).toEqual({});
  });

  it.each([
    [
      "outside development",
      { TOOLGATE_ENV: "production", TOOLGATE_DEV_RPC_DELAY: "TenantObject=150" },
    ],
    ["with TOOLGATE_ENV unset", { TOOLGATE_DEV_RPC_DELAY: "TenantObject=151" }],
    ["an unknown class", dev("TenantObjekt=150")],
    ["a delay that is not whole ms", dev("TenantObject=1.5")],
    ["a negative delay", dev("TenantObject=-1")],
    ["no delay", dev("TenantObject")],
    ["one bad entry among good ones", dev("RunObject=5,TenantObject=x")],
  ])("is refused whole, with an error log: %s", (_, env) => {
    const error = vi.spyOn(console, "error").mockImplementation(() => {});
    expect(devRpcDelays(env)).toEqual({});
    expect(error).toHaveBeenCalledWith(expect.stringContaining("toolgate.misconfigured"));
    error.mockRestore();
  });
});
