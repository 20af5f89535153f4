// Local toolgate for the demo and the benchmark: the fake upstream, `wrangler dev` as a child
// process (on this very Node binary, so Node 24 from the `node` devDependency), readiness checks,
// and the demo tenant/tools/run. Everything binds to 127.0.0.1.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fillUpstream } from "./verify-table.mjs";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const DEV_VARS = {
  TOOLGATE_ADMIN_TOKEN: "dev-admin-token",
  TOOLGATE_SIGNING_KEY: "dev-signing-key",
  TOOLGATE_SECRETS_KEY: "dev-secrets-key",
  TOOLGATE_ENV: "development",
};

/** The demo shop's API key, registered as the demo tenant's secret SHOP_API_KEY. */
export const DEMO_SHOP_API_KEY = "sk_demo_shop_0123456789";

/** Starts `wrangler dev` for `config` on `port`; resolves once GET /healthz answers (`readyTimeoutMs`, 60 s by default). `kill()` SIGKILLs it. */
export async function startWrangler({
  config = join(ROOT, "wrangler.toml"),
  port,
  inspectorPort = port + 1000,
  vars = {},
  persistTo,
  quiet = false,
  readyTimeoutMs = 60_000,
}) {
  const args = [
    join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"),
    "dev",
    "--config",
    config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--show-interactive-dev-session=false",
    "--log-level",
    quiet ? "error" : "info",
  ];
  if (persistTo) args.push("--persist-to", persistTo);
  for (const [name, value] of Object.entries(vars)) args.push("--var", `${name}:${value}`);
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: process.env.CI ?? "" },
    stdio: ["ignore", quiet ? "ignore" : "inherit", "inherit"],
    detached: true,
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
  };
  /** A crash, not a shutdown: SIGKILL to wrangler's whole process group (workerd included). */
  const kill = () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
    return new Promise((resolve) =>
      child.exitCode !== null ? resolve() : child.once("exit", resolve),
    );
  };
  const exited = new Promise((_, reject) =>
    child.once("exit", (code) => reject(new Error(`wrangler dev exited with ${code}`))),
  );
  try {
    await Promise.race([waitForHealth(url, readyTimeoutMs), exited]);
  } catch (error) {
    stop();
    throw error;
  }
  return { url, stop, kill };
}

async function waitForHealth(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${url}/healthz did not answer within ${timeoutMs} ms`);
}

export async function call(url, method, path, token, body) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${text}`);
  return { status: res.status, body: parsed, headers: res.headers };
}

export function demoTools(upstreamUrl) {
  // The shop's sandbox for shadow runs ({{UPSTREAM_ORIGIN}}): its own namespace of the same fake upstream.
  return JSON.parse(
    fillUpstream(readFileSync(join(ROOT, "demo", "tools.json"), "utf8"), upstreamUrl),
  );
}

/** The demo key's scopes: everything the walkthrough and the README's recipes (Cedar, webhooks, undo) use. */
export const DEMO_SCOPES = [
  "runs:write",
  "runs:read",
  "tools:write",
  "secrets:write",
  "approvals:decide",
  "operations:resolve",
  "operations:compensate",
  "traces:read",
  "events:read",
  "webhooks:write",
  "webhooks:read",
  "policies:write",
  "freezes:write",
];

/** A new demo tenant and its key (DEMO_SCOPES), through the admin API. */
export async function createDemoTenant(url) {
  const admin = DEV_VARS.TOOLGATE_ADMIN_TOKEN;
  const tenant = (await call(url, "POST", "/v1/admin/tenants", admin, { name: "demo" })).body;
  const key = (
    await call(url, "POST", `/v1/admin/tenants/${tenant.tenant_id}/keys`, admin, {
      name: "demo",
      scopes: DEMO_SCOPES,
    })
  ).body.key;
  return { tenantId: tenant.tenant_id, key };
}

/**
 * Registers the demo tools for a tenant (`tenant`: one to reuse, else a new one from
 * createDemoTenant) and opens one run (`mode`: "live" by default, or "shadow"). Re-registering
 * identical tools keeps their verdicts, so a reused tenant is set up the same way.
 */
export async function registerDemo(
  url,
  upstreamUrl,
  { runContext = {}, budgets = {}, mode, tenant } = {},
) {
  const { tenantId, key } = tenant ?? (await createDemoTenant(url));
  // The shop's API key is the tenant's own secret: tools reference it as {secret:SHOP_API_KEY}.
  await call(url, "PUT", "/v1/secrets/SHOP_API_KEY", key, { value: DEMO_SHOP_API_KEY });
  const tools = demoTools(upstreamUrl);
  for (const tool of tools) await call(url, "PUT", `/v1/tools/${tool.name}`, key, tool);
  const run = await createRun(
    url,
    key,
    tools.map((t) => t.name),
    runContext,
    budgets,
    mode,
  );
  return { tenantId, key, run };
}

/**
 * Acting as the user (issue 36, `npm start`): the local authorization server the demo upstream
 * serves (demo/oauth-server.ts, issuer `<upstream>/as/demo`) registered as the provider
 * `demo-calendar`, and a tool that sends the run's user's own token (`add_calendar_event`).
 */
export async function registerUserDemo(url, upstreamUrl, key) {
  const provider = await call(url, "PUT", "/v1/oauth-providers/demo-calendar", key, {
    issuer: `${upstreamUrl}/as/demo`,
    client_id: "demo-client",
    client_secret: "demo-client-secret",
    scopes: ["calendar.write"],
  });
  if (provider.status >= 300) throw new Error(`provider: ${JSON.stringify(provider.body)}`);
  const tool = {
    name: "add_calendar_event",
    description: "Add an event to the user's own calendar (acts as the user).",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: { title: { type: "string" }, starts_at: { type: "string" } },
      required: ["title", "starts_at"],
    },
    risk: "write",
    request: {
      method: "POST",
      url: `${upstreamUrl}/ns/calendar/events`,
      headers: { Authorization: "Bearer {credential}" },
    },
    auth: { oauth: "demo-calendar", scopes: ["calendar.write"] },
    idempotency: { mode: "header", header: "Idempotency-Key" },
  };
  const put = await call(url, "PUT", `/v1/tools/${tool.name}`, key, tool);
  if (put.status >= 300) throw new Error(`tool: ${JSON.stringify(put.body)}`);
  return tool.name;
}

/** Verifies the demo's keyed tools against the shop's sandbox (`npm start`, the walkthrough's step 6); the answers. */
export async function verifyDemo(url, key, sandboxUrl) {
  const context = { customer_id: "cus_demo", charge_limit: 50_000, refund_limit: 1_000 };
  const checks = [
    ["charge_card", { amount: 100, currency: "usd" }],
    ["refund_order", { order_id: "ord_test", amount: 1, reason: "other" }],
  ];
  const answers = [];
  for (const [name, args] of checks)
    answers.push(
      (
        await call(url, "POST", `/v1/tools/${name}/verify`, key, {
          arguments: args,
          context,
          base_url: sandboxUrl,
        })
      ).body,
    );
  return answers;
}

export async function createRun(url, key, tools, context = {}, budgets = {}, mode = undefined) {
  const body = {
    user: { id: "demo_user", scopes: ["payments:charge"] },
    tools,
    context: { customer_id: "cus_demo", charge_limit: 50_000, refund_limit: 1_000, ...context },
    budgets,
    ...(mode === undefined ? {} : { mode }),
  };
  return (await call(url, "POST", "/v1/runs", key, body)).body;
}
