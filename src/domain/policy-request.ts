// What a Cedar policy decision is asked about and with (issue 21), as plain data: the tenant's stored
// set and the request one call makes. The core freezes the request in a plan and carries the set in
// the tenant facts; only policies/evaluate.ts asks Cedar, so domain/ imports nothing from policies/.

/**
 * The stored set: its text and version (a hash of the text), as the tenant holds it. `invalid`: why
 * it no longer validates against the tenant's tools (a tool change forced with ?force=1): every
 * call is refused until the set is PUT again. Absent: it validated against the tools of the moment.
 */
export type PolicySet = { version: string; text: string; invalid?: string };
/** What a call looks like to Cedar, frozen with the operation (so a retry asks about the same call). */
export type PolicyRequest = {
  tool: string;
  user: { id: string; scopes: string[]; attributes: Record<string, string> };
  target: string;
  arguments: Record<string, string | number | boolean>;
  runId: string;
  run: Record<string, string>;
  /** Number arguments with a fraction: Cedar's Long cannot hold them, so the call is denied (fail closed). */
  fractional?: string[];
};
