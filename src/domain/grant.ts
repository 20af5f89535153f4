// Standing grants (issue 35 item 1): a person's pre-approval of a class of calls within bounds —
// its wire shape (strict), which calls it covers, and what a covered call claims of it: the claims
// of limits across runs (the same counter object, keyed `grant:<id>`, one for the sum of the
// bounded argument and `grant:<id>:count` for the count), so a call is reserved against it once by
// operation id. A call a grant does not cover (another tool or subject, over per_call_max, the
// field not a number, expired) claims nothing: it asks a person — a grant never refuses. Pure.
import { z } from "zod";
import { contextSubject } from "./limit/claims.ts";
import { MAX_WINDOW_MS, type LimitClaim } from "./limit/window.ts";
import { isoUtc } from "./envelope.ts";
import { err, type Result } from "./result.ts";
import type { GrantEventData } from "./journal/events.ts";

/** A grant's id: `gr_` and a ulid, made by the route. */
export const GRANT_ID = /^gr_[0-9A-HJKMNP-TV-Z]{26}$/;
export const GRANT_PREFIX = "grant:";
/** The longest a grant may stand (its counter's window spans its whole life). */
export const MAX_GRANT_MS = MAX_WINDOW_MS;

const ContextKey = z.string().regex(/^context\.[a-zA-Z0-9_]{1,64}$/, {
  message: 'a subject names one bound context field: { "context.<field>": "<value>" }',
});

/** POST /v1/grants: strict, so a misspelt field is refused rather than ignored. */
export const GrantBody = z
  .object({
    /** The tools it pre-approves (offered by name in the run). */
    tools: z.array(z.string().min(1).max(200)).min(1).max(50),
    /** Whose calls: one bound context field's value, or "any" (every subject). */
    subject: z.union([
      z.literal("any"),
      z.record(ContextKey, z.string().min(1).max(200)).refine((s) => Object.keys(s).length === 1, {
        message:
          'a subject names exactly one context field, e.g. { "context.customer_id": "cus_42" }',
      }),
    ]),
    /** The numeric argument per_call_max and total_max bound (e.g. "amount"). */
    field: z
      .string()
      .regex(/^[a-zA-Z_][a-zA-Z0-9_]{0,63}$/)
      .optional(),
    per_call_max: z.number().finite().nonnegative().optional(),
    total_max: z.number().finite().nonnegative().optional(),
    /** How many calls it covers in all. */
    count: z.number().int().min(1).max(1_000_000).optional(),
    /** An RFC 3339 time in the future, at most 31 days ahead. */
    expires_at: z.iso.datetime({ offset: true }),
    reason: z.string().min(1).max(500),
  })
  .strict()
  .superRefine((body, ctx) => {
    const bounded = body.per_call_max !== undefined || body.total_max !== undefined;
    if (bounded && body.field === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["field"],
        message: "per_call_max and total_max bound a numeric argument: name it in field",
      });
    if (!bounded && body.field !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["field"],
        message: "field is bounded by per_call_max or total_max: give one of them",
      });
    if (body.total_max === undefined && body.count === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["total_max"],
        message: "a grant is bounded in all: give total_max, count, or both",
      });
  });
export type GrantBody = z.infer<typeof GrantBody>;

/** A grant as stored and as it travels in the tenant facts. */
export type Grant = {
  id: string;
  tools: string[];
  /** null: any subject. */
  subject: { field: string; value: string } | null;
  field: string | null;
  perCallMax: number | null;
  totalMax: number | null;
  count: number | null;
  expiresAtMs: number;
  reason: string;
  createdAtMs: number;
  createdBy: string;
  createdVia: string;
  revokedAtMs: number | null;
  revokedBy: string | null;
  /**
   * Made under the tenant's four eyes (`grant_four_eyes`): proposed, it covers nothing until a
   * second, different person confirms it (`confirmedBy`). Absent in grants stored before it: false.
   */
  fourEyes: boolean;
  confirmedBy: string | null;
  confirmedAtMs: number | null;
};

export type GrantError = { code: "invalid_request"; detail: string };
/** Why a confirm changed nothing (problem.ts: 404, 403, 409). */
export type GrantConfirmError =
  | { code: "not_found"; detail: string }
  | { code: "self_approval"; detail: string }
  | { code: "grant_not_proposed"; detail: string };

/** The body made a grant: its expiry must be ahead, and within MAX_GRANT_MS. */
export function grantOf(
  id: string,
  body: GrantBody,
  by: { id: string; via: string },
  nowMs: number,
): Result<Grant, GrantError> {
  const expiresAtMs = Date.parse(body.expires_at);
  if (!(expiresAtMs > nowMs) || expiresAtMs - nowMs > MAX_GRANT_MS)
    return err({
      code: "invalid_request",
      detail: `expires_at must be in the future and at most 31 days ahead (got ${body.expires_at}); nothing was stored`,
    });
  const entry = body.subject === "any" ? null : Object.entries(body.subject)[0]!;
  return {
    ok: true,
    value: {
      id,
      tools: [...new Set(body.tools)],
      subject: entry ? { field: entry[0].slice("context.".length), value: entry[1] } : null,
      field: body.field ?? null,
      perCallMax: body.per_call_max ?? null,
      totalMax: body.total_max ?? null,
      count: body.count ?? null,
      expiresAtMs,
      reason: body.reason,
      createdAtMs: nowMs,
      createdBy: by.id,
      createdVia: by.via,
      revokedAtMs: null,
      revokedBy: null,
      // Set by the tenant as it stores it, from its setting of the moment (tenant/grants.ts).
      fourEyes: false,
      confirmedBy: null,
      confirmedAtMs: null,
    },
  };
}

/** Proposed under four eyes and not yet confirmed: it covers nothing. */
export const isProposed = (grant: Grant): boolean =>
  grant.fourEyes === true && grant.confirmedAtMs === null;

/**
 * A second person confirms a proposed grant (four eyes): never the person who made it (the same
 * identity approvals compare: the verified Access identity, else the key's or session's name).
 */
export function confirmGrant(
  grant: Grant,
  by: string,
  nowMs: number,
): Result<Grant, GrantConfirmError> {
  const state = grantState(grant, nowMs);
  if (state !== "proposed")
    return err({
      code: "grant_not_proposed",
      detail: `grant ${grant.id} is ${state}, not proposed: there is nothing to confirm; nothing was changed`,
    });
  if (by === grant.createdBy)
    return err({
      code: "self_approval",
      detail: `${by} proposed grant ${grant.id} and cannot confirm it (four eyes); another person must; nothing was changed`,
    });
  return { ok: true, value: { ...grant, confirmedBy: by, confirmedAtMs: nowMs } };
}

/** Whether a grant may cover calls now: not revoked, not expired. */
export const isLive = (grant: Grant, nowMs: number): boolean =>
  grant.revokedAtMs === null && nowMs < grant.expiresAtMs && !isProposed(grant);

/** What a grant is now, as the API and the console show it. */
export function grantState(
  grant: Grant,
  nowMs: number,
): "revoked" | "expired" | "proposed" | "live" {
  if (grant.revokedAtMs !== null) return "revoked";
  if (nowMs >= grant.expiresAtMs) return "expired";
  return isProposed(grant) ? "proposed" : "live";
}

/** The counter names of a grant: the sum of its field, and its count. */
export const grantCounters = (id: string) => ({
  sum: `${GRANT_PREFIX}${id}`,
  count: `${GRANT_PREFIX}${id}:count`,
});
/** A grant's counters have one subject: the grant is the bucket. */
export const GRANT_SUBJECT = "tenant";

/** What a covered call claims of one grant (every counter it has), and the amount it uses. */
export type GrantUse = { grantId: string; amount: number | null; claims: LimitClaim[] };

/**
 * The live grants that cover this call, in the order they are tried (the soonest to expire
 * first, so a short grant is used before a standing one), each with its claims: `over: "refuse"`,
 * so a reserve past total_max or count is refused and the call asks a person instead.
 */
export function grantUsesFor(
  grants: readonly Grant[],
  call: { tool: string; input: Record<string, unknown>; context: Record<string, unknown> },
  nowMs: number,
): GrantUse[] {
  const out: GrantUse[] = [];
  const sorted = [...grants].sort((a, b) => a.expiresAtMs - b.expiresAtMs || cmp(a.id, b.id));
  for (const grant of sorted) {
    if (!isLive(grant, nowMs) || !grant.tools.includes(call.tool)) continue;
    if (grant.subject && contextSubject(call.context[grant.subject.field]) !== grant.subject.value)
      continue;
    let amount: number | null = null;
    if (grant.field !== null) {
      const value = call.input[grant.field];
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) continue;
      if (grant.perCallMax !== null && value > grant.perCallMax) continue;
      amount = value;
    }
    // Its counters count for its whole life: a reservation leaves one window after its call was
    // recorded, after the grant's end.
    const windowMs = Math.max(1, grant.expiresAtMs - grant.createdAtMs);
    const names = grantCounters(grant.id);
    const claims: LimitClaim[] = [];
    if (grant.totalMax !== null && amount !== null) {
      if (amount > grant.totalMax) continue;
      claims.push({
        name: names.sum,
        subject: GRANT_SUBJECT,
        amount,
        max: grant.totalMax,
        windowMs,
        over: "refuse",
      });
    }
    if (grant.count !== null)
      claims.push({
        name: names.count,
        subject: GRANT_SUBJECT,
        amount: 1,
        max: grant.count,
        windowMs,
        over: "refuse",
      });
    out.push({ grantId: grant.id, amount, claims });
  }
  return out;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Why a call that relied on a grant may not be sent under it now (null: it still may). */
export function grantLapse(
  grants: readonly Grant[] | null,
  grantId: string,
  nowMs: number,
): string | null {
  const grant = grants?.find((g) => g.id === grantId);
  // A grant missing from the live ones (revoked, or never confirmed) covers nothing.
  if (!grant || grant.revokedAtMs !== null || isProposed(grant))
    return `grant ${grantId} was revoked`;
  if (nowMs >= grant.expiresAtMs) return `grant ${grantId} expired`;
  return null;
}

/** One use of a grant, as its counter holds it. */
export type GrantUseView = {
  operation_id: string;
  amount: number | null;
  at: string;
  state: "held" | "released";
};

/** How a grant shows in the API and the console. */
export const grantView = (grant: Grant, nowMs: number) => ({
  id: grant.id,
  tools: grant.tools,
  subject: grant.subject
    ? { [`context.${grant.subject.field}`]: grant.subject.value }
    : ("any" as const),
  field: grant.field,
  per_call_max: grant.perCallMax,
  total_max: grant.totalMax,
  count: grant.count,
  expires_at: isoUtc(grant.expiresAtMs),
  reason: grant.reason,
  created_at: isoUtc(grant.createdAtMs),
  created_by: grant.createdBy,
  created_via: grant.createdVia,
  revoked_at: grant.revokedAtMs === null ? null : isoUtc(grant.revokedAtMs),
  revoked_by: grant.revokedBy,
  four_eyes: grant.fourEyes === true,
  confirmed_by: grant.confirmedBy ?? null,
  confirmed_at: grant.confirmedAtMs == null ? null : isoUtc(grant.confirmedAtMs),
  state: grantState(grant, nowMs),
});
export type GrantView = ReturnType<typeof grantView>;

/** What a grant covers and how far, as its chain entry and its events both state it. */
export const grantBounds = (view: GrantView) => ({
  tools: view.tools,
  subject: view.subject,
  field: view.field,
  per_call_max: view.per_call_max,
  total_max: view.total_max,
  count: view.count,
});

/** The uses the tenant has been told of (each chained once per grant and operation). */
export type GrantUsed = { calls: number; sum: number };

/**
 * Whether the uses told so far fill the grant: its count reached, or its total (nothing left to
 * cover). A call recorded with nothing applied gives its share back at the counter later, so this
 * is as far as the told uses say — what `grant.exhausted` reports, once, when a use crosses it.
 */
export function usedUp(grant: Grant, used: GrantUsed): boolean {
  return (
    (grant.count !== null && used.calls >= grant.count) ||
    (grant.totalMax !== null && used.sum >= grant.totalMax)
  );
}

/** A grant event's data (events.ts `GrantEventData`): its bounds and state now, and who did this step. */
export function grantEventData(
  grant: Grant,
  nowMs: number,
  by: string | null,
  extra: { use?: { operation_id: string; amount: number | null }; used?: GrantUsed } = {},
): GrantEventData {
  const view = grantView(grant, nowMs);
  return {
    grant_id: grant.id,
    ...grantBounds(view),
    expires_at: view.expires_at,
    reason: grant.reason,
    state: view.state,
    by,
    ...extra,
  };
}
