// What a tool reads from a run's context, checked when it is stored (manifest PUT and defineTool):
// a `bind` fills a top-level property input_schema declares — also when the schema allows more
// keys, since a bind to an undeclared name would leave the declared field to the model — and a
// `limits` entry limits such a property, its max/min a number or `context.<field>`. Anything else
// is `invalid_manifest` naming it, never stored. What runs must then carry: domain/context-needs.ts.
import { CONTEXT_FIELD } from "../../domain/context-needs.ts";
import { isSchema } from "../../domain/json-schema.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Limit } from "../spec.ts";

export function checkContextUses(
  bind: Record<string, string>,
  limits: Record<string, Limit>,
  inputJsonSchema: Record<string, unknown>,
): Result<true, { code: "invalid_manifest"; detail: string }> {
  const properties = isSchema(inputJsonSchema.properties) ? inputJsonSchema.properties : {};
  const undeclared = (at: string, field: string) =>
    bad(
      `${at}: ${JSON.stringify(field)} is not a property of input_schema (it declares ${
        Object.keys(properties)
          .map((name) => JSON.stringify(name))
          .join(", ") || "none"
      }); declare it in input_schema.properties`,
    );
  for (const [field, source] of Object.entries(bind)) {
    if (!CONTEXT_FIELD.test(source))
      return bad(
        `bind.${field}: bind values look like context.<field>, not ${JSON.stringify(source)}`,
      );
    if (!Object.hasOwn(properties, field)) return undeclared(`bind.${field}`, field);
  }
  for (const [field, limit] of Object.entries(limits)) {
    if (!Object.hasOwn(properties, field)) return undeclared(`limits.${field}`, field);
    for (const bound of ["max", "min"] as const) {
      const raw = limit[bound];
      if (typeof raw === "string" && !CONTEXT_FIELD.test(raw))
        return bad(
          `limits.${field}.${bound}: a limit's max and min are a number or context.<field>, not ${JSON.stringify(raw)}`,
        );
    }
  }
  return ok(true);
}

const bad = (detail: string) => err({ code: "invalid_manifest" as const, detail });
