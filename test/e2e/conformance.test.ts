// `npm run conformance` as a user runs it (the CLI, `--json`), against the shared toolgate under
// `wrangler dev` (test/support/e2e-setup.ts; the suite creates its own throw-away tenants): every
// promise kept, exit 0. And against a fake deployment that lies (test/support/lying-deployment.ts,
// port 8964): every check fails with its reason, exit 1 — the suite detects a broken deployment, it
// does not just pass. The suite starts its own test upstream.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_VARS, ROOT } from "../../scripts/lib/dev-server.mjs";
import { e2eServer } from "../support/e2e.ts";
import { startLyingDeployment, type LyingDeployment } from "../support/lying-deployment.ts";

const LIAR_PORT = 8964;
const CHECK_IDS = [
  "one_effect_per_keyed_write",
  "commit_then_hang_is_unknown_then_reconciled",
  "unknown_reconciled_by_status_lookup",
  "retries_only_where_safe",
  "approval_binds_frozen_arguments",
  "budget_stops",
  "secrets_never_echoed",
  "cross_tenant_not_found",
];

const { toolgateUrl } = e2eServer();
let liar: LyingDeployment;

beforeAll(async () => {
  liar = await startLyingDeployment(LIAR_PORT);
}, 240_000);

afterAll(async () => {
  await liar?.close();
});

type Report = {
  ok: boolean;
  results: Array<{ id: string; ok: boolean; failure?: string; evidence: string[] }>;
  cleanup: { failures: unknown[]; tenants: string[] };
};

/** The CLI as a user runs it (the admin token in its environment); its exit code and --json report. */
async function conformance(url: string): Promise<{ code: number; report: Report }> {
  const args = [join(ROOT, "scripts", "conformance.mjs"), "--url", url, "--json"];
  try {
    const { stdout } = await promisify(execFile)(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, TOOLGATE_ADMIN_TOKEN: DEV_VARS.TOOLGATE_ADMIN_TOKEN! },
    });
    return { code: 0, report: JSON.parse(stdout) };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    if (!failed.stdout) throw new Error(`conformance exited ${failed.code}: ${failed.stderr}`);
    return { code: failed.code, report: JSON.parse(failed.stdout) };
  }
}

describe("npm run conformance", () => {
  it("toolgate under wrangler dev keeps every promise: exit 0, each check passes with evidence", async () => {
    const { code, report } = await conformance(toolgateUrl);
    const failures = report.results.filter((r) => !r.ok);
    expect(failures, JSON.stringify(failures, null, 2)).toEqual([]);
    expect(report.results.map((r) => r.id)).toEqual(CHECK_IDS);
    expect(report.results.every((r) => r.evidence.length > 0)).toBe(true);
    expect(report.ok).toBe(true);
    // Everything it made is undone (the keyless unknown resolved, keys revoked): exit 0, not 3.
    expect(report.cleanup.failures).toEqual([]);
    expect(code).toBe(0);
  });

  it("a deployment that lies fails every check, each with its reason: exit 1", async () => {
    const { code, report } = await conformance(liar.url);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    const byId = Object.fromEntries(report.results.map((r) => [r.id, r]));
    expect(Object.keys(byId)).toEqual(CHECK_IDS);
    for (const id of CHECK_IDS) expect(byId[id]!.ok, id).toBe(false);
    expect(byId.one_effect_per_keyed_write!.failure).toMatch(/one operation|1 effect/);
    expect(byId.commit_then_hang_is_unknown_then_reconciled!.failure).toMatch(/outcome_unknown/);
    expect(byId.retries_only_where_safe!.failure).toMatch(/retried/);
    expect(byId.approval_binds_frozen_arguments!.failure).toMatch(/wait for a person/);
    expect(byId.budget_stops!.failure).toMatch(/budget_exhausted/);
    expect(byId.secrets_never_echoed!.failure).toMatch(/secret's value appeared/);
    expect(byId.cross_tenant_not_found!.failure).toMatch(/404/);
  });
});
