// Constraints a provider's strict mode cannot carry, in words for the model's description. The
// export removes the keyword from the schema (so the provider accepts it as it is) and states it
// here instead; toolgate still enforces the original schema on every call, so a call that breaks
// one is refused with the reason, never sent upstream. Pure.

/** Annotations that describe a value rather than constrain it. */
const NOTES = new Set(["default", "examples"]);

/** One keyword as a phrase: "at least 1", "matches the pattern `^ord_`". */
export function constraintInWords(key: string, value: unknown): string {
  const json = JSON.stringify(value);
  const n = typeof value === "number" ? String(value) : json;
  switch (key) {
    case "pattern":
      return typeof value === "string" ? `matches the pattern \`${value}\`` : `pattern ${json}`;
    case "format":
      return typeof value === "string" ? `in ${value} format` : `format ${json}`;
    case "minimum":
      return `at least ${n}`;
    case "maximum":
      return `at most ${n}`;
    case "exclusiveMinimum":
      return `greater than ${n}`;
    case "exclusiveMaximum":
      return `less than ${n}`;
    case "multipleOf":
      return `a multiple of ${n}`;
    case "minLength":
      return `at least ${n} character${value === 1 ? "" : "s"}`;
    case "maxLength":
      return `at most ${n} character${value === 1 ? "" : "s"}`;
    case "minItems":
      return `at least ${n} item${value === 1 ? "" : "s"}`;
    case "maxItems":
      return `at most ${n} item${value === 1 ? "" : "s"}`;
    case "uniqueItems":
      return value === true ? "no duplicate items" : `uniqueItems ${json}`;
    case "minProperties":
      return `at least ${n} key${value === 1 ? "" : "s"}`;
    case "maxProperties":
      return `at most ${n} key${value === 1 ? "" : "s"}`;
    default:
      return `${key} ${json}`;
  }
}

/**
 * The sentence(s) appended to a description for the keywords moved out of a schema node:
 * "Constraints: at least 1; at most 100. Default: 5."
 */
export function movedInWords(moved: Record<string, unknown>): string {
  const entries = Object.entries(moved);
  const rules = entries.filter(([key]) => !NOTES.has(key));
  const parts: string[] = [];
  if (rules.length > 0)
    parts.push(`Constraints: ${rules.map(([k, v]) => constraintInWords(k, v)).join("; ")}.`);
  if ("default" in moved) parts.push(`Default: ${JSON.stringify(moved.default)}.`);
  if ("examples" in moved) parts.push(`Examples: ${examples(moved.examples)}.`);
  return parts.join(" ");
}

const examples = (value: unknown) =>
  Array.isArray(value) ? value.map((v) => JSON.stringify(v)).join(", ") : JSON.stringify(value);
