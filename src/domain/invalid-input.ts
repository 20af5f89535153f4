// Zod's refusals in words a caller can act on (the detail of 400 invalid_request and 422
// invalid_manifest): a value outside a closed set (an enum, a literal, a discriminator) is named
// with the set it must come from, and a union's bare "Invalid input" is opened into what its
// branches asked for. Callers parse with `{ reportInput: true }` so the refused value can be named
// (only a primitive is echoed, cut to 80 characters). The layout stays z.prettifyError's. Pure.
import { z } from "zod";

type Issue = z.core.$ZodIssue;
type Path = PropertyKey[];

export function describeInvalid(error: z.ZodError): string {
  return z.prettifyError(new z.ZodError(error.issues.flatMap((issue) => opened(issue, []))));
}

function opened(issue: Issue, prefix: Path): Issue[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === "invalid_value")
    return [{ ...issue, path, message: outsideSet(issue.values, issue.input) }];
  if (issue.code !== "invalid_union") return [{ ...issue, path }];
  // A discriminated union names its options but not the value it was given.
  if (issue.errors.length === 0) {
    const { discriminator, options } = issue as { discriminator?: unknown; options?: unknown };
    if (typeof discriminator !== "string" || !Array.isArray(options)) return [{ ...issue, path }];
    const given = isRecord(issue.input) ? issue.input[discriminator] : undefined;
    return [{ ...issue, path, message: outsideSet(options, given) }];
  }
  const branches = issue.errors.map((branch) => branch.flatMap((i) => opened(i, path)));
  // A branch that refuses the value's very type (an array where a string goes) says nothing more.
  const shaped = branches.filter(
    (branch) => !branch.every((i) => i.code === "invalid_type" && samePath(i.path, path)),
  );
  if (shaped.length === 0) {
    const expected = [
      ...new Set(branches.flat().map((i) => (i as { expected?: string }).expected)),
    ];
    return [custom(path, `Invalid input: expected ${expected.join(" or ")}, ${received(issue)}`)];
  }
  const values = shaped.flat();
  // Every branch lists values for the same place: one set of all of them.
  if (values.every((i) => i.code === "invalid_value" && samePath(i.path, values[0]!.path))) {
    const allowed = [...new Set(values.flatMap((i) => (i as { values: unknown[] }).values))];
    return [{ ...values[0]!, message: outsideSet(allowed, values[0]!.input) }];
  }
  if (shaped.length === 1) return shaped[0]!;
  const each = shaped.map((branch) =>
    branch.map((i) => `${i.message}${atWithin(i.path, path)}`).join("; "),
  );
  return [custom(path, `Invalid input: either ${each.join(", or ")}`)];
}

function outsideSet(values: readonly unknown[], input: unknown): string {
  const expected =
    values.length === 1
      ? `expected ${show(values[0])}`
      : `expected one of ${values.map(show).join(", ")}`;
  const primitive = input === null || ["string", "number", "boolean"].includes(typeof input);
  return primitive ? `Invalid option ${show(input)}: ${expected}` : `Invalid option: ${expected}`;
}

function received(issue: Issue): string {
  const input = issue.input;
  if (input === undefined) return "received nothing";
  return `received ${input === null ? "null" : Array.isArray(input) ? "array" : typeof input}`;
}

/** A refused value as a message names it: JSON for a string, cut to 80 characters. */
export const show = (value: unknown) =>
  typeof value === "string"
    ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)
    : String(value);
const custom = (path: Path, message: string): Issue => ({
  code: "custom",
  path,
  message,
  input: undefined,
});
const samePath = (a: Path, b: Path) => a.length === b.length && a.every((key, i) => key === b[i]);
const atWithin = (path: Path, base: Path) =>
  path.length > base.length ? ` (at ${path.slice(base.length).join(".")})` : "";
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
