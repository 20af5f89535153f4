// Rebuilding the tenant index from the objects (issue 20): `POST /v1/admin/tenants/{id}/reindex`
// and `npm run reindex`. Nothing else enumerates a tenant's runs, so the index keeps the list of
// every run it was ever told about (`idx_known`, fed by the same events, kept across a rebuild and
// emptied only by retention); each run answers its row and its operations' ids, each operation its
// row (the same shapes the feed writes). Runs are read a few at a time, each in its own transaction.
import type { IndexOp } from "../../domain/index-feed.ts";
import type { Env } from "../env.ts";
import type { SqlStore } from "../store/sql-store.ts";
import { operationStub, runStub } from "../stubs.ts";
import { upsertOp, upsertRun } from "./write.ts";

export type RebuildReport = { runs: number; operations: number; missing: number };

const PARALLEL = 8;

export async function rebuildIndex(
  env: Env,
  store: SqlStore,
  tenantId: string,
): Promise<RebuildReport> {
  const runs = store
    .all<{ run_id: string }>("SELECT run_id FROM idx_known WHERE tenant_id = ?", tenantId)
    .map((row) => row.run_id);
  const report: RebuildReport = { runs: 0, operations: 0, missing: 0 };
  for (let i = 0; i < runs.length; i += PARALLEL) {
    await Promise.all(
      runs.slice(i, i + PARALLEL).map(async (runId) => {
        const entry = await runStub(env, runId).indexEntry(tenantId);
        if (!entry) {
          report.missing++;
          return;
        }
        const ops = (
          await Promise.all(
            entry.operation_ids.map((id) => operationStub(env, id).indexEntry(tenantId)),
          )
        ).filter((op): op is IndexOp => op !== null);
        store.transaction(() => {
          upsertRun(store, tenantId, entry.run);
          for (const op of ops) upsertOp(store, op);
        });
        report.runs++;
        report.operations += ops.length;
      }),
    );
  }
  return report;
}
