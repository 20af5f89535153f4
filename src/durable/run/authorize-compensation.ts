// Undo (issue 22): what a compensation is asked before each send (OperationObject → gather →
// RunObject.authorize). Its row in the run decides (compensate.ts), not the model's offered tools,
// scopes, budgets, deadline or a cancel — a person asked for it; after an approval, the
// compensating tool must still be the one the approver saw.
import { canonicalJson, sha256Hex } from "../../domain/canonical-json.ts";
import { toolChangedSinceAsked } from "../../domain/compensation.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import type { Denial } from "../../domain/turn/turn.ts";
import { tenantStub } from "../stubs.ts";
import { compensationRow } from "./compensate.ts";
import type { RunParts } from "./parts.ts";

/**
 * Asked by a compensation before each send (OperationObject → gather → RunObject.authorize): its
 * row decides, not the model's offered tools, scopes, budgets, deadline or a cancel — a person
 * asked for it. `policyVersion` (after an approval): the compensating tool's source the approver
 * saw; another source cannot ride that approval.
 */
export async function authorizeCompensation(
  parts: RunParts,
  tenantId: string,
  originalId: string,
  tool: string,
  policyVersion: string | null,
): Promise<Result<true, Denial>> {
  const deny = (message: string) =>
    err<Denial>({ status: "rejected", code: "tool_not_allowed", message });
  if (!parts.rows.loadFor(tenantId)) return deny("The run this compensation belongs to is gone.");
  const row = compensationRow(parts, originalId);
  if (!row || row.tool !== tool)
    return deny(`No compensation of ${originalId} by ${tool} was asked for.`);
  if (policyVersion !== null && (await sha256Hex(row.source)) !== policyVersion)
    return err({
      status: "rejected",
      code: "approval_expired",
      message: `The tool ${tool} changed while the compensation waited; it was not sent.`,
    });
  if (policyVersion !== null) {
    // The approver saw the tool as it was asked with; the tenant may have re-PUT or deleted it since.
    const found = await tenantStub(parts.env, tenantId).sources([tool]);
    const current = found.ok ? canonicalJson(found.value[tool]) : null;
    const changed = toolChangedSinceAsked(tool, row.source, current);
    if (changed) return err({ status: "rejected", code: "approval_expired", message: changed });
  }
  return ok(true);
}
