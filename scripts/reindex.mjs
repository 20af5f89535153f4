// npm run reindex -- <tenant_id>…: rebuilds each tenant's index from its runs and operations
// (POST /v1/admin/tenants/{id}/reindex). TOOLGATE_URL (default http://localhost:8787) and
// TOOLGATE_ADMIN_TOKEN name the deployment. Each call takes one step of the rebuild; a large
// tenant answers `"state": "running"` and is asked again (every 2 s) until it answers `done`.
// Exit 0 every index rebuilt; 1 a run's reads kept failing (its old rows kept, said per tenant);
// 2 could not run (usage, toolgate unreachable, or a refusal such as an unknown tenant).
import { baseUrl, CliError, EXIT, runCli, toolgateCall } from "./lib/cli.mjs";

const USAGE =
  "usage: TOOLGATE_ADMIN_TOKEN=… [TOOLGATE_URL=…] npm run reindex -- ten_… [ten_…] (exit: 0 rebuilt; 1 some runs unreadable; 2 could not run)";

await runCli("reindex", async () => {
  const token = process.env.TOOLGATE_ADMIN_TOKEN;
  const tenants = process.argv.slice(2);
  if (!token || tenants.length === 0 || tenants.some((t) => t.startsWith("-"))) {
    console.error(USAGE);
    return EXIT.couldNotRun;
  }
  const url = baseUrl(process.env.TOOLGATE_URL || "http://localhost:8787", "TOOLGATE_URL");
  let failed = false;
  for (const tenant of tenants) {
    if (!/^ten_[A-Za-z0-9_]+$/.test(tenant))
      throw new CliError(`${JSON.stringify(tenant)} is not a tenant id (ten_…)`);
    for (;;) {
      const report = await toolgateCall(url, "POST", `/v1/admin/tenants/${tenant}/reindex`, token);
      console.log(`${tenant}: ${JSON.stringify(report)}`);
      // Runs whose reads kept failing kept their old rows: said, and the exit code says it too.
      if (report?.failed > 0) failed = true;
      if (report?.state !== "running") break;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
  return failed ? EXIT.broken : EXIT.ok;
});
