// A cancel as pure functions: which calls a run closes and which operations it cancels (only its
// own), and the turn with those calls closed. The shell asks the operations first, then writes
// every changed turn in one transaction (durable/run/close.ts).
import { refusal, RUN_TEXT } from "../envelope.ts";
import type { TurnCall, TurnRecord } from "./turn.ts";

/** What a cancel learned about an operation a call points at: `absent` when it does not exist yet or could not be asked. */
export type Standing =
  { kind: "recorded" } | { kind: "open"; runId: string; inputHash: string } | { kind: "absent" };
export type ClosePlan = { close: Set<string>; cancel: Set<string> };

/**
 * What a cancel of this run (all its calls, or `only` one operation) does. A run cancels only
 * operations it created: another run's operation (a tenant-scoped key shared across runs) is never
 * cancelled from here. Its calls that joined it (identical input) are only closed; a call it
 * refused as a conflict keeps that answer. An operation that is absent is cancelled all the same:
 * the operation keeps a tombstone bound to this run, or refuses if another run created it.
 */
export function planClose(
  runId: string,
  turns: readonly TurnRecord[],
  standing: ReadonlyMap<string, Standing>,
  only: string | null,
): ClosePlan {
  const close = new Set<string>();
  const cancel = new Set<string>();
  const ours = (seen: Standing | undefined) =>
    seen?.kind === "absent" || (seen?.kind === "open" && seen.runId === runId);
  for (const turn of turns)
    for (const stored of turn.calls) {
      if (!("submit" in stored) || stored.closed !== null) continue;
      const { operationId, input } = stored.submit;
      if (only !== null && operationId !== only) continue;
      const seen = standing.get(operationId);
      if (ours(seen)) {
        close.add(operationId);
        cancel.add(operationId);
      } else if (seen?.kind === "open" && seen.inputHash === input.hash) close.add(operationId);
    }
  if (only !== null && ours(standing.get(only))) cancel.add(only);
  return { close, cancel };
}

/**
 * Closes, in one step, every open call of the turn whose operation is in `unsettled` (not yet
 * recorded, or never created): from now on the turn says cancelled, and a late result stays on the
 * operation. Null when nothing changed.
 */
export function closeCalls(record: TurnRecord, unsettled: ReadonlySet<string>): TurnRecord | null {
  let changed = false;
  const calls = record.calls.map((stored): TurnCall => {
    if (
      !("submit" in stored) ||
      stored.closed !== null ||
      !unsettled.has(stored.submit.operationId)
    )
      return stored;
    changed = true;
    const id = stored.submit.operationId;
    return {
      ...stored,
      closed: refusal("cancelled", id, "cancelled", RUN_TEXT.closedWhileRunning(id)),
    };
  });
  return changed ? { ...record, calls } : null;
}
