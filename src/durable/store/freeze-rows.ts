// The codecs of a freeze, a tripwire and a trip as stored (issue 34; issue 32 item 4: schemas at the
// storage boundary, never a cast): the tenant's `freezes`, `tripwires` and `tenant_chain` rows and a
// tripwire counter's `trip_state` (limit/trip.ts). A row that does not decode is corrupt storage: a
// thrown error naming the row (codec.ts). Each reader says what that means for its calls; all of
// them fail closed — a corrupt freeze or tripwire stops the calls that read it, never lets one by.
import { z } from "zod";
import { FreezeMode, FreezeScope, type Freeze } from "../../domain/freeze.ts";
import type { TraceEvent } from "../../domain/operation/index.ts";
import { FreezeTemplate, type TripSpec, type Tripwire } from "../../domain/tripwire.ts";
import { decodeWith, parseJson } from "./codec.ts";

/** The scope of a freeze a tripwire made (domain/freeze.ts TripwireScope): never PUT, only stored. */
const TripwireScopeCodec = z
  .object({ tripwire: z.string(), subject: z.string(), tool: z.string().optional() })
  .strict();
const FreezeCodec = z.object({
  id: z.string(),
  scope: z.union([FreezeScope, TripwireScopeCodec]),
  writes_only: z.boolean(),
  mode: FreezeMode,
  reason: z.string(),
  expires_at_ms: z.number().nullable(),
  created_at_ms: z.number(),
  created_by: z.string(),
}) satisfies z.ZodType<Freeze>;

/** A `freezes` row's freeze, or a trip's freeze in `trip_state`. */
export const decodeFreeze = (text: string, what = "freeze"): Freeze =>
  decodeWith(FreezeCodec, parseJson(text, what), what);

const MeasureKind = z.enum(["count", "sum", "failure_rate"]);
const TripwireCodec = z.object({
  id: z.string(),
  measure: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("count") }),
    z.object({ kind: z.literal("sum"), field: z.string() }),
    z.object({ kind: z.literal("failure_rate") }),
  ]),
  tool: z.string().nullable(),
  subject: z.string(),
  window: z.string(),
  windowMs: z.number().positive(),
  threshold: z.number(),
  minCalls: z.number(),
  then: FreezeTemplate,
  created_at_ms: z.number(),
  created_by: z.string(),
}) satisfies z.ZodType<Tripwire>;

/** A `tripwires` row. */
export const decodeTripwire = (text: string): Tripwire =>
  decodeWith(TripwireCodec, parseJson(text, "tripwire"), "tripwire");

const TripSpecCodec = z.object({
  tripwireId: z.string(),
  measure: MeasureKind,
  threshold: z.number(),
  minCalls: z.number(),
  tool: z.string().nullable(),
  then: FreezeTemplate,
}) satisfies z.ZodType<TripSpec>;

/** A tripwire counter's `trip_state.spec`: the last definition it was reserved with. */
export const decodeTripSpec = (text: string): TripSpec =>
  decodeWith(TripSpecCodec, parseJson(text, "trip_state spec"), "trip_state spec");

/**
 * A `tenant_chain` row's entry: its frame is checked (a trace event's tag and time); its seal is
 * what `verifyChain` checks, so an entry whose hash was changed or dropped still decodes and is
 * reported by the chain check rather than hidden by a throw.
 */
const ChainEntryCodec = z.custom<TraceEvent>(
  (value) =>
    z
      .looseObject({ type: z.string(), at_ms: z.number(), hash: z.string().optional() })
      .safeParse(value).success,
);
export const decodeChainEntry = (text: string): TraceEvent =>
  decodeWith(ChainEntryCodec, parseJson(text, "tenant_chain"), "tenant_chain");
