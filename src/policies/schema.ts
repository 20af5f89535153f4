// The Cedar schema toolgate generates from a tenant's tools (issue 21 part 2), in Cedar's schema
// text. principal: `User` (id, scopes; the run user's attributes as string tags); action: one per
// tool, named as the tool; resource: `Target` (the bound target: the tool's resource key, else the
// tool's name); context: `arguments` (the frozen arguments' scalar fields — integer and number as
// Long, string and string enums as String, boolean as Boolean) and `run` (a `Run` whose string
// tags are the run's context). Pure.
import type { ToolSpec } from "../tools/spec.ts";

type Field = { type?: unknown; enum?: unknown[] };

/** The Cedar type of one top-level argument, or null: not visible to policies (arrays, objects). */
export function cedarTypeOf(field: Field): "Long" | "String" | "Boolean" | null {
  if (field.type === "integer" || field.type === "number") return "Long";
  if (field.type === "string") return "String";
  if (field.type === "boolean") return "Boolean";
  if (Array.isArray(field.enum) && field.enum.every((v) => typeof v === "string")) return "String";
  return null;
}

/** The arguments policies see: name → Cedar type, with whether it is always present. */
export function argumentTypes(
  spec: Pick<ToolSpec, "inputJsonSchema">,
): Array<{ name: string; type: "Long" | "String" | "Boolean"; required: boolean }> {
  const schema = spec.inputJsonSchema as {
    properties?: Record<string, Field>;
    required?: string[];
  };
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).flatMap(([name, field]) => {
    const type = cedarTypeOf(field);
    return type ? [{ name, type, required: required.has(name) }] : [];
  });
}

const quote = (text: string) => JSON.stringify(text);

export function cedarSchemaFor(
  specs: ReadonlyArray<Pick<ToolSpec, "name" | "inputJsonSchema">>,
): string {
  const actions = specs.map((spec) => {
    const args = argumentTypes(spec)
      .map((a) => `${quote(a.name)}${a.required ? "" : "?"}: ${a.type}`)
      .join(", ");
    return `action ${quote(spec.name)} appliesTo { principal: User, resource: Target, context: { "arguments": { ${args} }, "run": Run } };`;
  });
  return [
    "entity User { id: String, scopes: Set<String> } tags String;",
    "entity Run tags String;",
    "entity Target;",
    ...actions,
  ].join("\n");
}
