// The run's trace, assembled on read: run_created / run_cancelled, one turn_received per turn, and
// each operation's own stored (redacted, chained) events or when retention pruned it; also as
// OTLP/JSON resourceSpans. Waits for reports still in flight, so a read sees its own deliveries.
import type { TraceEvent } from "../../domain/operation/index.ts";
import { otlpTrace, type OperationTrace, type OtlpTrace } from "../../domain/otlp.ts";
import { operationIds, turnReceived, type RunState } from "../../domain/turn/turn.ts";
import type { TurnRecord } from "../../domain/turn/turn.ts";
import { operationStub } from "../stubs.ts";
import { compensationIds } from "./compensate.ts";
import type { RunParts } from "./contracts.ts";

type Pruned = { operation_id: string; pruned_at_ms: number };

export async function runTrace(
  parts: RunParts,
  tenantId: string,
  run: RunState,
): Promise<{ run_id: string; events: TraceEvent[] }> {
  const events: TraceEvent[] = [{ type: "run_created", at_ms: run.createdAtMs, run_id: run.runId }];
  if (run.cancelledAtMs !== null) events.push({ type: "run_cancelled", at_ms: run.cancelledAtMs });
  const turns = parts.rows.turns();
  events.push(...turns.map(turnReceived));
  for (const op of await operationTraces(parts, tenantId, turns)) {
    if ("pruned_at_ms" in op)
      events.push({ type: "pruned", at_ms: op.pruned_at_ms, operation_id: op.operation_id });
    else events.push(...op.events.map((event) => ({ ...event, operation_id: op.operation_id })));
  }
  events.sort((a, b) => a.at_ms - b.at_ms);
  return { run_id: run.runId, events };
}

/** The run's trace as OTLP/JSON resourceSpans (GET /v1/runs/{id}/trace?format=otlp). */
export async function runOtlp(
  parts: RunParts,
  tenantId: string,
  run: RunState,
): Promise<OtlpTrace> {
  const ops = (await operationTraces(parts, tenantId, parts.rows.turns())).filter(
    (op): op is OperationTrace => "events" in op,
  );
  return otlpTrace(run.runId, ops);
}

/** Each operation's stored (redacted, chained) events, or when retention pruned it. */
async function operationTraces(
  parts: RunParts,
  tenantId: string,
  turns: TurnRecord[],
): Promise<Array<OperationTrace | Pruned>> {
  await parts.settler.reporting;
  // Undo (issue 22): the run's compensations are its operations too.
  const ids = [...new Set([...turns.flatMap(operationIds), ...compensationIds(parts)])];
  const traces = await Promise.all(
    ids.map(async (operationId) => ({
      operationId,
      trace: await operationStub(parts.env, operationId).traceFor(tenantId),
    })),
  );
  return traces.flatMap(({ operationId, trace }): Array<OperationTrace | Pruned> =>
    trace.ok
      ? [{ operation_id: operationId, events: trace.value }]
      : trace.error.code === "pruned"
        ? [{ operation_id: operationId, pruned_at_ms: trace.error.pruned_at_ms }]
        : [],
  );
}
