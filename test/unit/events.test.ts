import { describe, expect, it } from "vitest";
import { eventId, omitPaths } from "../../src/domain/journal/events.ts";

describe("event ids", () => {
  it("are evt_ + 32 hex, stable over (object, seq, type), distinct when any part differs", () => {
    const id = eventId("op_1", 3, "operation.recorded");
    expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(eventId("op_1", 3, "operation.recorded")).toBe(id);
    expect(
      new Set([
        id,
        eventId("op_2", 3, "operation.recorded"),
        eventId("op_1", 4, "operation.recorded"),
        eventId("op_1", 3, "approval.decided"),
      ]).size,
    ).toBe(4);
  });
});

describe("omitPaths: a redacted field is absent, not masked", () => {
  const doc = { a: 1, card: { number: "4242", exp: "12/30" }, list: ["x", "secret"] };
  it.each([
    { paths: [["card", "number"]], out: { a: 1, card: { exp: "12/30" }, list: ["x", "secret"] } },
    { paths: [["card"]], out: { a: 1, list: ["x", "secret"] } },
    { paths: [["list", "1"]], out: { a: 1, card: doc.card, list: ["x", null] } },
    {
      paths: [
        ["missing", "x"],
        ["list", "9"],
      ],
      out: doc,
    },
  ])("$paths", ({ paths, out }) => {
    expect(omitPaths(doc, paths)).toEqual(out);
  });
});
