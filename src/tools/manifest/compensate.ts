// A manifest's `compensate` (undo, issue 22) → the spec's Compensation, checked in two halves.
// `compileCompensate` (pure, at compile): writes only, never itself, every `{input.x}` path in the
// tool's input schema and every `{result.x}` path in its output schema when one is declared.
// `checkCompensationTarget` (at PUT, against the compensating tool as registered — it must be
// registered first — and again, on the rendered arguments, at compensation time by the gate):
// a write, every argument a property of its input schema (never one it binds from the run's
// context), every required property covered, every literal valid for its property.
import { z } from "zod";
import {
  looksLikeTemplate,
  schemaAt,
  templateRef,
  type Compensation,
} from "../../domain/compensation.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ToolSpec } from "../spec.ts";
import type { Manifest } from "./schema.ts";

type Invalid = { code: "invalid_compensation"; detail: string };
const invalid = (detail: string) =>
  err<Invalid>({ code: "invalid_compensation", detail: `compensate: ${detail}` });

export function compileCompensate(m: Manifest): Result<Compensation | null, Invalid> {
  const declared = m.compensate;
  if (declared === undefined) return ok(null);
  if (m.risk === "read") return invalid("a read changes nothing, so there is nothing to undo");
  if (declared.tool === m.name) return invalid("a tool cannot compensate itself");
  for (const [name, value] of Object.entries(declared.arguments)) {
    if (looksLikeTemplate(value))
      return invalid(
        `arguments.${name}: ${JSON.stringify(value)} is not a template; templates are exactly {input.<path>} or {result.<path>}`,
      );
    const ref = templateRef(value);
    if (!ref) continue;
    const schema = ref.from === "input" ? m.input_schema : m.output_schema;
    if (ref.from === "result" && schema === undefined) continue; // no output schema: checked when rendered
    if (schemaAt(schema, ref.path) === null)
      return invalid(
        `arguments.${name}: ${String(value)} names a field the ${ref.from === "input" ? "input" : "output"} schema does not declare`,
      );
  }
  return ok({ tool: declared.tool, arguments: declared.arguments, approval: declared.approval });
}

/** The declaration against the compensating tool as it stands (registered before this one). */
export function checkCompensationTarget(
  compensation: Compensation,
  target: ToolSpec,
): Result<true, Invalid> {
  if (target.risk === "read")
    return invalid(`${target.name} is a read; a compensation is a write (refund, cancel, delete)`);
  const schema = target.inputJsonSchema as {
    properties?: Record<string, unknown>;
    required?: string[];
  };
  const properties = schema.properties ?? {};
  for (const [name, value] of Object.entries(compensation.arguments)) {
    if (Object.hasOwn(target.bind, name))
      return invalid(
        `arguments.${name}: ${target.name} binds ${name} from the run's context (${target.bind[name]}); leave it out`,
      );
    if (!Object.hasOwn(properties, name))
      return invalid(`arguments.${name}: ${target.name}'s input schema has no property ${name}`);
    if (templateRef(value)) continue;
    let property: z.ZodType;
    try {
      property = z.fromJSONSchema(properties[name] as never);
    } catch {
      continue; // the tool compiled, so its whole schema is enforced when the arguments are rendered
    }
    const checked = property.safeParse(value);
    if (!checked.success)
      return invalid(
        `arguments.${name}: the literal ${JSON.stringify(value)} does not match ${target.name}'s schema (${checked.error.issues.map((i) => i.message).join("; ")})`,
      );
  }
  const missing = (schema.required ?? []).filter(
    (name) => !Object.hasOwn(compensation.arguments, name) && !Object.hasOwn(target.bind, name),
  );
  if (missing.length > 0)
    return invalid(`${target.name} requires ${missing.join(", ")}; give each an argument`);
  return ok(true);
}
