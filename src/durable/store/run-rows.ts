// A run is three tables: the run row, one usage row, and one row per turn; `decode*` below are
// their typed codecs (a row that does not decode is corrupt storage: a thrown error, never a guess).
// Beside them: turn groups, each tool source once by hash (a call row names its source by hash),
// and `turn_ops` (operation → the first turn holding it), built only when a run first needs it
// (toolgate_check_status), so runs that never check pay no row per call.
// `run_events` has no index on its unsent rows: a run holds at most one per turn and reads them
// once per instance, while a partial index cost a row written per event and another when it was sent
// (runs created before keep theirs; it reads the same).
import { z } from "zod";
import type { Usage } from "../../domain/turn/budget.ts";
import type { Envelope } from "../../domain/envelope.ts";
import type { StoredCounts } from "../../domain/run-limits.ts";
import type { RunState, TurnCall, TurnRecord } from "../../domain/turn/turn.ts";
import type { TurnGroup } from "../../domain/turn/admit.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import { LruCache } from "../../lru.ts";
import type { ToolSource } from "../../tools/spec.ts";
import { decodeWith, deepFreeze, parseJson } from "./codec.ts";

/** What a run has stored (run-limits.ts), kept in its usage row; added to older runs' rows on their next turn. */
export const USAGE_STORAGE_COLUMNS = [
  "stored_turns INTEGER NOT NULL DEFAULT 0",
  "stored_bytes INTEGER NOT NULL DEFAULT 0",
  "stopped_turns INTEGER NOT NULL DEFAULT 0",
  "checks INTEGER NOT NULL DEFAULT 0",
];
/**
 * The usage as it stands after a turn, in that turn's row (JSON: the usage row's counted columns and
 * `version`), so admitting a turn writes one row, not two. The usage row is written only by the
 * other changes (a refund), each with the next `version`: the usage is the usage row, or the turn
 * snapshot with a higher version (rows.ts usageRow). Both columns are added to older runs on their
 * next turn; their usage row (version 0) stands until then.
 */
export const TURN_USAGE_COLUMN = "usage TEXT";
export const USAGE_VERSION_COLUMN = "version INTEGER NOT NULL DEFAULT 0";
/** Calls posted under a turn key so far (an older group starts from 0). */
export const TURN_GROUP_CALLS_COLUMN = "calls INTEGER NOT NULL DEFAULT 0";
/** Run tables ensureSchema leaves out: created where first needed. */
export const RUN_LAZY_TABLES = [
  "turn_ops",
  "run_events",
  "tenant_facts",
  "compensations",
  "rollback",
  "rollback_steps",
  "rollback_approvals",
  "rollback_refusals",
];

export const RUN_SCHEMA = `
CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, data TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (k INTEGER PRIMARY KEY CHECK (k = 1), turns INTEGER NOT NULL, calls INTEGER NOT NULL, cost REAL NOT NULL, ${USAGE_STORAGE_COLUMNS.join(", ")}, ${USAGE_VERSION_COLUMN});
CREATE TABLE IF NOT EXISTS turns (
  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, content_hash TEXT NOT NULL, calls TEXT NOT NULL, admitted INTEGER NOT NULL,
  reserved_cost REAL NOT NULL, settled_cost REAL, model_cost REAL NOT NULL, created_at INTEGER NOT NULL, ${TURN_USAGE_COLUMN}) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_groups (key TEXT PRIMARY KEY, turn_stop TEXT, usage_hash TEXT, ${TURN_GROUP_CALLS_COLUMN}) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_sources (hash TEXT PRIMARY KEY, source TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_ops (operation_id TEXT PRIMARY KEY, turn_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_pruned (k INTEGER PRIMARY KEY CHECK (k = 1), run_id TEXT NOT NULL, tenant_id TEXT NOT NULL, pruned_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS run_request (k INTEGER PRIMARY KEY CHECK (k = 1), request_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_events (id TEXT PRIMARY KEY, payload TEXT NOT NULL, sent INTEGER NOT NULL, attempts INTEGER NOT NULL, next_at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_facts (k INTEGER PRIMARY KEY CHECK (k = 1), tools_hash TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS compensations (original_id TEXT PRIMARY KEY, compensation_id TEXT NOT NULL, tool TEXT NOT NULL, source TEXT NOT NULL, input TEXT NOT NULL, input_hash TEXT NOT NULL, idempotency_key TEXT NOT NULL, claims TEXT, approval TEXT NOT NULL, reason TEXT NOT NULL, asked_by TEXT NOT NULL, asked_at_ms INTEGER NOT NULL, state TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollback (k INTEGER PRIMARY KEY CHECK (k = 1), state TEXT NOT NULL, by TEXT NOT NULL, started_at_ms INTEGER NOT NULL, next_at_ms INTEGER);
CREATE TABLE IF NOT EXISTS rollback_steps (seq INTEGER PRIMARY KEY, operation_id TEXT NOT NULL, tool TEXT NOT NULL, compensation_id TEXT, state TEXT NOT NULL, detail TEXT);
CREATE TABLE IF NOT EXISTS rollback_approvals (seq INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rollback_refusals (approval_seq INTEGER NOT NULL, compensation_id TEXT NOT NULL, basis TEXT NOT NULL, code TEXT NOT NULL, PRIMARY KEY (approval_seq, compensation_id)) WITHOUT ROWID;`;

export const ToolSourceCodec: z.ZodType<ToolSource> = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("manifest"), manifest: z.unknown() }),
  z.object({ kind: z.literal("code"), name: z.string() }),
]);
export const EnvelopeCodec: z.ZodType<Envelope> = z.union([
  z.object({ status: z.literal("succeeded"), operation_id: z.string(), result: z.unknown() }),
  z.object({
    status: z.enum([
      "rejected",
      "failed",
      "budget_exhausted",
      "cancelled",
      "outcome_unknown",
      "awaiting_approval",
      "pending",
    ]),
    operation_id: z.string(),
    code: z.string(),
    message: z.string(),
    allowed_next_actions: z.array(z.string()),
    reason: z.string().optional(),
  }),
]);
const RunCodec: z.ZodType<RunState> = z.object({
  runId: z.string(),
  tenantId: z.string(),
  user: z.object({
    id: z.string(),
    scopes: z.array(z.string()),
    attributes: z.record(z.string(), z.string()).optional(),
  }),
  tools: z.record(z.string(), ToolSourceCodec),
  toolsHash: z.string(),
  context: z.record(z.string(), z.unknown()),
  budgets: z
    .object({
      max_turns: z.number(),
      max_tool_calls: z.number(),
      max_duration_ms: z.number(),
      max_cost: z.number(),
    })
    .partial(),
  createdAtMs: z.number(),
  expiresAtMs: z.number(),
  cancelledAtMs: z.number().nullable(),
  notifyWebhookId: z.string().optional(),
  mode: z.literal("shadow").optional(),
});
const CallRefCodec = z.object({ id: z.string(), name: z.string() });
const LimitClaimsCodec = z.array(
  z.object({
    name: z.string(),
    subject: z.string(),
    amount: z.number(),
    max: z.number(),
    windowMs: z.number(),
    over: z.enum(["refuse", "approve"]),
  }),
);
const StoredSubmitFields = {
  operationId: z.string(),
  idempotencyKey: z.string(),
  canonical: z.string(),
  hash: z.string(),
  cost: z.number(),
  /** Limits across runs it claims (issue 21); absent: none, or a row written before them. */
  claims: LimitClaimsCodec.optional(),
};
/**
 * Stored without the input's value: it is the canonical text, parsed back (the arguments are kept
 * once). The tool source is named by its hash (`tool_sources` holds it once per run); rows written
 * before that hold the source itself, and still decode.
 */
const StoredCallCodec = z.union([
  z.object({ call: CallRefCodec, fixed: EnvelopeCodec }),
  z.object({
    call: CallRefCodec,
    submit: z.union([
      z.strictObject({ ...StoredSubmitFields, sourceHash: z.string() }),
      z.strictObject({ ...StoredSubmitFields, source: ToolSourceCodec }),
    ]),
    closed: EnvelopeCodec.nullable(),
  }),
]);
type StoredCall = z.infer<typeof StoredCallCodec>;
const StoredCallsCodec = z.array(StoredCallCodec);
const InputValueCodec = z.record(z.string(), z.unknown());
const UsageRowCodec = z.object({ turns: z.number(), calls: z.number(), cost: z.number() });
const StoredCountsRowCodec = z.object({
  stored_turns: z.number(),
  stored_bytes: z.number(),
  stopped_turns: z.number(),
  checks: z.number(),
});
const UsageSnapshotCodec = z.object({
  turns: z.number(),
  calls: z.number(),
  cost: z.number(),
  stored_turns: z.number(),
  stored_bytes: z.number(),
  stopped_turns: z.number(),
  checks: z.number(),
  version: z.number(),
});
/** A turn row's `usage` (TURN_USAGE_COLUMN): the usage row's columns as they stood after it. */
export const decodeUsageSnapshot = (text: string): z.infer<typeof UsageSnapshotCodec> =>
  decodeWith(UsageSnapshotCodec, parseJson(text, "turn usage"), "turn usage");
const TurnGroupRowCodec = z.object({
  key: z.string(),
  turn_stop: z.enum(["max_turns", "max_tool_calls", "deadline", "max_cost"]).nullable(),
  usage_hash: z.string().nullable(),
  calls: z.number(),
});
const TurnRowCodec = z.object({
  id: z.string(),
  seq: z.number(),
  content_hash: z.string(),
  calls: z.string(),
  reserved_cost: z.number(),
  settled_cost: z.number().nullable(),
  model_cost: z.number(),
  created_at: z.number(),
});
export type TurnRow = z.infer<typeof TurnRowCodec>;
export const TURN_COLUMNS =
  "id, seq, content_hash, calls, reserved_cost, settled_cost, model_cost, created_at";

/**
 * Decoded rows, keyed by their exact stored text: a RunObject reads its run row several times per
 * turn, and JSON.parse + the zod codec over the whole run (offered manifests included) was its
 * largest cost on the replay path (npm run profile). Content-keyed, so never stale; values are
 * deep-frozen, so a caller that mutated one would throw instead of corrupting the next read.
 */
const DECODED_ROWS = { maxEntries: 512, maxBytes: 8 * 1024 * 1024 };
// Measured on a miss only: the key (the row's text) and the decoded value, about twice the text.
const decodedRuns = new LruCache<string, RunState>(
  DECODED_ROWS,
  (run) => 2 * encodeRun(run).length,
);
const decodedTurns = new LruCache<string, TurnRecord>(
  DECODED_ROWS,
  (turn) => 2 * JSON.stringify(turn).length,
);

export const encodeRun = (run: RunState): string => JSON.stringify(run);

export function decodeRun(data: string): RunState {
  const cached = decodedRuns.get(data);
  if (cached) return cached;
  const run = deepFreeze(decodeWith(RunCodec, parseJson(data, "run"), "run"));
  decodedRuns.set(data, run);
  return run;
}
export const decodeTurnGroup = (row: unknown): TurnGroup => {
  const group = decodeWith(TurnGroupRowCodec, row, "turn group");
  return {
    key: group.key,
    turnStop: group.turn_stop,
    usageHash: group.usage_hash,
    calls: group.calls,
  };
};
export const decodeUsage = (row: unknown): Usage => {
  const usage = decodeWith(UsageRowCodec, row, "usage");
  return { turns: usage.turns, toolCalls: usage.calls, cost: usage.cost };
};

export const decodeStoredCounts = (row: unknown): StoredCounts => {
  const counts = decodeWith(StoredCountsRowCodec, row, "usage");
  return {
    turns: counts.stored_turns,
    bytes: counts.stored_bytes,
    stopped: counts.stopped_turns,
    checks: counts.checks,
  };
};

/**
 * `hashOf`: the stored hash of a call's tool source (its `tool_sources` row), so the row names it;
 * a source without one (e.g. a call decoded from an older row) is kept in the row as it was.
 */
export function encodeTurnCalls(
  calls: readonly TurnCall[],
  hashOf: (source: ToolSource) => string | undefined = () => undefined,
): string {
  const stored = calls.map((call): StoredCall => {
    if ("fixed" in call) return call;
    const { input, source, ...submit } = call.submit;
    const sourceHash = hashOf(source);
    const common = { ...submit, canonical: input.canonical, hash: input.hash };
    return {
      call: call.call,
      submit: sourceHash === undefined ? { ...common, source } : { ...common, sourceHash },
      closed: call.closed,
    };
  });
  return JSON.stringify(stored);
}

/** A `tool_sources` row's text: decoded once per run object (deep-frozen, shared by its calls). */
export const decodeToolSource = (text: string): ToolSource =>
  deepFreeze(decodeWith(ToolSourceCodec, parseJson(text, "tool source"), "tool source"));

/** A compensation row's claims (limits across runs, JSON); null: none. */
export const decodeLimitClaims = (text: string): LimitClaim[] =>
  decodeWith(LimitClaimsCodec, parseJson(text, "compensation claims"), "compensation claims");

/** The stored source a call row names; unknown hashes are corrupt storage. */
export type SourceLookup = (hash: string) => ToolSource | null;

/** A turn row's columns as one cache key (only for rows whose columns have their stored types). */
function turnKey(row: unknown): string | null {
  if (typeof row !== "object" || row === null) return null;
  const r = row as Record<string, unknown>;
  const texts = [r.id, r.content_hash, r.calls];
  const numbers = [r.seq, r.reserved_cost, r.model_cost, r.created_at];
  if (!texts.every((v) => typeof v === "string") || !numbers.every((v) => typeof v === "number"))
    return null;
  if (r.settled_cost !== null && typeof r.settled_cost !== "number") return null;
  // JSON text never holds a raw NUL, so the separator cannot be forged by a column's content.
  return [...texts, ...numbers, r.settled_cost].join("\u0000");
}

/** `sourceOf`: resolves the source hashes calls name (a source is content-addressed, so the cache key stays the row). */
export function decodeTurn(row: unknown, sourceOf: SourceLookup = () => null): TurnRecord {
  const key = turnKey(row);
  const cached = key === null ? undefined : decodedTurns.get(key);
  if (cached) return cached;
  const decoded = deepFreeze(decodeTurnRow(row, sourceOf));
  if (key !== null) decodedTurns.set(key, decoded);
  return decoded;
}

function decodeTurnRow(row: unknown, sourceOf: SourceLookup): TurnRecord {
  const turn = decodeWith(TurnRowCodec, row, "turn");
  const storedSource = (hash: string): ToolSource => {
    const source = sourceOf(hash);
    if (!source) throw new Error(`corrupt turn row: no stored tool source ${hash}`);
    return source;
  };
  const calls = decodeWith(StoredCallsCodec, parseJson(turn.calls, "turn"), "turn").map(
    (stored): TurnCall => {
      if ("fixed" in stored) return stored;
      const { canonical, hash, operationId, idempotencyKey, cost, claims } = stored.submit;
      const source =
        "source" in stored.submit ? stored.submit.source : storedSource(stored.submit.sourceHash);
      const value = decodeWith(InputValueCodec, parseJson(canonical, "turn"), "turn input");
      return {
        call: stored.call,
        submit: {
          operationId,
          idempotencyKey,
          input: { value, canonical, hash },
          source,
          cost,
          ...(claims ? { claims } : {}),
        },
        closed: stored.closed,
      };
    },
  );
  return {
    id: turn.id,
    contentHash: turn.content_hash,
    seq: turn.seq,
    calls,
    reservedCost: turn.reserved_cost,
    settledCost: turn.settled_cost,
    modelCost: turn.model_cost,
    createdAtMs: turn.created_at,
  };
}
