// grant.* events (issue 35), pure: when the told uses fill a grant (`usedUp`, what grant.exhausted
// reports once) and a token's claims kept for approver groups by attribute (`claimsOf`).
import { describe, expect, it } from "vitest";
import { usedUp, type Grant } from "../../src/domain/grant.ts";
import { claimsOf } from "../../src/http/access.ts";

const grant = (totalMax: number | null, count: number | null) =>
  ({ totalMax, count }) as unknown as Grant;

describe("usedUp", () => {
  it.each([
    ["total reached", grant(100, null), { calls: 2, sum: 100 }, true],
    ["total not reached", grant(100, null), { calls: 2, sum: 90 }, false],
    ["count reached", grant(null, 3), { calls: 3, sum: 0 }, true],
    ["count not reached", grant(null, 3), { calls: 2, sum: 0 }, false],
    ["either bound", grant(100, 5), { calls: 5, sum: 10 }, true],
  ])("%s", (_name, g, used, expected) => {
    expect(usedUp(g, used)).toBe(expected);
  });
});

describe("claimsOf", () => {
  it("keeps string and string-array claims, custom ones as custom.<name>, nothing else", () => {
    expect(
      claimsOf({
        email: "a@b.example",
        groups: ["x", "y"],
        exp: 123,
        mixed: ["x", 1],
        nested: { a: "b" },
        custom: { dept: "fin", roles: ["r1"], n: 1 },
      }),
    ).toEqual({
      email: ["a@b.example"],
      groups: ["x", "y"],
      "custom.dept": ["fin"],
      "custom.roles": ["r1"],
    });
  });
  it("bounds the number of values kept", () => {
    const many = Array.from({ length: 500 }, (_, i) => `g${i}`);
    expect(claimsOf({ groups: many }).groups).toHaveLength(100);
  });
});
