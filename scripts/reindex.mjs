// npm run reindex -- <tenant_id>…: rebuilds each tenant's index from its runs and operations
// (POST /v1/admin/tenants/{id}/reindex). TOOLGATE_URL (default http://localhost:8787) and
// TOOLGATE_ADMIN_TOKEN name the deployment. Each call takes one step of the rebuild; a large
// tenant answers `"state": "running"` and is asked again (every 2 s) until it answers `done`.
const url = process.env.TOOLGATE_URL ?? "http://localhost:8787";
const token = process.env.TOOLGATE_ADMIN_TOKEN;
const tenants = process.argv.slice(2);
if (!token || tenants.length === 0) {
  console.error("usage: TOOLGATE_ADMIN_TOKEN=… [TOOLGATE_URL=…] npm run reindex -- ten_… [ten_…]");
  process.exit(2);
}
let failed = false;
for (const tenant of tenants) {
  for (;;) {
    const response = await fetch(`${url}/v1/admin/tenants/${tenant}/reindex`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}` },
      redirect: "manual",
    });
    const body = await response.text();
    console.log(`${tenant}: ${response.status} ${body}`);
    let report = null;
    try {
      report = JSON.parse(body);
    } catch {}
    if (!response.ok) failed = true;
    // Runs whose reads kept failing kept their old rows: said, and the exit code says it too.
    if (report?.failed > 0) failed = true;
    if (!response.ok || report?.state !== "running") break;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}
process.exit(failed ? 1 : 0);
