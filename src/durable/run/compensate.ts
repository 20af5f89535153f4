// Undo (issue 22), the run's side: the original's run coordinates its compensation. It decides
// (domain/compensation.ts: applied originals only; `admitCompensation`: the declared arguments
// rendered over the original's frozen input and recorded result, through the turn's gate against
// the compensating tool AS IT STANDS NOW — schema, bound fields from the run's context, limits, URL
// rules), asks the tenant's Cedar set, records
// one row per original (original → compensation id, generation, reason, who asked) and submits
// the compensation through the ordinary operation path, so it gets Cedar, limits across runs,
// approval, locks, retries, outcome_unknown and its trace like any write. Its id and key derive
// from the original's id and the generation, and the row is written once per generation (INSERT
// OR IGNORE, then an UPDATE only over the generation seen recorded as having applied nothing):
// however often and however concurrently it is asked, it is one operation, always submitted from
// the stored row. A rejected, expired or failed-without-effect compensation is asked anew.
// A person's action, not the model's: it runs in a cancelled or expired run, spends none of the
// run's budgets, and is authorized by its row, not by the model's offered tools or scopes
// (`authorizeCompensation`, before each send; after an approval, against the tool the approver saw).
import { keySecretOf } from "../../crypto.ts";
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import {
  admitCompensation,
  asksAnew,
  compensable,
  compensationIdOf,
  toolChangedSinceAsked,
} from "../../domain/compensation.ts";
import { idempotencyKeyFor } from "../../domain/identity.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Denial, RunState } from "../../domain/turn/turn.ts";
import { hostPolicy } from "../../config.ts";
import {
  compensationPolicyRefusal,
  evaluatePolicies,
  policyRequestFor,
} from "../../policies/evaluate.ts";
import * as catalog from "../../tools/catalog.ts";
import type { ToolSource, ToolSpec } from "../../tools/spec.ts";
import type { LimitClaim } from "../../domain/limit/window.ts";
import { decodeLimitClaims, decodeToolSource } from "../store/run-rows.ts";
import type { CompensationSource } from "../operation/compensation.ts";
import type { OperationReply } from "../operation/contracts.ts";
import { operationStub, tenantStub } from "../stubs.ts";
import type { RunError, RunParts } from "./contracts.ts";

/** One row per compensated original (lazy table `compensations`). */
export type CompensationRow = {
  original_id: string;
  compensation_id: string;
  tool: string;
  source: string;
  input: string;
  input_hash: string;
  idempotency_key: string;
  claims: string | null;
  approval: "required" | "none";
  reason: string;
  asked_by: string;
  asked_at_ms: number;
  /** "submitting": written, its submit not yet answered; "submitted": the operation exists. */
  state: "submitting" | "submitted";
  /** 1, then one more each time the last one was recorded as having applied nothing (`asksAnew`). */
  generation: number;
};
export type Asked = { reason: string; by: string; waitMs: number };
export type Compensated = {
  created: boolean;
  compensation_id: string;
  reply: OperationReply | null;
};

/** Refused before anything is recorded (the tool's registration; the gate's are admitCompensation's). */
const invalid = (detail: string) =>
  err<RunError>({ code: "compensation_arguments_invalid", detail: `${detail}; nothing was sent` });

export function compensationRow(parts: RunParts, originalId: string): CompensationRow | null {
  if (!parts.store.exists("compensations")) return null;
  const row = parts.store.one<CompensationRow>(
    "SELECT * FROM compensations WHERE original_id = ?",
    originalId,
  );
  // A row written before generations existed has no column yet: it is the first.
  return row ? { ...row, generation: row.generation ?? 1 } : null;
}

export function compensationIds(parts: RunParts): string[] {
  if (!parts.store.exists("compensations")) return [];
  return parts.store
    .all<{ compensation_id: string }>("SELECT compensation_id FROM compensations")
    .map((row) => row.compensation_id);
}

/** POST /v1/operations/{id}/compensate, and each step of a rollback (rollback.ts). */
export async function compensate(
  parts: RunParts,
  tenantId: string,
  original: CompensationSource,
  asked: Asked,
): Promise<Result<Compensated, RunError>> {
  const run = parts.rows.loadFor(tenantId);
  if (!run) return parts.rows.missing(tenantId);
  if (original.run_id !== run.runId) return err({ code: "not_found", detail: "no such operation" });
  const existing = compensationRow(parts, original.operation_id);
  if (existing && !(await endedWithoutEffect(parts, tenantId, existing)))
    return submitRow(parts, run, existing, false, asked.waitMs);
  const prepared = await prepareCompensation(parts, tenantId, original, run);
  if (!prepared.ok) return prepared;
  const { source, spec, input, claims } = prepared.value;
  const keySecret = await keySecretOf(parts.env);
  if (!keySecret.ok) return keySecret;
  // The tenant's Cedar set as it stands now, before anything is recorded: a refusal here leaves
  // the original compensable, so it can be asked again once the policy allows it.
  const policies = await tenantStub(parts.env, tenantId).policySet();
  if (policies) {
    const request = policyRequestFor(spec, input, run.user, run.runId, run.context);
    const decided = evaluatePolicies(policies, request);
    if (decided.decision !== "allow")
      return err({ code: "policy_denied", detail: compensationPolicyRefusal(decided) });
  }
  const generation = (existing?.generation ?? 0) + 1;
  const compensationId = await compensationIdOf(original.operation_id, generation);
  const canonical = canonicalJson(input);
  const row: CompensationRow = {
    original_id: original.operation_id,
    compensation_id: compensationId,
    tool: spec.name,
    source: canonicalJson(source),
    input: canonical,
    input_hash: await sha256Hex(canonical),
    idempotency_key: await idempotencyKeyFor(compensationId, keySecret.value),
    claims: claims.length > 0 ? JSON.stringify(claims) : null,
    approval: original.compensate!.approval,
    reason: asked.reason,
    asked_by: asked.by,
    asked_at_ms: Date.now(),
    state: "submitting",
    generation,
  };
  // Another request may have written it (or the next generation) during the awaits: then that row
  // is the compensation. Written only over the generation this request saw end without effect.
  const created = parts.store.transaction(() => {
    parts.store.ensureTable("compensations");
    parts.store.ensureColumn("compensations", "generation INTEGER NOT NULL DEFAULT 1");
    const values = [
      row.compensation_id,
      row.tool,
      row.source,
      row.input,
      row.input_hash,
      row.idempotency_key,
      row.claims,
      row.approval,
      row.reason,
      row.asked_by,
      row.asked_at_ms,
      row.state,
      row.generation,
    ];
    const written = existing
      ? parts.store.run(
          "UPDATE compensations SET compensation_id = ?, tool = ?, source = ?, input = ?, input_hash = ?, idempotency_key = ?, claims = ?, approval = ?, reason = ?, asked_by = ?, asked_at_ms = ?, state = ?, generation = ? WHERE original_id = ? AND generation = ?",
          ...values,
          row.original_id,
          existing.generation,
        )
      : parts.store.run(
          `INSERT OR IGNORE INTO compensations (compensation_id, tool, source, input, input_hash, idempotency_key, claims, approval, reason, asked_by, asked_at_ms, state, generation, original_id) VALUES (${Array(14).fill("?").join(", ")})`,
          ...values,
          row.original_id,
        );
    return written === 1;
  });
  const stored = created ? row : compensationRow(parts, original.operation_id)!;
  return submitRow(parts, run, stored, created, asked.waitMs);
}

/** What a compensation would be asked with now: the compensating tool as registered and its gated input. */
export type PreparedCompensation = {
  source: ToolSource;
  spec: ToolSpec;
  input: Record<string, unknown>;
  claims: LimitClaim[];
};

/**
 * The compensation of `original` as it would be asked now, recording nothing: compensable, the
 * compensating tool as registered now (it may have changed since the original's PUT), the declared
 * arguments rendered and gated (`admitCompensation`). Shared by `compensate` and the rollback's
 * plan (rollback-plan.ts), so the plan a person approves names the hash a submit would freeze.
 */
export async function prepareCompensation(
  parts: RunParts,
  tenantId: string,
  original: CompensationSource,
  run: RunState,
): Promise<Result<PreparedCompensation, RunError>> {
  const allowed = compensable(original.facts);
  if (!allowed.ok) return allowed;
  const declared = original.compensate!;
  const found = await tenantStub(parts.env, tenantId).sources([declared.tool]);
  if (!found.ok) return invalid(`the compensating tool ${declared.tool} is no longer registered`);
  const source = found.value[declared.tool]!;
  const spec = catalog.compileTool(source, hostPolicy(parts.env));
  if (!spec.ok) return invalid(`the compensating tool ${declared.tool} no longer compiles`);
  const admitted = admitCompensation(
    spec.value,
    declared,
    {
      operationId: original.operation_id,
      facts: original.facts,
      input: original.input,
      result: original.result,
    },
    run,
  );
  if (!admitted.ok) return admitted;
  return ok({ source, spec: spec.value, ...admitted.value });
}

/**
 * Whether the stored compensation was recorded as having applied nothing (domain `asksAnew`): then
 * asking again makes the next generation. Unanswered: no (the stored one is submitted again).
 */
async function endedWithoutEffect(
  parts: RunParts,
  tenantId: string,
  row: CompensationRow,
): Promise<boolean> {
  const peeked = await operationStub(parts.env, row.compensation_id)
    .peek(tenantId)
    .catch(() => null);
  if (!peeked?.ok) return false;
  const { phase, envelope } = peeked.value;
  const code = envelope.status === "succeeded" ? null : envelope.code;
  return asksAnew({ phase, status: phase === "recorded" ? envelope.status : null, code });
}

/** Submits the stored compensation (a replay when it exists), then links it from the original. */
export async function submitRow(
  parts: RunParts,
  run: RunState,
  row: CompensationRow,
  created: boolean,
  waitMs: number,
): Promise<Result<Compensated, RunError>> {
  const id = row.compensation_id;
  let reply: OperationReply | null = null;
  try {
    const submitted = await operationStub(parts.env, id).submit({
      tenantId: run.tenantId,
      runId: run.runId,
      callId: `undo_${row.original_id}${row.generation > 1 ? `_${row.generation}` : ""}`,
      source: decodeToolSource(row.source),
      input: { value: JSON.parse(row.input), canonical: row.input, hash: row.input_hash },
      operationId: id,
      idempotencyKey: row.idempotency_key,
      userId: run.user.id,
      waitMs,
      ...(row.claims ? { limitClaims: decodeLimitClaims(row.claims) } : {}),
      principal: { user: run.user, context: run.context },
      facts: null,
      compensation: { of: row.original_id, approval: row.approval },
    });
    if (!submitted.ok)
      return err({
        code: "unavailable",
        detail: `the compensation ${id} could not be submitted (${submitted.error.code}); ask again`,
      });
    reply = submitted.value;
  } catch (error) {
    // Written, not answered: asking again (or the rollback's alarm) submits the same operation.
    return err({
      code: "unavailable",
      detail: `the compensation ${id} was not answered (${String(error)}); ask again`,
    });
  }
  if (row.state === "submitting")
    parts.store.run(
      "UPDATE compensations SET state = 'submitted' WHERE original_id = ? AND compensation_id = ?",
      row.original_id,
      id,
    );
  // The original's side of the link (idempotent; a failure here is repaired by the next ask). Only
  // for the current generation: a next one written meanwhile links itself, and must stay linked.
  if (compensationRow(parts, row.original_id)?.compensation_id !== id)
    return ok({ created, compensation_id: id, reply });
  await operationStub(parts.env, row.original_id)
    .linkCompensation(run.tenantId, id)
    .catch((error) =>
      console.error("compensation link not written", row.original_id, String(error)),
    );
  return ok({ created, compensation_id: id, reply });
}

/**
 * Asked by a compensation before each send (OperationObject → gather → RunObject.authorize): its
 * row decides, not the model's offered tools, scopes, budgets, deadline or a cancel — a person
 * asked for it. `toolVersion` (after an approval): the compensating tool's source the approver
 * saw; another source cannot ride that approval.
 */
export async function authorizeCompensation(
  parts: RunParts,
  tenantId: string,
  originalId: string,
  tool: string,
  toolVersion: string | null,
): Promise<Result<true, Denial>> {
  const deny = (message: string) =>
    err<Denial>({ status: "rejected", code: "tool_not_allowed", message });
  if (!parts.rows.loadFor(tenantId)) return deny("The run this compensation belongs to is gone.");
  const row = compensationRow(parts, originalId);
  if (!row || row.tool !== tool)
    return deny(`No compensation of ${originalId} by ${tool} was asked for.`);
  if (
    toolVersion !== null &&
    (await catalog.toolVersion(decodeToolSource(row.source))) !== toolVersion
  )
    return err({
      status: "rejected",
      code: "approval_expired",
      message: `The tool ${tool} changed while the compensation waited; it was not sent.`,
    });
  if (toolVersion !== null) {
    // The approver saw the tool as it was asked with; the tenant may have re-PUT or deleted it since.
    const found = await tenantStub(parts.env, tenantId).sources([tool]);
    const current = found.ok ? canonicalJson(found.value[tool]) : null;
    const changed = toolChangedSinceAsked(tool, row.source, current);
    if (changed) return err({ status: "rejected", code: "approval_expired", message: changed });
  }
  return ok(true);
}
