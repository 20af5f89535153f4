// domain/turn/turn.ts as a table: a turn's identity (call ids) and content hash (replay vs conflict).
import { describe, expect, it } from "vitest";
import { turnIdentity } from "../../../src/domain/turn/turn.ts";
import { call } from "./fixtures.ts";

describe("turnIdentity", () => {
  const base = [call("call_0", 1)];
  it.each([
    ["same calls", [call("call_0", 1)], true, true],
    ["other arguments", [call("call_0", 2)], true, false],
    ["other name", [call("call_0", 1, "refund")], true, false],
    [
      "arguments as a JSON string, other key order",
      [{ id: "call_0", name: "charge", arguments: ' {"amount":1} ' }],
      true,
      true,
    ],
    ["other call id", [call("call_1", 1)], false, false],
  ] as const)("%s: same id %s, same content %s", async (_what, calls, sameId, sameContent) => {
    const [a, b] = await Promise.all([turnIdentity(base), turnIdentity(calls as never)]);
    expect(a.id).toMatch(/^turn_[0-9a-f]{26}$/);
    expect(a.id === b.id).toBe(sameId);
    expect(a.contentHash === b.contentHash).toBe(sameContent);
  });
});
