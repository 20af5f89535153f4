// The one input schema a tool has, for the gate and for the export alike. `closeSchema` turns a
// registered JSON Schema into the schema toolgate enforces: every object that does not explicitly
// allow more keys is closed (JSON Schema's default "anything else goes" would let a model add
// `refund_to_account` to an upstream body it was shown closed), and allOf-of-objects is folded
// into one object first (closing each branch would make the intersection unsatisfiable).
// `normalizeArguments` reads a model's arguments against that schema: an undeclared key is refused
// by name, and — when the export offered the tool in strict mode, where optional properties become
// "this or null" — a null for such a property reads as absent. Pure.
import { err, ok, type Result } from "./result.ts";

export type Schema = Record<string, unknown>;

export function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Local refs only (`#/$defs/X`, `#/definitions/X`, any JSON pointer into the root). */
export function resolveRef(root: Schema, ref: string): Schema | null {
  if (!ref.startsWith("#")) return null;
  let node: unknown = root;
  for (const token of ref.slice(1).split("/").slice(1)) {
    if (!isSchema(node)) return null;
    node = node[token.replaceAll("~1", "/").replaceAll("~0", "~")];
  }
  return isSchema(node) ? node : null;
}

/** Two schemas as one: later keywords win, except properties (united) and required (united). */
export function merge(a: Schema, b: Schema): Schema {
  const out: Schema = { ...a, ...b };
  if (isSchema(a.properties) || isSchema(b.properties))
    out.properties = {
      ...(isSchema(a.properties) ? a.properties : {}),
      ...(isSchema(b.properties) ? b.properties : {}),
    };
  if (Array.isArray(a.required) || Array.isArray(b.required))
    out.required = [
      ...new Set([
        ...(Array.isArray(a.required) ? a.required : []),
        ...(Array.isArray(b.required) ? b.required : []),
      ]),
    ];
  return out;
}

export function acceptsNull(schema: Schema, root: Schema, seen = new Set<string>()): boolean {
  if (schema.type === "null" || (Array.isArray(schema.type) && schema.type.includes("null")))
    return true;
  if (schema.const === null || (Array.isArray(schema.enum) && schema.enum.includes(null)))
    return true;
  const branches = [
    ...(Array.isArray(schema.anyOf) ? schema.anyOf : []),
    ...(Array.isArray(schema.oneOf) ? schema.oneOf : []),
  ];
  if (branches.some((branch) => isSchema(branch) && acceptsNull(branch, root, seen))) return true;
  if (typeof schema.$ref === "string" && !seen.has(schema.$ref)) {
    const target = resolveRef(root, schema.$ref);
    return target !== null && acceptsNull(target, root, seen.add(schema.$ref));
  }
  return false;
}

const isObjectSchema = (s: Schema) =>
  s.type === "object" ||
  (Array.isArray(s.type) && s.type.includes("object")) ||
  isSchema(s.properties);

/** The schema toolgate enforces and exports (see the header). */
export function closeSchema(schema: Schema, root: Schema = schema): Schema {
  let s = schema;
  if (Array.isArray(s.allOf)) {
    const { allOf, ...rest } = s;
    const branches = allOf.map((branch) =>
      isSchema(branch) && typeof branch.$ref === "string" ? resolveRef(root, branch.$ref) : branch,
    );
    if (branches.every((branch) => isSchema(branch) && isObjectSchema(branch)))
      s = [...(branches as Schema[]), rest].reduce<Schema>((acc, branch) => merge(acc, branch), {});
  }
  // A union beside the object's own properties: closing either side would refuse the other's
  // keys (JSON Schema's additionalProperties does not compose), so both stay open here and
  // normalizeArguments checks the keys against the merged view.
  const union = Array.isArray(s.anyOf) || Array.isArray(s.oneOf);
  const ownProperties = isSchema(s.properties) && Object.keys(s.properties).length > 0;
  const out: Schema = {};
  for (const [key, value] of Object.entries(s)) {
    switch (key) {
      case "properties":
      case "$defs":
      case "definitions":
        out[key] = isSchema(value)
          ? Object.fromEntries(
              Object.entries(value).map(([name, sub]) => [
                name,
                isSchema(sub) ? closeSchema(sub, root) : sub,
              ]),
            )
          : value;
        break;
      case "items":
      case "additionalProperties":
        out[key] = isSchema(value) ? closeSchema(value, root) : value;
        break;
      case "anyOf":
      case "oneOf":
        out[key] =
          Array.isArray(value) && !ownProperties
            ? value.map((sub) => (isSchema(sub) ? closeSchema(sub, root) : sub))
            : value;
        break;
      default:
        out[key] = value;
    }
  }
  if (
    isObjectSchema(out) &&
    !union &&
    out.additionalProperties === undefined &&
    out.patternProperties === undefined
  )
    out.additionalProperties = false;
  return out;
}

export type ArgumentProblem = { path: string; message: string };

/** Undeclared keys refused by name; with `dropNulls`, a null for an optional, non-nullable property is dropped. */
export function normalizeArguments(
  schema: Schema,
  value: unknown,
  dropNulls: boolean,
): Result<unknown, ArgumentProblem> {
  return walk(schema, value, "", schema, dropNulls, 0);
}

function walk(
  schema: Schema,
  value: unknown,
  path: string,
  root: Schema,
  dropNulls: boolean,
  depth: number,
): Result<unknown, ArgumentProblem> {
  if (depth > 64) return ok(value);
  const s = typeof schema.$ref === "string" ? (resolveRef(root, schema.$ref) ?? schema) : schema;
  if (Array.isArray(value)) {
    if (!isSchema(s.items)) return ok(value);
    const items: unknown[] = [];
    for (const [index, item] of value.entries()) {
      const walked = walk(s.items, item, `${path}/${index}`, root, dropNulls, depth + 1);
      if (!walked.ok) return walked;
      items.push(walked.value);
    }
    return ok(items);
  }
  if (!isSchema(value)) return ok(value);
  const branches = [
    ...(Array.isArray(s.anyOf) ? s.anyOf : []),
    ...(Array.isArray(s.oneOf) ? s.oneOf : []),
  ].filter(isSchema);
  if (branches.length > 0) {
    // A union: read the object against the first object branch (with the node's own properties)
    // that declares every key it holds.
    const { anyOf: _a, oneOf: _o, ...own } = s;
    const objects = branches
      .map((branch) =>
        typeof branch.$ref === "string" ? (resolveRef(root, branch.$ref) ?? branch) : branch,
      )
      .filter(isObjectSchema);
    let first: Result<unknown, ArgumentProblem> | null = null;
    for (const branch of objects) {
      const walked = walk(merge(own, branch), value, path, root, dropNulls, depth + 1);
      if (walked.ok) return walked;
      first ??= walked;
    }
    if (first) return first;
  }
  if (!isObjectSchema(s)) return ok(value);
  const properties = isSchema(s.properties) ? s.properties : {};
  const required = new Set(Array.isArray(s.required) ? s.required : []);
  const extraAllowed =
    (s.additionalProperties !== undefined && s.additionalProperties !== false) ||
    s.patternProperties !== undefined;
  const out: Schema = {};
  for (const [name, item] of Object.entries(value)) {
    const property = properties[name];
    if (!isSchema(property)) {
      if (!extraAllowed && !Object.hasOwn(properties, name))
        return err({
          path: `${path}/${name}`,
          message: `${pointerText(`${path}/${name}`)} is not a parameter of this tool`,
        });
      out[name] = item;
    } else if (item === null && dropNulls && !required.has(name) && !acceptsNull(property, root)) {
      continue;
    } else {
      const walked = walk(property, item, `${path}/${name}`, root, dropNulls, depth + 1);
      if (!walked.ok) return walked;
      out[name] = walked.value;
    }
  }
  return ok(out);
}

/** `/address/zip` → `address.zip`, the form the gate's messages use. */
const pointerText = (pointer: string) => pointer.slice(1).split("/").join(".");

/** Keywords whose subschemas apply to the same instance: a `$ref` cycle through only these never ends. */
const SAME_INSTANCE = ["allOf", "anyOf", "oneOf", "not", "if", "then", "else"] as const;

/**
 * Why this schema's `$ref`s cannot be evaluated, or null: a ref that does not resolve inside the
 * schema (remote refs are never fetched), or a cycle of refs that never descends into a property
 * or an item (`{ "$ref": "#/$defs/a" }` where a is `{ "$ref": "#/$defs/a" }`): a validator
 * following it recurses forever on any input. Recursion through `properties`/`items` is fine — the
 * instance is finite (and bodies are at most 64 deep).
 */
export function refProblem(root: Schema): string | null {
  const refs: string[] = [];
  const collect = (node: unknown) => {
    if (Array.isArray(node)) return node.forEach(collect);
    if (!isSchema(node)) return;
    if (typeof node.$ref === "string") refs.push(node.$ref);
    Object.values(node).forEach(collect);
  };
  collect(root);
  for (const ref of refs) if (!resolveRef(root, ref)) return `the $ref ${ref} does not resolve`;
  /** The refs a schema evaluates at its own instance location. */
  const sameInstanceRefs = (schema: Schema): string[] => [
    ...(typeof schema.$ref === "string" ? [schema.$ref] : []),
    ...SAME_INSTANCE.flatMap((keyword) => {
      const value = schema[keyword];
      const branches = Array.isArray(value) ? value : [value];
      return branches.filter(isSchema).flatMap(sameInstanceRefs);
    }),
  ];
  const done = new Set<string>();
  const visit = (ref: string, path: string[]): string | null => {
    if (path.includes(ref)) return `the $ref cycle ${[...path, ref].join(" → ")} never ends`;
    if (done.has(ref)) return null;
    for (const next of sameInstanceRefs(resolveRef(root, ref)!)) {
      const found = visit(next, [...path, ref]);
      if (found) return found;
    }
    done.add(ref);
    return null;
  };
  for (const ref of new Set([...sameInstanceRefs(root), ...refs])) {
    const found = visit(ref, []);
    if (found) return found;
  }
  return null;
}
