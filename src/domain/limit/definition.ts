// One definition per limit name per tenant (audit N4): every tool that names a limit across runs
// counts into the same buckets, so it must count the same thing the same way — the same subject
// kind, window, measure (a count, or the sum of the same argument) and max. A tool whose limit
// contradicts another tool's under the same name is refused when it is stored (its own earlier
// version does not count: the only tool using a name may change it). What a tool does over the
// limit (`over`: refuse, or ask a person) is its own. Pure: limits in, the first contradiction out.
import type { AcrossRunsLimit } from "./claims.ts";

/** The fields of a limit's definition, as the manifest names them. */
export type DefinitionField = "subject" | "window" | "measure" | "max";
export type LimitConflict = {
  /** The limit's name, and the other tool that defines it already. */
  limit: string;
  tool: string;
  fields: DefinitionField[];
  detail: string;
};
export type RegisteredLimits = { tool: string; limits: readonly AcrossRunsLimit[] };

const measureOf = (limit: AcrossRunsLimit) =>
  limit.measure.kind === "sum" ? `sum of "${limit.measure.field}"` : "count";

/** The fields where two definitions of one name differ, each with both values in words. */
function differences(mine: AcrossRunsLimit, theirs: AcrossRunsLimit): Map<DefinitionField, string> {
  const out = new Map<DefinitionField, string>();
  if (mine.subject !== theirs.subject)
    out.set("subject", `subject ${mine.subject} here, ${theirs.subject} there`);
  if (mine.windowMs !== theirs.windowMs)
    out.set("window", `window ${mine.window} here, ${theirs.window} there`);
  if (measureOf(mine) !== measureOf(theirs))
    out.set("measure", `${measureOf(mine)} here, ${measureOf(theirs)} there`);
  if (mine.max !== theirs.max) out.set("max", `max ${mine.max} here, ${theirs.max} there`);
  return out;
}

/** The first of `tool`'s limits that another registered tool defines otherwise (null: none). */
export function limitConflict(
  tool: string,
  limits: readonly AcrossRunsLimit[],
  registered: readonly RegisteredLimits[],
): LimitConflict | null {
  for (const mine of limits)
    for (const other of registered) {
      if (other.tool === tool) continue;
      const theirs = other.limits.find((limit) => limit.name === mine.name);
      if (!theirs) continue;
      const diff = differences(mine, theirs);
      if (diff.size === 0) continue;
      return {
        limit: mine.name,
        tool: other.tool,
        fields: [...diff.keys()],
        detail: `limits_across_runs: ${mine.name} is already defined by the tool ${other.tool} (${[...diff.values()].join("; ")}); a limit name has one definition per tenant — use the same subject, window, sum or count and max, or another name (to change the definition, first remove it from ${other.tool})`,
      };
    }
  return null;
}
