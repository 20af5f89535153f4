// Quota definitions (issue 34 item 4): per (tenant, upstream origin) or per (user, tool) a token
// bucket (`rate`: at most `limit` sends begun in any `window_ms`, `burst` at once) and/or a
// concurrency cap. One definition per key per tenant: a second id whose numbers differ is refused
// (like limits across runs, limit/definition.ts); the same numbers again are harmless. What a call
// is subject to (`quotasFor`) is frozen into its plan from the run's tenant facts. Pure.
import { z } from "zod";

const ORIGIN = /^https?:\/\/[^/?#\s]+$/;

/** The numbers of a quota, as a PUT and a manifest's `quota` name them. */
const NUMBERS = {
  /** At most `limit` first attempts begun in any `window_ms` (a sliding window). */
  rate: z
    .strictObject({
      limit: z.number().int().min(1).max(1000),
      window_ms: z.number().int().min(100).max(86_400_000),
    })
    .optional(),
  /** At most this many at once (default: `rate.limit`); spaced evenly over the window. */
  burst: z.number().int().min(1).max(1000).optional(),
  /** At most this many first attempts in flight at the upstream at once. */
  concurrency: z.number().int().min(1).max(1000).optional(),
};
type Numbers = {
  rate?: { limit: number; window_ms: number } | undefined;
  burst?: number | undefined;
  concurrency?: number | undefined;
};
const checked = <T extends z.ZodType<Numbers>>(schema: T) =>
  schema
    .refine((q) => q.rate !== undefined || q.concurrency !== undefined, {
      message: "a quota needs rate and/or concurrency",
    })
    .refine((q) => q.burst === undefined || (q.rate !== undefined && q.burst <= q.rate.limit), {
      message: "burst needs rate, and may not exceed rate.limit",
      path: ["burst"],
    });

/** A tool manifest's `quota`: per (user, this tool), as `{ scope: { tool } }` would be. */
export const QuotaNumbers = checked(z.strictObject(NUMBERS));
export type QuotaNumbers = z.output<typeof QuotaNumbers>;

export const QuotaDefinition = checked(
  z.strictObject({
    /** `origin`: every call of the tenant to that upstream origin; `tool`: each user's calls of that tool. */
    scope: z.union([
      z.strictObject({
        origin: z
          .string()
          .max(300)
          .regex(ORIGIN, "an origin: scheme://host[:port], no path")
          .transform((value) => new URL(value).origin),
      }),
      z.strictObject({ tool: z.string().regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/) }),
    ]),
    ...NUMBERS,
  }),
);
export type QuotaDefinition = z.output<typeof QuotaDefinition>;
export type StoredQuota = { id: string; definition: QuotaDefinition };

export const QUOTA_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

/** The key one definition is unique under: `origin:<origin>` or `tool:<name>`. */
export const quotaKeyOf = (q: QuotaDefinition): string =>
  "origin" in q.scope ? `origin:${q.scope.origin}` : `tool:${q.scope.tool}`;

const numbers = (q: QuotaDefinition) =>
  JSON.stringify([q.rate?.limit, q.rate?.window_ms, q.burst, q.concurrency]);

/** A manifest's quota as the definition it stands for (its id: `manifest:<tool>`). */
export const manifestQuota = (tool: string, numbers: QuotaNumbers): StoredQuota => ({
  id: `manifest:${tool}`,
  definition: { scope: { tool }, ...numbers },
});

/** Another id defining the same key otherwise (null: none). */
export function quotaConflict(
  id: string,
  definition: QuotaDefinition,
  stored: readonly StoredQuota[],
): { id: string; detail: string } | null {
  const key = quotaKeyOf(definition);
  const other = stored.find(
    (q) =>
      q.id !== id &&
      quotaKeyOf(q.definition) === key &&
      numbers(q.definition) !== numbers(definition),
  );
  if (!other) return null;
  return {
    id: other.id,
    detail: `the quota ${other.id} already defines ${key} with other numbers; a key has one definition per tenant — change or delete ${other.id} instead`,
  };
}

/** One quota a call is subject to, as its plan freezes it: the object it asks and the numbers. */
export type QuotaClaim = {
  /** The quota's id (null: no quota, only an origin pause to respect). */
  id: string | null;
  /** The RetryBudgetObject name (tenant-tagged): `${tenant}:${origin}` or `${tenant}:quota:user:…`. */
  object: string;
  rate?: { limit: number; windowMs: number; burst: number };
  concurrency?: number;
};

/** The quotas a call to `tool` at `origin` by `userId` is subject to (origin first, then the tool's). */
export function quotasFor(args: {
  tenantId: string;
  quotas: readonly StoredQuota[];
  pausedOrigins: Readonly<Record<string, number>>;
  origin: string | null;
  tool: string;
  /** The tool's manifest `quota` (per user), or null. */
  toolQuota: QuotaNumbers | null;
  userId: string;
  nowMs: number;
}): QuotaClaim[] {
  const { tenantId, origin, tool, userId } = args;
  // A manifest quota and a PUT one for the same tool agree (both refused otherwise): ask it once.
  const own = args.toolQuota ? manifestQuota(tool, args.toolQuota) : null;
  const quotas =
    own && !args.quotas.some((q) => quotaKeyOf(q.definition) === quotaKeyOf(own.definition))
      ? [...args.quotas, own]
      : args.quotas;
  const claims: QuotaClaim[] = [];
  const originObject = origin ? `${tenantId}:${origin}` : null;
  for (const { id, definition: q } of quotas) {
    const numbers = {
      ...(q.rate
        ? {
            rate: {
              limit: q.rate.limit,
              windowMs: q.rate.window_ms,
              burst: q.burst ?? q.rate.limit,
            },
          }
        : {}),
      ...(q.concurrency ? { concurrency: q.concurrency } : {}),
    };
    if ("origin" in q.scope && originObject && q.scope.origin === origin)
      claims.push({ id, object: originObject, ...numbers });
    if ("tool" in q.scope && q.scope.tool === tool)
      claims.push({
        id,
        object: `${tenantId}:quota:user:${encodeURIComponent(userId)}:tool:${tool}`,
        ...numbers,
      });
  }
  // An origin paused by the upstream (429/503, RateLimit) with no quota of its own: ask it anyway.
  const paused = origin ? (args.pausedOrigins[origin] ?? 0) : 0;
  if (originObject && paused > args.nowMs && !claims.some((c) => c.object === originObject))
    claims.unshift({ id: null, object: originObject });
  return claims;
}
