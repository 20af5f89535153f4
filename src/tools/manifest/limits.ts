// `limits_across_runs` (manifest) and `limitsAcrossRuns` (defineTool) → the ToolSpec's limits
// across runs: one shape for both, checked against the tool's input schema when it is stored (a
// summed field the schema does not declare as a number, both or neither of sum/count, a window
// out of range or a name used twice is refused as `invalid_manifest`, never ignored).
import { z } from "zod";
import type { AcrossRunsLimit } from "../../domain/limit/claims.ts";
import { describeInvalid } from "../../domain/invalid-input.ts";
import { parseWindow } from "../../domain/limit/window.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { Manifest } from "./schema.ts";

export type AcrossRunsInput = z.input<typeof Manifest>["limits_across_runs"];
const AcrossRuns = Manifest.shape.limits_across_runs;

/** `raw` as given (a defineTool's, or a stored manifest's): checked here in full, never trusted. */
export function compileAcrossRuns(
  raw: unknown,
  inputJsonSchema: Record<string, unknown>,
): Result<AcrossRunsLimit[], { code: "invalid_manifest"; detail: string }> {
  const parsed = AcrossRuns.safeParse(raw, { reportInput: true });
  if (!parsed.success)
    return err({
      code: "invalid_manifest",
      detail: `limits_across_runs: ${describeInvalid(parsed.error)}`,
    });
  const properties = (inputJsonSchema.properties ?? {}) as Record<string, { type?: unknown }>;
  const seen = new Set<string>();
  const limits: AcrossRunsLimit[] = [];
  for (const [i, limit] of parsed.data.entries()) {
    const at = `limits_across_runs[${i}] (${limit.name})`;
    if (seen.has(limit.name)) return bad(`${at}: the name is used twice`);
    seen.add(limit.name);
    // A run's spend budget (issue 37): only a payment is counted per run (a run's calls have max_cost).
    if (limit.subject === "run" && !limit.payment)
      return bad(`${at}: subject "run" counts x402 payments only ("payment": true)`);
    const windowMs = parseWindow(limit.window);
    if (windowMs === null) return bad(`${at}: window must be between 1s and 31d`);
    if ([limit.sum, limit.count, limit.payment].filter((m) => m !== undefined).length !== 1)
      return bad(
        `${at}: give exactly one of "sum": "<numeric argument>", "count": true or "payment": true`,
      );
    if (limit.sum !== undefined) {
      const type = properties[limit.sum]?.type;
      if (type !== "number" && type !== "integer")
        return bad(
          `${at}: sum ${JSON.stringify(limit.sum)} is not a number or integer property of input_schema`,
        );
    } else if (!Number.isInteger(limit.max))
      return bad(`${at}: a count's or a payment's max is a whole number`);
    limits.push({
      name: limit.name,
      subject: limit.subject,
      window: limit.window,
      windowMs,
      measure:
        limit.sum !== undefined
          ? { kind: "sum", field: limit.sum }
          : limit.payment
            ? { kind: "payment" }
            : { kind: "count" },
      max: limit.max,
      over: limit.over,
    });
  }
  return ok(limits);
}

const bad = (detail: string) => err({ code: "invalid_manifest" as const, detail });
