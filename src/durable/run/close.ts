// A cancel's I/O around domain/turn/close.ts: ask every open operation how it stands, close the
// calls planClose picks in one synchronous block over every turn row (issue 7: per-operation
// read-await-write lost updates), then cancel only the operations this run created.
import { closeCalls, planClose, type Standing } from "../../domain/turn/close.ts";
import { openOperations } from "../../domain/turn/turn.ts";
import { encodeTurnCalls } from "../store/run-rows.ts";
import { operationStub } from "../stubs.ts";
import type { RunParts } from "./contracts.ts";

/**
 * Asks every open operation (or only `only`) for its state, then closes the calls planClose
 * picks in one synchronous block over every turn row (issue 7: per-operation read-await-write
 * lost updates), then cancels the operations this run created (never another run's). A result
 * arriving later is recorded on the operation, flagged late, never on the closed turn.
 */
export async function close(
  parts: RunParts,
  tenantId: string,
  only: string | null,
  by: string,
): Promise<void> {
  const { env, store, rows } = parts;
  const runId = rows.load()!.runId;
  const open = new Set(
    rows
      .turns()
      .flatMap(openOperations)
      .filter((id) => (only === null || id === only) && !parts.settler.isRecorded(id)),
  );
  if (only !== null) open.add(only);
  // An operation that cannot be asked (or does not exist yet) is absent: its call is closed.
  const states = await Promise.all(
    [...open].map(async (id): Promise<[string, Standing]> => {
      const view = await operationStub(env, id)
        .get(tenantId, 0)
        .catch(() => null);
      if (view?.ok)
        return [
          id,
          view.value.phase === "recorded"
            ? { kind: "recorded" }
            : {
                kind: "open",
                runId: view.value.run_id,
                // The model's hash: a person's edit keeps it the turn's call (issue 35 item 2).
                inputHash: view.value.edited?.proposed_input_hash ?? view.value.input_hash,
              },
        ];
      // Pruned: settled long ago, nothing to close or cancel.
      return [id, view?.error.code === "pruned" ? { kind: "recorded" } : { kind: "absent" }];
    }),
  );
  const plan = planClose(runId, rows.turns(), new Map(states), only);
  const unsettled = plan.close;
  store.transaction(() => {
    for (const turn of rows.turns()) {
      const closed = closeCalls(turn, unsettled);
      if (closed)
        store.run(
          "UPDATE turns SET calls = ? WHERE id = ?",
          encodeTurnCalls(closed.calls, parts.sources.hashOf),
          turn.id,
        );
    }
  });
  // Best effort: a missed cancel leaves the call closed ("may still complete"); in a cancelled run the
  // operation is still refused at its next retry (authorize). The operation checks the run too.
  await Promise.allSettled(
    [...plan.cancel].map((id) => operationStub(env, id).cancel(tenantId, by, runId)),
  );
}
