// What one transition writes inside its transaction, and what follows its commit. Inside: the log
// row (state + events annotated, redacted and hash-chained onto the log), the lease's fencing token
// with the grant, and an outbox row for everything the tenant plane must learn (a crash after the
// commit delays its delivery, never loses it). After: log lines and the OTLP push, never a throw.
import type {
  OperationEvent,
  OperationState,
  Step,
  TraceEvent,
} from "../../domain/operation/index.ts";
import type { Env } from "../env.ts";
import type { FrozenRow, Head } from "./contracts.ts";
import { recordLease } from "./lease-client.ts";
import type { OperationLog } from "./log.ts";
import type { Announcement } from "../../domain/journal/announce.ts";
import { announceStep, noticeRows } from "./notices.ts";
import { logEvents, pushRecorded, traceOf } from "./trace.ts";

/** What one transition wrote: its trace events, and whether it left outbox or event rows to send. */
/** Called inside the transaction, for a step that changed the state; `frozen` for row 1 and an edit. */
export type Written = { appended: TraceEvent[]; outboxed: boolean; evented: boolean };
export const NOTHING_WRITTEN: Written = { appended: [], outboxed: false, evented: false };

export function writeStep(
  log: OperationLog,
  head: Head | null,
  frozen: FrozenRow | null,
  event: OperationEvent,
  step: Step,
  nowMs: number,
): Written {
  const row = (head?.frozen ?? frozen)!;
  const appended = traceOf(log, head, row, step, nowMs);
  const seq = (head?.seq ?? 0) + 1;
  // What the world is told of it (domain/journal/announce.ts), in this same transaction: its events,
  // inbox updates and limit releases ride in the row itself (no outbox row: a crash after the commit
  // delays their delivery, never loses it; nothing is told of a transition that did not commit),
  // decided once head() is this row (row 1's events need its frozen call).
  const facts = { seq, before: head?.state ?? null, step, event, nowMs };
  let said: Announcement | null = null;
  // `frozen` on a later row: a person's edit wrote the call's new version (issue 35 item 2).
  log.append(seq, nowMs, step.state, appended, frozen, () => {
    said = announceStep(log, facts);
    return { events: said.events, notices: noticeRows(said) };
  });
  const evented = said!.events.length > 0;
  // The lease's fencing token, durable with the transition that starts the first attempt under it.
  if (event.type === "lock_granted") recordLease(log.store, row.plan.resource, event.fencingToken);
  const outboxed = said!.inbox.length + said!.limits.length > 0;
  return { appended, outboxed, evented };
}

/** After the commit: nothing here may throw (the effects after it — lock release, outbox, alarms — must run). */
export function afterCommit(
  env: Env,
  log: OperationLog,
  appended: readonly TraceEvent[],
  entered: OperationState["phase"] | null,
  waitUntil: (promise: Promise<unknown>) => void,
): void {
  try {
    if (appended.length > 0) logEvents(appended, log.head()!.frozen);
    // Recorded: the spans are complete. Pushed in the background; a collector that is down or slow
    // changes nothing here (the push has its own timeout and its failure is only logged).
    if (entered === "recorded") pushRecorded(env, log, waitUntil);
  } catch (error) {
    console.error("trace log or export failed after a commit", String(error));
  }
}
