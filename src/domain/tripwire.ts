// Tripwires (issue 34 item 2): what an operator PUTs to stop a spike by itself — its wire shape,
// checked once (strict), what one call claims of it (the claims of limits across runs: the same
// counter object, keyed `tripwire:<id>` + subject), the freeze a trip makes (a deterministic id per
// trip of one counter) and the failure-rate rule. A trip stops exactly what the tripwire counts:
// new calls it covers, for the subject it tripped on — its freeze is the operator's handle (listed,
// lifted, chained, announced); the counter is the check. Pure: the clock is an argument.
import { z } from "zod";
import { claimsFor, describeSubject } from "./limit/claims.ts";
import { parseWindow, type LimitClaim } from "./limit/window.ts";
import { isoUtc } from "./envelope.ts";
import { FreezeMode, type Freeze } from "./freeze.ts";
import { err, ok, type Result } from "./result.ts";

/** `count`, `failure_rate`, or `sum(<field>)`: the sum of one numeric argument. */
const Measure = z.string().regex(/^(count|failure_rate|sum\([a-zA-Z_][a-zA-Z0-9_]{0,63}\))$/, {
  message: 'measure is "count", "failure_rate" or "sum(<argument>)", e.g. "sum(amount)"',
});

/** The freeze a trip makes: how it stops calls and why (its scope is the tripwire's subject). */
export const FreezeTemplate = z
  .object({ mode: FreezeMode, reason: z.string().min(1).max(500) })
  .strict();

/** PUT /v1/tripwires/{id}: strict, so a misspelt field is refused rather than ignored. */
export const TripwireBody = z
  .object({
    measure: Measure,
    /** The tool it counts; absent: every write of the tenant. */
    tool: z.string().min(1).max(200).optional(),
    /** Per whom it counts: "user", "tenant" (default) or "context.<field>" (a bound field). */
    subject: z
      .string()
      .regex(/^(user|tenant|context\.[a-zA-Z0-9_]{1,64})$/, {
        message: 'subject is "user", "tenant" or "context.<field>"',
      })
      .optional(),
    /** "1m", "24h": a rolling window (1 s … 31 d). */
    window: z.string().refine((text) => parseWindow(text) !== null, {
      message: 'a window such as "60s", "1m", "24h" (1 second to 31 days)',
    }),
    /** Trips when the measure would go above it (failure_rate: a share in (0, 1)). */
    threshold: z.number().finite().nonnegative(),
    /** failure_rate only: recorded calls in the window before a share can trip it (default 10). */
    min_calls: z.number().int().min(1).max(100_000).optional(),
    then: FreezeTemplate,
  })
  .strict()
  .superRefine((body, ctx) => {
    const rate = body.measure === "failure_rate";
    if (rate && !(body.threshold > 0 && body.threshold < 1))
      ctx.addIssue({
        code: "custom",
        path: ["threshold"],
        message: "a failure_rate threshold is a share between 0 and 1 (exclusive)",
      });
    if (!rate && body.min_calls !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["min_calls"],
        message: "min_calls applies to measure failure_rate only",
      });
  });
export type TripwireBody = z.infer<typeof TripwireBody>;

export type TripMeasure =
  { kind: "count" } | { kind: "sum"; field: string } | { kind: "failure_rate" };

/** A tripwire as stored and as it travels in the tenant facts. */
export type Tripwire = {
  id: string;
  measure: TripMeasure;
  tool: string | null;
  subject: string;
  window: string;
  windowMs: number;
  threshold: number;
  minCalls: number;
  then: z.infer<typeof FreezeTemplate>;
  created_at_ms: number;
  created_by: string;
};

/** failure_rate's default minimum: one failure of one call, or of a few, never trips it. */
export const DEFAULT_MIN_CALLS = 10;

export function tripwireOf(id: string, body: TripwireBody, by: string, nowMs: number): Tripwire {
  const sum = /^sum\((.+)\)$/.exec(body.measure);
  const measure: TripMeasure = sum
    ? { kind: "sum", field: sum[1]! }
    : body.measure === "failure_rate"
      ? { kind: "failure_rate" }
      : { kind: "count" };
  return {
    id,
    measure,
    tool: body.tool ?? null,
    subject: body.subject ?? "tenant",
    window: body.window,
    windowMs: parseWindow(body.window)!,
    threshold: body.threshold,
    minCalls: measure.kind === "failure_rate" ? (body.min_calls ?? DEFAULT_MIN_CALLS) : 0,
    then: body.then,
    created_at_ms: nowMs,
    created_by: by,
  };
}

/** What a counter is told of its tripwire with each claim: how to trip and what freeze to make. */
export type TripSpec = {
  tripwireId: string;
  measure: TripMeasure["kind"];
  threshold: number;
  minCalls: number;
  tool: string | null;
  then: Tripwire["then"];
};

/** A claim on a tripwire's counter: a limit claim (same engine) that trips instead of refusing. */
export type TripClaim = LimitClaim & { trip: TripSpec };
export const TRIPWIRE_PREFIX = "tripwire:";

/**
 * What one call claims of the tenant's tripwires: those covering its tool (or every write, for a
 * tripwire without one). Only writes count (reads are never frozen by a trip). A subject the run
 * does not define, or a summed field that is not a number of 0 or more, refuses (fail closed, the
 * words of limits across runs).
 */
export function tripClaimsFor(
  tripwires: readonly Tripwire[],
  call: {
    tool: string;
    write: boolean;
    input: Record<string, unknown>;
    context: Record<string, unknown>;
    userId: string;
  },
): Result<TripClaim[], { code: "policy_denied"; message: string }> {
  if (!call.write) return ok([]);
  const out: TripClaim[] = [];
  for (const wire of tripwires) {
    if (wire.tool !== null && wire.tool !== call.tool) continue;
    const limit = {
      name: `${TRIPWIRE_PREFIX}${wire.id}`,
      subject: wire.subject,
      window: wire.window,
      windowMs: wire.windowMs,
      measure: wire.measure.kind === "sum" ? wire.measure : { kind: "count" as const },
      // A failure_rate counter counts calls; its trip is decided at outcomes (tripsOnRate).
      max: wire.measure.kind === "failure_rate" ? Number.MAX_SAFE_INTEGER : wire.threshold,
      over: "approve" as const,
    };
    const claims = claimsFor([limit], call.input, call.context, call.userId);
    if (!claims.ok) return claims;
    const trip: TripSpec = {
      tripwireId: wire.id,
      measure: wire.measure.kind,
      threshold: wire.threshold,
      minCalls: wire.minCalls,
      tool: wire.tool,
      then: wire.then,
    };
    out.push({ ...claims.value[0]!, trip });
  }
  return ok(out);
}

export const isTripClaim = (claim: LimitClaim): claim is TripClaim =>
  "trip" in claim && claim.name.startsWith(TRIPWIRE_PREFIX);

/**
 * The freeze one trip makes: id `tw.<tripwire>.<n>.<subject hash>` — the same for every retry of
 * the same trip (n: this counter's trip number), a new one for a trip after a lift. Its scope names
 * the tripwire and subject: no freeze scope says "this tool for this customer", so the counter
 * enforces it (domain/freeze.ts `covers` matches no call by such a scope) and the freeze is how
 * people see and lift it.
 */
export function tripFreezeOf(
  spec: TripSpec,
  subject: string,
  subjectHash: string,
  n: number,
  nowMs: number,
): Freeze {
  return {
    id: `tw.${spec.tripwireId}.${n}.${subjectHash.slice(0, 12)}`.slice(0, 100),
    scope: {
      tripwire: spec.tripwireId,
      subject,
      ...(spec.tool !== null ? { tool: spec.tool } : {}),
    },
    writes_only: true,
    mode: spec.then.mode,
    reason: `${spec.then.reason} (tripwire ${spec.tripwireId}, ${describeSubject(subject)})`,
    expires_at_ms: null,
    created_at_ms: nowMs,
    created_by: `tripwire:${spec.tripwireId}`,
  };
}

/** One recorded outcome a failure_rate counter keeps. */
export type RateOutcome = { failed: boolean; atMs: number };

/**
 * failure_rate: trips when, among the outcomes recorded in the window (since the last lift), there
 * are at least `minCalls` and the share that failed is above the threshold. Asked at each outcome.
 */
export function tripsOnRate(
  outcomes: readonly RateOutcome[],
  spec: Pick<TripSpec, "threshold" | "minCalls">,
  windowMs: number,
  sinceMs: number,
  nowMs: number,
): { trips: boolean; calls: number; failed: number } {
  const live = outcomes.filter((o) => o.atMs > nowMs - windowMs && o.atMs >= sinceMs);
  const failed = live.filter((o) => o.failed).length;
  const calls = live.length;
  return { trips: calls >= spec.minCalls && failed / calls > spec.threshold, calls, failed };
}

/** How a tripwire shows in GET /v1/tripwires. */
export const tripwireView = (wire: Tripwire) => ({
  id: wire.id,
  measure: wire.measure.kind === "sum" ? `sum(${wire.measure.field})` : wire.measure.kind,
  tool: wire.tool,
  subject: wire.subject,
  window: wire.window,
  threshold: wire.threshold,
  ...(wire.measure.kind === "failure_rate" ? { min_calls: wire.minCalls } : {}),
  then: wire.then,
  created_at: isoUtc(wire.created_at_ms),
  created_by: wire.created_by,
});

export type TripwireError = { code: "not_found"; detail: string };
export const noTripwire = (id: string): Result<never, TripwireError> =>
  err({ code: "not_found", detail: `no tripwire ${id}` });
