// Undo (issue 22), the operation's side: what the original's run needs to compensate it (its frozen
// input, recorded result, tool and how it stands — read-only, owned by the tenant), the link to its
// compensation once there is one (a row beside the log: the state machine is not touched, the
// original stays `recorded`), what a view shows of both links, and the compensation's own spec: a
// compensation whose declaration says approval "required" always asks a person.
import { compensable, type Compensation, type OriginalFacts } from "../../domain/compensation.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { ToolSpec, ToolSource } from "../../tools/spec.ts";
import type { Head, OperationError, SubmitRequest } from "./contracts.ts";
import { missing, toolName, type OperationLog } from "./log.ts";
import { decodeInput } from "../store/operation-rows.ts";

/** Both links of an operation's view: it compensates `compensates`; `compensated_by` compensates it. */
export type UndoView = { compensates: string | null; compensated_by: string | null };

/** The original as its run reads it to compensate it (OperationObject.compensationSource). */
export type CompensationSource = {
  operation_id: string;
  run_id: string;
  tool: string;
  risk: string;
  source: ToolSource;
  facts: OriginalFacts;
  /** Its tool's declaration as frozen with the call (null: none, or the tool no longer compiles). */
  compensate: Compensation | null;
  input: Record<string, unknown>;
  /** The recorded result (null unless it succeeded). */
  result: unknown;
  recorded_at_ms: number | null;
  /** Its compensation's id, if one was linked already. */
  compensated_by: string | null;
};

export function compensationSourceOf(
  log: OperationLog,
  tenantId: string,
): Result<CompensationSource, OperationError> {
  const head = log.headFor(tenantId);
  if (!head) return err(missing(log.store, tenantId));
  const { state, frozen } = head;
  const loaded = log.loadFixed();
  const compensate = loaded.ok ? loaded.value.spec.compensate : null;
  const recorded = state.phase === "recorded" ? state : null;
  const facts: OriginalFacts = {
    phase: state.phase,
    status: recorded?.outcome.status ?? null,
    code: recorded && "code" in recorded.outcome ? recorded.outcome.code : null,
    via: recorded?.via ?? null,
    shadow: frozen.plan.shadow !== undefined,
    compensates: frozen.plan.compensates ?? null,
    declared: compensate !== null,
  };
  return ok({
    operation_id: frozen.id,
    run_id: frozen.run_id,
    tool: toolName(frozen),
    risk: frozen.risk ?? (loaded.ok ? loaded.value.spec.risk : "write"),
    source: frozen.source,
    facts,
    compensate,
    input: decodeInput(frozen.input),
    result: recorded?.outcome.status === "succeeded" ? recorded.outcome.result : null,
    recorded_at_ms: recorded?.recordedAtMs ?? null,
    compensated_by: compensatedBy(log),
  });
}

/**
 * Records `compensationId` as this operation's compensation (idempotent: its id derives from this
 * one's, so it is always the same). Refused unless the original is compensable: a link never
 * claims an undo of something that was not applied.
 */
export function linkCompensation(
  log: OperationLog,
  tenantId: string,
  compensationId: string,
): Result<true, OperationError> {
  const source = compensationSourceOf(log, tenantId);
  if (!source.ok) return source;
  if (!compensable(source.value.facts).ok) return err({ code: "not_found" });
  if (source.value.compensated_by === compensationId) return ok(true);
  log.store.ensureTable("op_compensated_by");
  log.store.run(
    "INSERT OR REPLACE INTO op_compensated_by (k, compensation_id) VALUES (1, ?)",
    compensationId,
  );
  return ok(true);
}

function compensatedBy(log: OperationLog): string | null {
  if (!log.store.exists("op_compensated_by")) return null;
  return (
    log.store.one<{ compensation_id: string }>(
      "SELECT compensation_id FROM op_compensated_by WHERE k = 1",
    )?.compensation_id ?? null
  );
}

export function undoViewOf(log: OperationLog, { frozen }: Head): UndoView {
  return { compensates: frozen.plan.compensates ?? null, compensated_by: compensatedBy(log) };
}

/** The compensating tool as this operation runs it: approval "required" asks a person always. */
export function compensationSpec(spec: ToolSpec, req: SubmitRequest): ToolSpec {
  if (req.compensation?.approval !== "required") return spec;
  return { ...spec, approval: { ...spec.approval, mode: "always", when: null } };
}
