// Tool input schemas as models see them. Bound fields are removed (identity comes from the run, so
// the model is never asked for it), and the rest is shaped for the provider's strict mode: every
// object closed, every property required, originally-optional ones nullable, and only the keywords
// that provider's strict mode accepts, in the form its official SDK's own transform leaves as it is
// (a fixed point: Anthropic `transformJSONSchema`, @anthropic-ai/sdk; OpenAI `toStrictJsonSchema`,
// openai, and the Agents SDK's `tool({ strict: true })`; test/unit/strict-export.test.ts checks
// each). Three profiles:
// - `anthropic`: no numeric, string-length or pattern constraints, `minItems` 0 or 1 only, a
//   `format` only on a plain string (an optional formatted string becomes `anyOf [string, null]`),
//   and no `type` beside `enum`/`const` (the SDK drops it).
// - `openai`: also `pattern`, `minimum`/`maximum`/`exclusive*`/`multipleOf`, any `minItems`,
//   `maxItems`; `type` stays beside `enum`.
// - `portable` (native and MCP exports, which go to any model): what both accept as it is.
// Every other constraint moves into the description in words (schema-words.ts): the model still
// reads it and toolgate still enforces the original schema on every call. Schemas strict mode
// cannot express without changing their meaning are reported in `problems` (exported non-strict);
// those problems are the same for every profile, so a tool is strict everywhere or nowhere.
import { acceptsNull, isSchema, merge, resolveRef, type Schema } from "../domain/json-schema.ts";
import { definitionsAsDefs, typeIntoBranches } from "./schema-rewrites.ts";
import { movedInWords } from "./schema-words.ts";

export type StrictSchema = { schema: Schema; strict: boolean; problems: string[] };
export type SchemaProfile = "anthropic" | "openai" | "portable";

/** String formats both providers accept in strict mode (Anthropic also takes `uri`, OpenAI not). */
const FORMATS = new Set([
  "date-time",
  "time",
  "date",
  "duration",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "uuid",
]);
const ANTHROPIC_FORMATS = new Set([...FORMATS, "uri"]);
/** OpenAI strict mode's numeric constraints (Anthropic's strict mode has none). */
const NUMERIC = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);
/** Annotations with no meaning for the model. */
const SILENT = new Set([
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "readOnly",
  "writeOnly",
  "deprecated",
]);
/** Constraints that change the value's shape: moving them to the description would misstate it. */
const SHAPING = new Set([
  "prefixItems",
  "additionalItems",
  "patternProperties",
  "unevaluatedProperties",
  "unevaluatedItems",
  "$dynamicRef",
  "$recursiveRef",
]);
/** OpenAI: at most 10 levels of object nesting in a strict schema. */
const MAX_DEPTH = 10;
const NULL = { type: "null" } as const;

type Context = {
  root: Schema;
  problems: string[];
  inlining: Set<string>;
  profile: SchemaProfile;
};

/** The strict-mode schema for a tool's input (see toStrictSchema for whether it is faithful). */
export function exportSchema(
  schema: Schema,
  boundFields: readonly string[],
  profile: SchemaProfile = "portable",
): Schema {
  return toStrictSchema(schema, boundFields, profile).schema;
}

export function toStrictSchema(
  schema: Schema,
  boundFields: readonly string[],
  profile: SchemaProfile = "portable",
): StrictSchema {
  const source = definitionsAsDefs(withoutBound(schema, boundFields));
  const ctx: Context = { root: source, problems: [], inlining: new Set(), profile };
  const out = strict(source, "", ctx, 0, true);
  if (out.type !== "object" || out.anyOf !== undefined)
    ctx.problems.push('the root schema must be a plain object (type: "object", no union)');
  for (const name of recursiveDefinitions(out))
    ctx.problems.push(`${name} refers to itself (Anthropic strict mode rejects recursive schemas)`);
  return { schema: out, strict: ctx.problems.length === 0, problems: ctx.problems };
}

/** The schema with bound (top-level) fields gone from `properties` and `required`. */
export function withoutBound(schema: Schema, boundFields: readonly string[]): Schema {
  if (boundFields.length === 0) return schema;
  const out: Schema = { ...schema };
  if (isSchema(schema.properties))
    out.properties = Object.fromEntries(
      Object.entries(schema.properties).filter(([name]) => !boundFields.includes(name)),
    );
  if (Array.isArray(schema.required))
    out.required = schema.required.filter((name) => !boundFields.includes(name as string));
  return out;
}

function strict(node: unknown, path: string, ctx: Context, depth: number, isRoot = false): Schema {
  if (!isSchema(node)) {
    ctx.problems.push(`${path || "/"}: ${JSON.stringify(node)} is not a schema object`);
    return {};
  }
  let s = node;
  if (
    typeof s.$ref === "string" &&
    Object.keys(s).some((key) => key !== "$ref" && key !== "$defs" && key !== "definitions")
  ) {
    // OpenAI rejects keywords beside $ref (Anthropic's SDK drops them): inline the definition.
    const ref = s.$ref;
    const target = resolveRef(ctx.root, ref);
    if (!target || ctx.inlining.has(ref)) {
      ctx.problems.push(`${path || "/"}: $ref ${ref} has sibling keywords and cannot be inlined`);
      return { $ref: ref };
    }
    const { $ref: _, ...siblings } = s;
    ctx.inlining.add(ref);
    const inlined = strict(merge(target, siblings), path, ctx, depth, isRoot);
    ctx.inlining.delete(ref);
    return inlined;
  }
  if (Array.isArray(s.allOf)) {
    // OpenAI has no allOf: fold an intersection of object schemas into one object.
    const { allOf, ...rest } = s;
    const branches = allOf.map((branch) =>
      isSchema(branch) && typeof branch.$ref === "string"
        ? resolveRef(ctx.root, branch.$ref)
        : branch,
    );
    if (branches.every(isSchema))
      s = [...branches, rest].reduce<Schema>((acc, branch) => merge(acc, branch), {});
  }
  if (s.oneOf !== undefined && s.anyOf === undefined) {
    // Exclusivity is lost; toolgate still validates against the original oneOf.
    const { oneOf, ...rest } = s;
    s = { ...rest, anyOf: oneOf };
  }
  if (Array.isArray(s.anyOf) && s.type !== undefined) s = typeIntoBranches(s, path, ctx.problems);
  if (
    s.type === undefined &&
    s.enum === undefined &&
    s.const === undefined &&
    s.anyOf === undefined &&
    s.$ref === undefined
  ) {
    if (s.properties !== undefined || isRoot) s = { type: "object", ...s };
    else if (s.items !== undefined) s = { type: "array", ...s };
  }

  const out: Schema = {};
  const moved: Schema = {};
  const openai = ctx.profile === "openai";
  const declared = Array.isArray(s.type) ? s.type : [s.type];
  // Anthropic's transform keeps a keyword of one type only on a node of exactly that type.
  const is = (type: string) => (openai ? declared.includes(type) : s.type === type);
  const literal =
    (Array.isArray(s.enum) && s.enum.length > 0 && s.enum.every(isPrimitive)) ||
    (s.const !== undefined && isPrimitive(s.const));
  for (const [key, value] of Object.entries(s)) {
    switch (key) {
      case "type": // Anthropic's transform drops the type of an enum or const
        if (openai || !literal) out.type = value;
        break;
      case "$ref":
        out[key] = value;
        break;
      case "description":
      case "title":
        if (typeof value === "string") out[key] = value;
        break;
      case "enum":
        if (Array.isArray(value) && value.length > 0 && value.every(isPrimitive)) out.enum = value;
        else unsupported(key, value, "an enum of non-primitive values");
        break;
      case "const":
        if (isPrimitive(value)) out.const = value;
        else unsupported(key, value, "a non-primitive const");
        break;
      case "format": {
        const formats = ctx.profile === "anthropic" ? ANTHROPIC_FORMATS : FORMATS;
        if (typeof value === "string" && formats.has(value) && is("string")) out.format = value;
        else moved[key] = value;
        break;
      }
      case "minItems": // Anthropic accepts only 0 and 1
        if (is("array") && (value === 0 || value === 1 || (openai && isCount(value))))
          out.minItems = value;
        else moved[key] = value;
        break;
      case "maxItems":
        if (openai && is("array") && isCount(value)) out.maxItems = value;
        else moved[key] = value;
        break;
      case "pattern":
        if (openai && is("string") && typeof value === "string") out.pattern = value;
        else moved[key] = value;
        break;
      case "anyOf":
        if (Array.isArray(value))
          out.anyOf = value.map((branch, i) => strict(branch, `${path}/anyOf/${i}`, ctx, depth));
        else unsupported(key, value, "a non-array anyOf");
        break;
      case "$defs":
      case "definitions":
        if (isSchema(value))
          out[key] = Object.fromEntries(
            Object.entries(value).map(([name, def]) => [
              name,
              strict(def, `/${key}/${name}`, ctx, 0),
            ]),
          );
        break;
      case "allOf": // left over only when a branch could not be resolved
        unsupported(key, value, "an allOf that cannot be merged into one object");
        break;
      case "properties":
      case "required":
      case "additionalProperties":
      case "items":
        break; // shaped below, by type
      default:
        if (openai && NUMERIC.has(key) && (is("number") || is("integer")) && isNumber(value))
          out[key] = value;
        else if (SHAPING.has(key))
          unsupported(key, value, `${key}, which strict mode cannot express`);
        else if (!SILENT.has(key)) moved[key] = value;
    }
  }

  const types = Array.isArray(out.type) ? out.type : [out.type];
  if (types.includes("object")) {
    const properties = isSchema(s.properties) ? s.properties : {};
    const required = new Set(Array.isArray(s.required) ? s.required : []);
    const extra = s.additionalProperties;
    if (extra !== undefined && extra !== false)
      unsupported("additionalProperties", extra, "an object with free-form keys");
    else if (extra === undefined && Object.keys(properties).length === 0 && !isRoot)
      ctx.problems.push(`${path || "/"}: an object with no declared properties (free-form keys)`);
    if (depth >= MAX_DEPTH)
      ctx.problems.push(`${path || "/"}: objects nest deeper than ${MAX_DEPTH} levels`);
    out.properties = Object.fromEntries(
      Object.entries(properties).map(([name, property]) => {
        const exported = strict(property, `${path}/properties/${name}`, ctx, depth + 1);
        return [name, required.has(name) ? exported : nullable(exported, ctx.profile)];
      }),
    );
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  if (types.includes("array")) {
    if (isSchema(s.items)) out.items = strict(s.items, `${path}/items`, ctx, depth + 1);
    else
      ctx.problems.push(
        `${path || "/"}: an array needs one items schema (tuples and untyped arrays cannot be strict)`,
      );
  }
  if (
    out.type === undefined &&
    out.enum === undefined &&
    out.const === undefined &&
    out.anyOf === undefined &&
    out.$ref === undefined
  ) {
    ctx.problems.push(`${path || "/"}: a value with no type`);
  }
  if (Object.keys(moved).length > 0) {
    const text = movedInWords(moved);
    out.description = typeof out.description === "string" ? `${out.description}\n\n${text}` : text;
  }
  return out;

  function unsupported(key: string, value: unknown, what: string) {
    ctx.problems.push(`${path || "/"}: ${what}`);
    moved[key] = value;
  }
}

/** Strict mode has no optional properties: an optional one becomes "this, or null". */
function nullable(schema: Schema, profile: SchemaProfile): Schema {
  if (acceptsNull(schema, {})) return schema;
  if (schema.$ref !== undefined || schema.const !== undefined) return { anyOf: [schema, NULL] };
  // Anthropic's transform keeps `format` only on `type: "string"`, not on ["string", "null"].
  if (profile !== "openai" && schema.format !== undefined) return { anyOf: [schema, NULL] };
  if (Array.isArray(schema.anyOf)) return { ...schema, anyOf: [...schema.anyOf, NULL] };
  // Objects and arrays as a union, never a type array: the Anthropic SDK's strict transform drops
  // `properties` and `items` from a schema whose type is an array of names.
  const structured = ["object", "array"];
  if (
    structured.includes(schema.type as string) ||
    (Array.isArray(schema.type) && schema.type.some((t) => structured.includes(t)))
  )
    return { anyOf: [schema, NULL] };
  const out: Schema = { ...schema };
  if (Array.isArray(schema.enum)) out.enum = [...schema.enum, null];
  if (typeof schema.type === "string") out.type = [schema.type, "null"];
  else if (Array.isArray(schema.type)) out.type = [...schema.type, "null"];
  else if (!Array.isArray(schema.enum)) return { anyOf: [schema, NULL] };
  return out;
}

/** Definitions that reach themselves through $refs. */
function recursiveDefinitions(root: Schema): string[] {
  const refsOf = (node: unknown, into: Set<string>): Set<string> => {
    if (Array.isArray(node)) node.forEach((item) => refsOf(item, into));
    else if (isSchema(node)) {
      for (const [key, value] of Object.entries(node)) {
        if (key === "$ref" && typeof value === "string") into.add(value);
        else refsOf(value, into);
      }
    }
    return into;
  };
  if (refsOf({ ...root, $defs: undefined, definitions: undefined }, new Set()).has("#"))
    return ["the root schema"];
  const found: string[] = [];
  for (const key of ["$defs", "definitions"]) {
    if (!isSchema(root[key])) continue;
    for (const name of Object.keys(root[key])) {
      const self = `#/${key}/${name}`;
      const seen = new Set<string>();
      const queue = [...refsOf(resolveRef(root, self), new Set())];
      while (queue.length > 0) {
        const ref = queue.pop()!;
        if (ref === self || ref === "#") {
          found.push(self);
          break;
        }
        if (seen.has(ref)) continue;
        seen.add(ref);
        queue.push(...refsOf(resolveRef(root, ref), new Set()));
      }
    }
  }
  return found;
}

const isCount = (value: unknown) => Number.isInteger(value) && (value as number) >= 0;
const isNumber = (value: unknown) => typeof value === "number" && Number.isFinite(value);

function isPrimitive(value: unknown): boolean {
  return value === null || typeof value !== "object";
}
