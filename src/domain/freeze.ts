// Freezes (issue 34): what an operator PUTs to stop sends now — its wire shape, checked once, and
// the ONE decision whether a call is frozen (`frozenBy`), asked wherever the Cedar policy is asked:
// at an operation's start (from the run's tenant facts) and before every later send (the tenant's
// freezes of the moment). An expired freeze never applies; `writes_only` lets reads through; when
// several apply, `refuse` wins over `hold` (fail closed), then the oldest. Pure: the clock is an argument.
import { z } from "zod";
import { isoUtc } from "./envelope.ts";
import { err, ok, type Result } from "./result.ts";

/** An origin as a URL's `origin` reads it: scheme, host, port if not the default; nothing else. */
const Origin = z
  .string()
  .max(2048)
  .refine((text) => URL.canParse(text) && new URL(text).origin === text, {
    message: 'an origin such as "https://api.example.com" (scheme, host and port only)',
  });

/** What a freeze covers: the whole tenant, one tool, one upstream origin, one user or one run. */
export const FreezeScope = z.union([
  z.object({ tenant: z.literal(true) }).strict(),
  z.object({ tool: z.string().min(1).max(200) }).strict(),
  z.object({ origin: Origin }).strict(),
  z.object({ user: z.string().min(1).max(256) }).strict(),
  z.object({ run: z.string().min(1).max(200) }).strict(),
]);
export type FreezeScope = z.infer<typeof FreezeScope>;
/**
 * The scope of a freeze a tripwire made (domain/tripwire.ts): its tripwire, the subject it tripped
 * on and its tool. Never accepted in a PUT; it covers no call here — the tripwire's counter answers
 * "tripped" to every call it counts for that subject until the freeze is lifted.
 */
export type TripwireScope = { tripwire: string; subject: string; tool?: string };

export const FreezeMode = z.enum(["hold", "refuse"]);
export type FreezeMode = z.infer<typeof FreezeMode>;

/** PUT /v1/freezes/{id}: strict, so a misspelt field is refused rather than ignored. */
export const FreezeBody = z
  .object({
    scope: FreezeScope,
    /** Only writes are frozen; reads (risk "read") still run. Default false: everything. */
    writes_only: z.boolean().optional(),
    mode: FreezeMode,
    reason: z.string().min(1).max(500),
    /** When it lifts by itself (ISO 8601); must be in the future. Absent: until DELETE. */
    expires_at: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();
export type FreezeBody = z.infer<typeof FreezeBody>;

/** A freeze as stored and as it travels in the tenant facts. */
export type Freeze = {
  id: string;
  scope: FreezeScope | TripwireScope;
  writes_only: boolean;
  mode: FreezeMode;
  reason: string;
  expires_at_ms: number | null;
  created_at_ms: number;
  created_by: string;
};

/** What a freeze is asked about: one call, as its operation knows it. */
export type FreezeCall = {
  tool: string;
  /** The origin its request goes to (null: none can be built, or a shadow run's fixed result). */
  origin: string | null;
  user: string;
  run: string;
  write: boolean;
};

export type FreezeError = { code: "freeze_expired"; detail: string };

/** The stored freeze for a checked body; an `expires_at` not in the future is refused. */
export function freezeOf(
  id: string,
  body: FreezeBody,
  by: string,
  nowMs: number,
): Result<Freeze, FreezeError> {
  const expiresAtMs = body.expires_at === undefined ? null : Date.parse(body.expires_at);
  if (expiresAtMs !== null && expiresAtMs <= nowMs)
    return err({
      code: "freeze_expired",
      detail: `expires_at ${body.expires_at} is not in the future: such a freeze would never apply`,
    });
  return ok({
    id,
    scope: body.scope,
    writes_only: body.writes_only ?? false,
    mode: body.mode,
    reason: body.reason,
    expires_at_ms: expiresAtMs,
    created_at_ms: nowMs,
    created_by: by,
  });
}

export const isLive = (freeze: Freeze, nowMs: number): boolean =>
  freeze.expires_at_ms === null || freeze.expires_at_ms > nowMs;

function covers(scope: Freeze["scope"], call: FreezeCall): boolean {
  if ("tripwire" in scope) return false;
  if ("tenant" in scope) return true;
  if ("tool" in scope) return scope.tool === call.tool;
  if ("origin" in scope) return scope.origin === call.origin;
  if ("user" in scope) return scope.user === call.user;
  return scope.run === call.run;
}

/** The freeze that stops this call now, or null. The one function every send point asks. */
export function frozenBy(
  freezes: readonly Freeze[],
  call: FreezeCall,
  nowMs: number,
): Freeze | null {
  let found: Freeze | null = null;
  for (const freeze of freezes) {
    if (!isLive(freeze, nowMs) || (freeze.writes_only && !call.write)) continue;
    if (!covers(freeze.scope, call)) continue;
    if (
      found === null ||
      (freeze.mode === "refuse" && found.mode === "hold") ||
      (freeze.mode === found.mode && freeze.created_at_ms < found.created_at_ms)
    )
      found = freeze;
  }
  return found;
}

/** What a `refuse` freeze records on a call not yet sent (a denial like any other: nothing sent). */
export const frozenDenial = (freeze: Pick<Freeze, "id" | "reason">) => ({
  status: "rejected" as const,
  code: "frozen",
  message: `An operator froze these calls (freeze ${freeze.id}: ${freeze.reason}), so this one was not sent. Do not retry; tell the user.`,
});

/** The earliest expiry among live freezes (the tenant's alarm lifts it then), or null. */
export function nextExpiryMs(freezes: readonly Freeze[], nowMs: number): number | null {
  let next: number | null = null;
  for (const { expires_at_ms: at } of freezes)
    if (at !== null && at > nowMs && (next === null || at < next)) next = at;
  return next;
}

/** How a freeze shows in the public answers (GET /v1/freezes, the events). */
export const freezeView = (freeze: Freeze) => ({
  id: freeze.id,
  scope: freeze.scope,
  writes_only: freeze.writes_only,
  mode: freeze.mode,
  reason: freeze.reason,
  expires_at: freeze.expires_at_ms === null ? null : isoUtc(freeze.expires_at_ms),
  created_at: isoUtc(freeze.created_at_ms),
  created_by: freeze.created_by,
});
export type FreezeView = ReturnType<typeof freezeView>;
