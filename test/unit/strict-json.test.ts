import { describe, expect, it } from "vitest";
import { jsonTextProblem, MAX_JSON_DEPTH } from "../../src/domain/strict-json.ts";

describe("jsonTextProblem", () => {
  it.each([
    ['{"amount":1,"currency":"usd","nested":{"amount":2}}', null],
    ['[{"a":1},{"a":2}]', null],
    ['{"a":"\\"b\\":1,\\"a\\":2","b":"\\ud83d\\ude00"}', null],
    ['{"a":{"x":1},"b":{"x":1}}', null],
    ['"\\u005f_proto__"', null],
    ['{"amount":1,"amount":900}', 'duplicate key "amount"'],
    ['{"a":1,"\\u0061":2}', 'duplicate key "a"'],
    ['{"outer":{"k":[1,{"k":1,"k":2}]}}', 'duplicate key "k"'],
    ['{"note":"\\ud800"}', "lone surrogate"],
    ['{"note":"\\udc00x"}', "lone surrogate"],
    ['{"\\ud800":1}', "lone surrogate"],
    ['{"__proto__":{"admin":true}}', '"__proto__"'],
    ['{"a":[{"\\u005f_proto__":1}]}', '"__proto__"'],
    [`${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}`, "nested deeper"],
  ])("%s → %s", (text, expected) => {
    JSON.parse(text); // every row is valid JSON: this is about what JSON.parse lets through
    const problem = jsonTextProblem(text);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toContain(expected);
  });

  it("accepts nesting at the limit", () => {
    const text = `${"[".repeat(MAX_JSON_DEPTH)}${"]".repeat(MAX_JSON_DEPTH)}`;
    expect(jsonTextProblem(text)).toBeNull();
  });
});
