// An operation is one append-only table: row N = transition N, holding the state it produced and
// the trace events it emitted (so one transition = one row written); row 1 also holds the frozen
// call. The current state is the last row; the primary key makes a concurrent append fail (CAS).
// Pruning (retention) deletes the log and leaves one `op_pruned` row: the operation's tombstone.
// A row's tenant-plane events (issue 18) ride in it (`unsent_events`, NULL once the EVENTS queue took
// them: one row written per send instead of an outbox table, row and delete per new operation).
// Its inbox updates and limit releases ride in it the same way (`unsent_notices`, issue 32: no
// op_outbox table, insert and delete per update); a row whose events and notices were both taken is
// cleared by one UPDATE. `op_outbox` holds what a first send or delivery did not get taken (moved
// there with its backoff, keyed by the log row that wrote it).
// A cancel that arrives before the operation exists leaves an `op_early_cancel` row per cancelling
// run (only that run's submit obeys it); `op_tombstone` is its older, unbound form, still read.
// `op_compensated_by` (undo, issue 22): the id of this operation's compensation, once there is one.
// Its signed receipts (issue 37), in chain order, ride in row 1 (`receipts`: one row written per
// receipt, no table of their own) and move to the tombstone when the log is pruned.
import { z } from "zod";
import type { OperationPlan, OperationState, TraceEvent } from "../../domain/operation/index.ts";
import { readEvent, type ToolgateEvent } from "../../domain/journal/events.ts";
import type { FrozenRow } from "../operation/contracts.ts";
import { decodeWith, deepFreeze, parseJson } from "./codec.ts";
import { ToolSourceCodec } from "./run-rows.ts";
import { DECIDER_VIA } from "../../domain/journal/trace-event.ts";
import type { EditedCall } from "../../domain/envelope.ts";

/** Added to older operations' op_log on their next row with events (SqlStore.ensureColumn). */
export const UNSENT_EVENTS_COLUMN = "unsent_events TEXT";
export const UNSENT_NOTICES_COLUMN = "unsent_notices TEXT";
/** Created on a first send or delivery that was not taken (older objects have it from every step). */
export const OP_OUTBOX_TABLE =
  "CREATE TABLE IF NOT EXISTS op_outbox (seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at_ms INTEGER NOT NULL, at_ms INTEGER NOT NULL, PRIMARY KEY (seq, kind)) WITHOUT ROWID";
/** The signed receipts' JSON array (issue 37), on row 1 and on the tombstone; added to older logs when first written. */
export const RECEIPTS_COLUMN = "receipts TEXT";
export const OPERATION_SCHEMA = `
CREATE TABLE IF NOT EXISTS op_log (seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, state TEXT NOT NULL, events TEXT NOT NULL, frozen TEXT, ${UNSENT_EVENTS_COLUMN}, ${UNSENT_NOTICES_COLUMN}, ${RECEIPTS_COLUMN});
CREATE TABLE IF NOT EXISTS op_tombstone (k INTEGER PRIMARY KEY CHECK (k = 1), tenant_id TEXT NOT NULL, by TEXT NOT NULL, at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS op_early_cancel (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, by TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS op_lease (k INTEGER PRIMARY KEY CHECK (k = 1), resource TEXT NOT NULL, fencing_token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS op_pruned (k INTEGER PRIMARY KEY CHECK (k = 1), id TEXT NOT NULL, tenant_id TEXT NOT NULL, input_hash TEXT NOT NULL, status TEXT NOT NULL, recorded_at_ms INTEGER NOT NULL, pruned_at_ms INTEGER NOT NULL, ${RECEIPTS_COLUMN});
CREATE TABLE IF NOT EXISTS op_compensated_by (k INTEGER PRIMARY KEY CHECK (k = 1), compensation_id TEXT NOT NULL);
${OP_OUTBOX_TABLE};`;

// The log's codecs. The frame of each row is checked (a row that does not decode is corrupt storage:
// a thrown error, never a guess); the plan, state and trace are the core's own types, written only
// by this object, and checked by their tag.
const Tagged = (tag: string) => z.object({ [tag]: z.string() }).loose();
const PlanCodec = z.custom<OperationPlan>((value) => z.object({}).loose().safeParse(value).success);
const FrozenRowCodec: z.ZodType<FrozenRow> = z.object({
  id: z.string(),
  tenant_id: z.string(),
  run_id: z.string(),
  call_id: z.string(),
  source: ToolSourceCodec,
  input: z.string(),
  input_hash: z.string(),
  plan: PlanCodec,
  created_at: z.number(),
  risk: z.string().optional(),
  redact: z.array(z.string()).optional(),
  trace_content: z.object({ arguments: z.boolean(), result: z.boolean() }).optional(),
  // A person's edit (issue 35 item 2): the model's words are the core's own shape, checked by tag.
  edit: z
    .object({
      proposed_hash: z.string(),
      proposed_input: z.string(),
      from_hash: z.string(),
      by: z.string(),
      via: z.enum(DECIDER_VIA),
      reason: z.string().nullable(),
      at_ms: z.number(),
      model: z.custom<EditedCall>(
        (value) => z.object({ note: z.string() }).loose().safeParse(value).success,
      ),
    })
    .optional(),
});
const StateCodec = z.custom<OperationState>((value) => Tagged("phase").safeParse(value).success);
const TraceCodec = z.custom<TraceEvent[]>(
  (value) => z.array(Tagged("type").extend({ at_ms: z.number() })).safeParse(value).success,
);
const InputCodec = z.record(z.string(), z.unknown());

/**
 * Row 1's frozen call, deep-frozen (it never changes; the catalog then finds its compiled tool by
 * identity). A plan frozen before the rename names the tool's version `policyVersion`: read as
 * `toolVersion` (the stored field of older rows is left as written).
 */
export function decodeFrozenRow(text: string): FrozenRow {
  const raw = parseJson(text, "op_log frozen");
  const approval = z
    .object({
      plan: z.object({ approval: z.object({ policyVersion: z.string() }).loose() }).loose(),
    })
    .loose()
    .safeParse(raw);
  const value =
    approval.success && !("toolVersion" in approval.data.plan.approval)
      ? {
          ...approval.data,
          plan: {
            ...approval.data.plan,
            approval: {
              ...approval.data.plan.approval,
              toolVersion: approval.data.plan.approval.policyVersion,
            },
          },
        }
      : raw;
  return deepFreeze(decodeWith(FrozenRowCodec, value, "op_log frozen"));
}
export const decodeState = (text: string): OperationState =>
  decodeWith(StateCodec, parseJson(text, "op_log state"), "op_log state");
export const decodeTrace = (text: string): TraceEvent[] =>
  decodeWith(TraceCodec, parseJson(text, "op_log events"), "op_log events");
/**
 * A row's `unsent_events`: the tenant-plane events the step announced, each read as `readEvent`
 * reads one (another version's data kept as written). Not an array of events: corrupt (thrown, so
 * the send fails and the row keeps them: nothing guessed is sent, nothing dropped unseen).
 */
export function decodeUnsentEvents(text: string): ToolgateEvent[] {
  const items = decodeWith(
    z.array(z.unknown()),
    parseJson(text, "op_log unsent_events"),
    "op_log unsent_events",
  );
  return items.map((item) => {
    const read = readEvent(item);
    if (!read) throw new Error("corrupt op_log unsent_events row: not an event");
    return read.event;
  });
}
/**
 * A row's `unsent_notices`: its inbox updates and limit releases as outbox rows encode them (kind
 * and payload: outbox.ts encodeNotice), in the order the step announced them.
 */
export const decodeUnsentNotices = (text: string): Array<{ kind: string; payload: string }> =>
  decodeWith(
    z.array(z.object({ kind: z.string(), payload: z.string() })),
    parseJson(text, "op_log unsent_notices"),
    "op_log unsent_notices",
  );
/** The frozen input (canonical JSON of an object, as the gate admitted it). */
export const decodeInput = (text: string): Record<string, unknown> =>
  decodeWith(InputCodec, parseJson(text, "frozen input"), "frozen input");
