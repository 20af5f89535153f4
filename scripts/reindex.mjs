// npm run reindex -- <tenant_id>…: rebuilds each tenant's index from its runs and operations
// (POST /v1/admin/tenants/{id}/reindex). TOOLGATE_URL (default http://localhost:8787) and
// TOOLGATE_ADMIN_TOKEN name the deployment.
const url = process.env.TOOLGATE_URL ?? "http://localhost:8787";
const token = process.env.TOOLGATE_ADMIN_TOKEN;
const tenants = process.argv.slice(2);
if (!token || tenants.length === 0) {
  console.error("usage: TOOLGATE_ADMIN_TOKEN=… [TOOLGATE_URL=…] npm run reindex -- ten_… [ten_…]");
  process.exit(2);
}
let failed = false;
for (const tenant of tenants) {
  const response = await fetch(`${url}/v1/admin/tenants/${tenant}/reindex`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}` },
  });
  const body = await response.text();
  console.log(`${tenant}: ${response.status} ${body}`);
  if (!response.ok) failed = true;
}
process.exit(failed ? 1 : 0);
