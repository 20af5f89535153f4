// Tool input schemas as models see them: bound fields removed (identity comes from the run, so the
// model must not even be asked for it), and shaped for OpenAI and Anthropic strict mode — every
// object closed, every property required, optional ones nullable, and only the keywords both
// accept. Other constraints move into the description: the model still reads them, and toolgate
// still enforces them on every call.
type Schema = Record<string, unknown>;

const KEPT = new Set(["type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "items", "description", "$defs", "$ref", "title"]);

export function exportSchema(schema: Schema, boundFields: readonly string[]): Schema {
  const top = { ...schema };
  if (top.properties && typeof top.properties === "object") {
    const properties = { ...(top.properties as Record<string, Schema>) };
    for (const field of boundFields) delete properties[field];
    top.properties = properties;
    if (Array.isArray(top.required)) top.required = top.required.filter((field) => !boundFields.includes(field as string));
  }
  return strict(top);
}

function strict(schema: Schema): Schema {
  const out: Schema = {};
  const moved: string[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (KEPT.has(key)) out[key] = value;
    else if (key !== "$schema") moved.push(`${key}: ${JSON.stringify(value)}`);
  }
  if (moved.length > 0) out.description = [out.description, `Constraints: ${moved.join("; ")}.`].filter(Boolean).join(" ");
  if (Array.isArray(out.anyOf)) out.anyOf = (out.anyOf as Schema[]).map(strict);
  if (out.items && typeof out.items === "object") out.items = strict(out.items as Schema);
  if (out.$defs && typeof out.$defs === "object") out.$defs = Object.fromEntries(Object.entries(out.$defs as Record<string, Schema>).map(([k, v]) => [k, strict(v)]));
  const isObject = out.type === "object" || (out.properties !== undefined && out.type === undefined);
  if (isObject) {
    const properties = (out.properties ?? {}) as Record<string, Schema>;
    const required = new Set(Array.isArray(out.required) ? (out.required as string[]) : []);
    out.type = "object";
    out.properties = Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, required.has(name) ? strict(property) : nullable(strict(property))]));
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  return out;
}

/** Strict mode has no optional properties: an optional one becomes "this type, or null". */
function nullable(schema: Schema): Schema {
  if (typeof schema.type === "string") return { ...schema, type: [schema.type, "null"], ...(Array.isArray(schema.enum) ? { enum: [...schema.enum, null] } : {}) };
  if (Array.isArray(schema.type)) return schema.type.includes("null") ? schema : { ...schema, type: [...schema.type, "null"] };
  return { anyOf: [schema, { type: "null" }] };
}
