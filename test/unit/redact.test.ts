// Redaction by JSON Pointer (RFC 6901) as tables: which pointers parse, what a document looks like
// after its paths are hidden, which values are scrubbed from free text, which run context is hidden.
import { describe, expect, it } from "vitest";
import {
  parsePointer,
  parsePointers,
  presentPointers,
  redactContext,
  redactDocument,
  redactionFor,
  REDACTED,
  scrub,
} from "../../src/domain/redact.ts";

describe("parsePointer", () => {
  it.each([
    ["/a", ["a"]],
    ["/a/b", ["a", "b"]],
    ["/items/0/card", ["items", "0", "card"]],
    ["/a~1b", ["a/b"]],
    ["/m~0n", ["m~n"]],
    ["/~01", ["~1"]],
    ["/", [""]],
  ])("%j → %j", (pointer, tokens) => {
    expect(parsePointer(pointer)).toEqual({ ok: true, value: tokens });
  });

  it.each([[""], ["a"], ["a/b"], ["/a~2"], ["/a~"], ["#/a"]])("%j is refused", (pointer) => {
    const parsed = parsePointer(pointer);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toMatchObject({ code: "invalid_pointer", pointer });
  });
});

describe("redactDocument", () => {
  const doc = {
    customer_id: "cus_1234",
    amount: 5,
    card: { number: "4242424242424242", brand: "visa" },
    items: [
      { sku: "a", secret: "s-1111" },
      { sku: "b", secret: "s-2222" },
    ],
    "a/b": "slashed",
  };
  it.each([
    [["/customer_id"], { ...doc, customer_id: REDACTED }],
    [["/card/number"], { ...doc, card: { number: REDACTED, brand: "visa" } }],
    [["/card"], { ...doc, card: REDACTED }],
    [["/items/1/secret"], { ...doc, items: [doc.items[0], { sku: "b", secret: REDACTED }] }],
    [["/a~1b"], { ...doc, "a/b": REDACTED }],
    [["/missing", "/items/9/secret", "/amount/x"], doc],
  ])("%j", (pointers, expected) => {
    const paths = parsePointers(pointers);
    if (!paths.ok) throw new Error(paths.error.detail);
    expect(redactDocument(doc, { paths: paths.value, values: [] })).toEqual(expected);
  });

  it("collects the hidden argument values (at least 4 characters) and scrubs them from free text", () => {
    const redaction = redactionFor(["/customer_id", "/card", "/amount"], doc);
    expect(redaction.values.sort()).toEqual(["4242424242424242", "cus_1234", "visa"].sort());
    expect(scrub({ detail: "no customer cus_1234 for card 4242424242424242" }, redaction)).toEqual({
      detail: `no customer ${REDACTED} for card ${REDACTED}`,
    });
    // The input itself is never changed.
    expect(doc.customer_id).toBe("cus_1234");
  });
});

describe("redactContext", () => {
  it("hides context fields bound into a redacted argument, and only those", () => {
    const context = { customer_id: "cus_1", refund_limit: 100, region: "eu" };
    expect(
      redactContext(context, [
        { bind: { customer_id: "context.customer_id" }, redact: ["/customer_id"] },
        { bind: { region: "context.region" }, redact: [] },
      ]),
    ).toEqual({ customer_id: REDACTED, refund_limit: 100, region: "eu" });
  });
});

describe("presentPointers (what an approver is told traces hide)", () => {
  const doc = { amount: 5, card: { number: "4242" }, items: [{ sku: "a" }], empty: null };
  it.each([
    [["/amount"], ["/amount"]],
    [["/card/number", "/card/cvc"], ["/card/number"]],
    [["/items/0/sku", "/items/1/sku", "/items/x"], ["/items/0/sku"]],
    [["/empty"], ["/empty"]],
    [["/missing", "not-a-pointer"], []],
  ])("%j in the document → %j", (pointers, present) => {
    expect(presentPointers(pointers, doc)).toEqual(present);
  });
});
