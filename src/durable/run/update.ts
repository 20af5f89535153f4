// PATCH of a run (RunObject.update): scopes and offered tools may change mid-run; the next admission
// and the next retry see the change. New tool sources are hashed before the transaction; the run
// row, the sources and (with new tools) the tenant facts read with them are written in one.
import { ok, type Result } from "../../domain/result.ts";
import type { TenantFacts } from "../../domain/tenant-facts.ts";
import { hashTools, type RunState } from "../../domain/turn/turn.ts";
import type { ToolSource } from "../../tools/spec.ts";
import { encodeRun } from "../store/run-rows.ts";
import type { RunError, RunView, RunParts } from "./contracts.ts";
import { viewOf } from "./create.ts";
import type { RunFacts } from "./facts.ts";

export type RunPatch = {
  scopes?: string[];
  tools?: Record<string, ToolSource>;
  facts?: TenantFacts;
};

export async function updateRun(
  parts: RunParts,
  facts: RunFacts,
  tenantId: string,
  patch: RunPatch,
): Promise<Result<RunView, RunError>> {
  const toolsHash = patch.tools ? await hashTools(patch.tools) : null;
  if (patch.tools) await parts.sources.hash(Object.values(patch.tools));
  const next = parts.store.transaction(() => {
    const run = parts.rows.loadFor(tenantId);
    if (!run) return null;
    if (patch.tools) parts.sources.store(Object.values(patch.tools));
    const next: RunState = {
      ...run,
      user: { ...run.user, scopes: patch.scopes ?? run.user.scopes },
      tools: patch.tools ?? run.tools,
      toolsHash: toolsHash ?? run.toolsHash,
    };
    parts.store.run("UPDATE run SET data = ?", encodeRun(next));
    if (patch.tools && patch.facts) facts.write(next.toolsHash, patch.facts);
    return next;
  });
  return next ? ok(viewOf(parts, next)) : parts.rows.missing(tenantId);
}
