// Data residency (DESIGN "Global placement and data residency"). A tenant created with a
// jurisdiction has every object holding its data created in that jurisdiction. Nothing on a call's
// path looks the jurisdiction up: every id names it. The tenant id carries it (`ten_eu_…`), and
// every id made from it carries the same tag: runs (`run_eu_…`), operations (`op_eu_…`), and the
// names of per-tenant objects, which begin with the tenant id (locks, retry budgets, and any
// object added later). Ids without a tag are the ones made before jurisdictions existed and those
// of tenants without one: they keep working, in the namespace they always used. Pure.

/** The jurisdictions a tenant may be created in (Cloudflare's `DurableObjectNamespace.jurisdiction`). */
export const JURISDICTIONS = ["eu", "fedramp"] as const;
export type Jurisdiction = (typeof JURISDICTIONS)[number];

export const isJurisdiction = (value: unknown): value is Jurisdiction =>
  (JURISDICTIONS as readonly unknown[]).includes(value);

/** The optional tag inside an id, as a regular-expression fragment (for the routes' id patterns). */
export const JURISDICTION_TAG = `(?:(?:${JURISDICTIONS.join("|")})_)?`;

/**
 * The jurisdiction an id or object name was made in: a tenant, run or operation id, or a name that
 * begins with a tenant id (`<tenant>:<resource>` for locks, `<tenant>:<origin>` for retry budgets).
 * Null: no jurisdiction (the default namespace).
 */
export function jurisdictionOf(name: string): Jurisdiction | null {
  // On every stub of every call: prefix checks, no regular expression (a few ns, not ~200).
  const at = name.startsWith("op_")
    ? 3
    : name.startsWith("run_") || name.startsWith("ten_")
      ? 4
      : -1;
  if (at < 0) return null;
  for (const jurisdiction of JURISDICTIONS)
    if (name.startsWith(jurisdiction, at) && name.charCodeAt(at + jurisdiction.length) === 95)
      return jurisdiction; // 95: "_"
  return null;
}

/** `prefix` + the jurisdiction's tag: `idPrefix("run", "eu")` → `run_eu_`; without one → `run_`. */
export const idPrefix = (kind: "ten" | "run" | "op", jurisdiction: Jurisdiction | null): string =>
  jurisdiction === null ? `${kind}_` : `${kind}_${jurisdiction}_`;

/** The id patterns the edge accepts (the tag is optional: untagged ids are the default namespace). */
export const TENANT_ID = new RegExp(`^ten_${JURISDICTION_TAG}[0-9A-Z]{26}$`);
export const RUN_ID = new RegExp(`^run_${JURISDICTION_TAG}[0-9A-HJKMNP-TV-Z]{26}$`);
export const OPERATION_ID = new RegExp(`^op_${JURISDICTION_TAG}[0-9a-f]{32}$`);
