// Rewrites before a schema is shaped for strict mode (strict-schema.ts), each keeping its meaning:
// a `type` beside a union moves into the branches, and draft-7 `definitions` become `$defs`. Pure.
import { isSchema, type Schema } from "../domain/json-schema.ts";

/**
 * `{type, anyOf}` as `{anyOf}` with the type in each branch: neither provider's strict mode takes a
 * type beside a union (Anthropic's transform drops it, the Agents SDK refuses it). Object or array
 * constraints shared beside a union cannot move into the branches faithfully: reported.
 */
export function typeIntoBranches(s: Schema, path: string, problems: string[]): Schema {
  const shared = ["properties", "required", "additionalProperties", "items"].filter(
    (key) => s[key] !== undefined,
  );
  if (shared.length > 0) {
    problems.push(`${path || "/"}: a union with ${shared.join(", ")} beside it`);
    return s;
  }
  const { type, anyOf, ...rest } = s;
  const branches = (anyOf as unknown[]).map((branch) =>
    isSchema(branch) && branch.type === undefined && branch.$ref === undefined
      ? { type, ...branch }
      : branch,
  );
  return { ...rest, anyOf: branches };
}

/**
 * `definitions` (draft 7) as `$defs`, refs rewritten: Anthropic's transform keeps only `$defs`.
 * Left as it is when a name is in both.
 */
export function definitionsAsDefs(schema: Schema): Schema {
  const legacy = schema.definitions;
  if (!isSchema(legacy)) return schema;
  const defs = isSchema(schema.$defs) ? schema.$defs : {};
  if (Object.keys(legacy).some((name) => Object.hasOwn(defs, name))) return schema;
  const { definitions: _, ...rest } = schema;
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (!isSchema(node)) return node;
    return Object.fromEntries(
      Object.entries(node).map(([key, value]) => [
        key,
        key === "$ref" && typeof value === "string" && value.startsWith("#/definitions/")
          ? `#/$defs/${value.slice("#/definitions/".length)}`
          : key === "enum" || key === "const" || key === "default" || key === "examples"
            ? value
            : rewrite(value),
      ]),
    );
  };
  return rewrite({ ...rest, $defs: { ...defs, ...legacy } }) as Schema;
}
