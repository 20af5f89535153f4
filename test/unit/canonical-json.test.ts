// RFC 8785 (JCS) vectors for canonicalJson: key order by UTF-16 code units, ECMAScript number
// serialization (RFC 8785 Appendix B bit patterns included), string escaping, structure rules,
// and sha256Hex against known digests and node:crypto as an independent oracle.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/domain/canonical-json.ts";

/** The IEEE-754 double with the given 64-bit pattern (RFC 8785 Appendix B lists vectors this way). */
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe("canonicalJson: RFC 8785 examples", () => {
  it("sorts keys by UTF-16 code units (RFC 8785 §3.2.3 sorting example)", () => {
    const input = JSON.parse(String.raw`{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }`);
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it("reproduces the RFC 8785 §3.2.2 example byte for byte", () => {
    const input = JSON.parse(String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`);
    expect(canonicalJson(input)).toBe(
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
    );
  });
});

describe("canonicalJson: key ordering", () => {
  it.each([
    [
      "integer-like keys sort as strings, not numbers",
      { "2": 0, "10": 0, "1": 0 },
      '{"1":0,"10":0,"2":0}',
    ],
    ["uppercase before lowercase", { b: 0, a: 0, B: 0, A: 0 }, '{"A":0,"B":0,"a":0,"b":0}'],
    ["prefix before extension", { ab: 0, a: 0, "": 0 }, '{"":0,"a":0,"ab":0}'],
    // U+FB33 (one code unit 0xFB33) sorts after U+1F600 (surrogates 0xD83D 0xDE00): code units, not code points.
    [
      "surrogate pairs compare by code unit",
      { "\ufb33": 0, "\ud83d\ude00": 0 },
      '{"\ud83d\ude00":0,"\ufb33":0}',
    ],
    [
      "nested objects are sorted too",
      { z: { y: 1, x: [{ b: 1, a: 2 }] }, a: null },
      '{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}',
    ],
  ])("%s", (_name, input, expected) => {
    expect(canonicalJson(input)).toBe(expected);
  });

  it("does not depend on insertion order", () => {
    expect(canonicalJson({ amount: 5, currency: "usd", meta: { b: 1, a: 2 } })).toBe(
      canonicalJson({ meta: { a: 2, b: 1 }, currency: "usd", amount: 5 }),
    );
  });
});

describe("canonicalJson: numbers", () => {
  it.each([
    [1e21, "1e+21"],
    [1e-7, "1e-7"],
    [-0, "0"],
    [0, "0"],
    [0.1 + 0.2, "0.30000000000000004"],
    [333333333.33333329, "333333333.3333333"],
    [1e30, "1e+30"],
    [4.5, "4.5"],
    [2e-3, "0.002"],
    // JCS/ECMAScript switch to exponent form below 1e-6, so 1e-6 itself is written out.
    [0.000001, "0.000001"],
    [1e20, "100000000000000000000"],
    [-1.5, "-1.5"],
    [Number.MAX_SAFE_INTEGER, "9007199254740991"],
  ])("%s → %s", (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  // RFC 8785 Appendix B: IEEE-754 bit pattern → canonical text.
  it.each([
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ])("Appendix B %s → %s", (bits, expected) => {
    expect(canonicalJson(fromBits(bits))).toBe(expected);
  });

  it.each([
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["-Infinity", Number.NEGATIVE_INFINITY],
    ["NaN bit pattern 7fffffffffffffff", fromBits("7fffffffffffffff")],
    ["Infinity bit pattern 7ff0000000000000", fromBits("7ff0000000000000")],
  ])("rejects non-finite %s, also when nested", (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
    expect(() => canonicalJson({ a: [1, { b: value }] })).toThrow(TypeError);
  });
});

describe("canonicalJson: strings", () => {
  it.each([
    ["control char U+000F as lowercase \\u escape", "\u000f", '"\\u000f"'],
    ["U+001F", "\u001f", '"\\u001f"'],
    ["NUL", "\u0000", '"\\u0000"'],
    ["short escapes for \\b \\t \\n \\f \\r", "\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'],
    ["double quote", 'say "hi"', '"say \\"hi\\""'],
    ["backslash", "a\\b", '"a\\\\b"'],
    ["solidus is not escaped", "a/b", '"a/b"'],
    ["U+2028 and U+2029 are not escaped", "\u2028\u2029", '"\u2028\u2029"'],
    ["U+007F (DEL) is not escaped", "\u007f", '"\u007f"'],
    ["non-ASCII stays literal", "€ö😀", '"€ö😀"'],
  ])("%s", (_name, value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it("escapes keys the same way as values", () => {
    expect(canonicalJson({ 'a"\n': "\u000f" })).toBe('{"a\\"\\n":"\\u000f"}');
  });
});

describe("canonicalJson: structure", () => {
  it.each([
    ["literals", [null, true, false], "[null,true,false]"],
    ["empty containers", { a: [], b: {} }, '{"a":[],"b":{}}'],
    ["nested arrays keep order", [[3, [2, [1]]], "x"], '[[3,[2,[1]]],"x"]'],
    ["no whitespace anywhere", { a: [1, { b: 2 }] }, '{"a":[1,{"b":2}]}'],
    [
      "undefined properties are dropped",
      { a: undefined, b: 1, c: { d: undefined } },
      '{"b":1,"c":{}}',
    ],
    ["undefined array items become null (as JSON.stringify)", [1, undefined, 2], "[1,null,2]"],
  ])("%s", (_name, input, expected) => {
    expect(canonicalJson(input)).toBe(expected);
  });

  it("round-trips to an equal value", () => {
    const value = { z: [1, "two", { three: 3.5 }], a: { nested: [true, null] } };
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
  });

  it.each([
    ["bigint", 1n],
    ["function", () => 1],
    ["symbol", Symbol("s")],
  ])("rejects a %s", (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
  });
});

describe("sha256Hex", () => {
  it.each([
    ["", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
    ["abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"],
    [
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    ],
  ])("sha256(%j) is the FIPS 180 digest", async (text, digest) => {
    expect(await sha256Hex(text)).toBe(digest);
  });

  it.each([["€ö😀"], ['{"amount":5,"currency":"usd"}'], ["\u2028\u0000"]])(
    "hashes the UTF-8 bytes of %j (matches node:crypto)",
    async (text) => {
      expect(await sha256Hex(text)).toBe(createHash("sha256").update(text, "utf8").digest("hex"));
    },
  );

  it("is 64 lowercase hex digits", async () => {
    expect(await sha256Hex("toolgate")).toMatch(/^[0-9a-f]{64}$/);
  });
});
