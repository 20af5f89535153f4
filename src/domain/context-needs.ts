// What a run's context must hold for a tool: the fields its `bind`, its `limits` thresholds and its
// `limits_across_runs` subjects read, each judged by the test the gate applies to it (gate.ts: a
// bound value is present; turn/policy.ts `thresholdOf`: a number; limit/claims.ts `contextSubject`: a
// non-empty string or a number). A run lacking one is told at creation and at PATCH
// (`context_missing`, one per field per tool) and every call needing it is refused; a PUT is told
// which fields runs must carry (`context_required`: it cannot know the runs, so it warns). Pure.
import type { ToolSpec } from "../tools/spec.ts";
import { contextSubject } from "./limit/claims.ts";
import { thresholdOf } from "./turn/policy.ts";

/** `context.<field>`: the one form a manifest names a context field in. */
export const CONTEXT_FIELD = /^context\.([a-zA-Z0-9_]+)$/;

export type NeededBy = "bind" | "limits" | "limits_across_runs";
export type ContextNeed = { field: string; needed_by: NeededBy[] };
/** A run's context lacks (or holds in an unusable form) a field an offered tool reads. */
export type ContextMissing = {
  tool: string;
  code: "context_missing";
  field: string;
  needed_by: NeededBy[];
  detail: string;
};
/** PUT /v1/tools/{name}: the context fields every run offering the tool must carry. */
export type ContextRequired = {
  code: "context_required";
  fields: ContextNeed[];
  /** Fields the version this PUT replaced did not read (all of them for a new tool). */
  added: string[];
  detail: string;
};

type ContextReader = Pick<ToolSpec, "name" | "bind" | "limits" | "limitsAcrossRuns">;
type Use = {
  field: string;
  by: NeededBy;
  /** The setting that reads it, for people: "bind customer_id", "limits amount.max". */
  as: string;
  /** What the gate accepts there. */
  wants: string;
  usable: (context: Record<string, unknown>) => boolean;
};

function uses(spec: ContextReader): Use[] {
  const found: Use[] = [];
  for (const [argument, source] of Object.entries(spec.bind)) {
    const field = CONTEXT_FIELD.exec(source)?.[1];
    if (field)
      found.push({
        field,
        by: "bind",
        as: `bind ${argument}`,
        wants: "a value",
        usable: (context) => context[field] !== undefined,
      });
  }
  for (const [argument, limit] of Object.entries(spec.limits))
    for (const bound of ["max", "min"] as const) {
      const raw = limit[bound];
      const field = typeof raw === "string" ? CONTEXT_FIELD.exec(raw)?.[1] : undefined;
      if (field)
        found.push({
          field,
          by: "limits",
          as: `limits ${argument}.${bound}`,
          wants: "a number",
          usable: (context) => thresholdOf(raw!, context) !== null,
        });
    }
  for (const limit of spec.limitsAcrossRuns) {
    const field = CONTEXT_FIELD.exec(limit.subject)?.[1];
    if (field)
      found.push({
        field,
        by: "limits_across_runs",
        as: `limits_across_runs ${limit.name}`,
        wants: "a non-empty string or a number",
        usable: (context) => contextSubject(context[field]) !== null,
      });
  }
  return found;
}

/** Uses grouped by field, in the order the manifest first names each. */
function byField(found: readonly Use[]): Map<string, Use[]> {
  const grouped = new Map<string, Use[]>();
  for (const use of found) grouped.set(use.field, [...(grouped.get(use.field) ?? []), use]);
  return grouped;
}
const kinds = (found: readonly Use[]) => [...new Set(found.map((use) => use.by))];

export function contextNeeds(spec: ContextReader): ContextNeed[] {
  return [...byField(uses(spec))].map(([field, found]) => ({ field, needed_by: kinds(found) }));
}

/** The warnings of a run (creation, PATCH, its tool export): one per unusable field per tool. */
export function missingContext(
  offered: readonly ContextReader[],
  context: Record<string, unknown>,
): ContextMissing[] {
  return offered.flatMap((spec) =>
    [...byField(uses(spec).filter((use) => !use.usable(context)))].map(([field, found]) => {
      const how =
        context[field] === undefined
          ? "this run has none"
          : `this run's is not ${found.map((use) => use.wants).join(" and ")}`;
      return {
        tool: spec.name,
        code: "context_missing" as const,
        field,
        needed_by: kinds(found),
        detail: `${spec.name} reads context.${field} (${found.map((use) => use.as).join(", ")}) and ${how}: every call of ${spec.name} in this run is refused. Create the run with context.${field}.`,
      };
    }),
  );
}

/** The PUT answer's warning, or null when the tool reads nothing from a run's context. */
export function contextRequired(
  spec: ContextReader,
  previous: { spec: ContextReader; version: number } | null,
): ContextRequired | null {
  const fields = contextNeeds(spec);
  if (fields.length === 0) return null;
  const before = new Set(previous ? contextNeeds(previous.spec).map((need) => need.field) : []);
  const added = fields.map((need) => need.field).filter((field) => !before.has(field));
  const names = (list: string[]) => list.map((field) => `context.${field}`).join(", ");
  const news =
    previous && added.length > 0
      ? ` ${names(added)} ${added.length === 1 ? "is" : "are"} new since version ${previous.version}: runs created as before lack ${added.length === 1 ? "it" : "them"}.`
      : "";
  return {
    code: "context_required",
    fields,
    added,
    detail: `Runs that offer ${spec.name} must carry ${names(fields.map((need) => need.field))}; a run created without one is warned (context_missing) and every call of ${spec.name} in it is refused.${news}`,
  };
}
