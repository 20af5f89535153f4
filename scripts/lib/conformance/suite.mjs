// The conformance suite's runner: a throw-away tenant on the deployment (admin route), the suite's
// own test upstream, each check of checks.mjs in turn with a fresh context, then cleanup (the
// tenants' runs cancelled, tools and secrets deleted, keys revoked: there is no route that deletes
// a tenant). Results are data; the CLI (scripts/conformance.mjs) prints them.
import { randomBytes } from "node:crypto";
import { CHECKS, CheckFailed } from "./checks.mjs";
import { deploymentClient, sleep, upstreamNamespace } from "./client.mjs";

const SCOPES = [
  "runs:write",
  "runs:read",
  "tools:write",
  "secrets:write",
  "approvals:decide",
  "operations:resolve",
  "traces:read",
];

const random = () => randomBytes(4).toString("hex");

/**
 * Runs the checks against `url`. `upstream`: { controlUrl, publicUrl } of a running
 * demo/upstream.ts (control on loopback; public: how the deployment reaches it). `only`: check ids.
 * `onResult`: called after each check. Returns { ok, results, tenant, cleanup }.
 */
export async function runConformance({ url, adminToken, upstream, only = null, onResult }) {
  const client = deploymentClient(url.replace(/\/+$/, ""));
  const runId = `conf${Date.now().toString(36)}${random()}`;
  const created = { runs: [], tools: [], secrets: [], tenants: [] };

  async function newTenant(label) {
    const tenant = await client.call("POST", "/v1/admin/tenants", adminToken, {
      name: `conformance-${runId}-${label}`,
    });
    if (tenant.status !== 201)
      throw new Error(`POST /v1/admin/tenants answered ${tenant.status}: ${tenant.text}`);
    const issued = await client.call(
      "POST",
      `/v1/admin/tenants/${tenant.body.tenant_id}/keys`,
      adminToken,
      { name: "conformance", scopes: SCOPES },
    );
    if (issued.status !== 201)
      throw new Error(`issuing a key answered ${issued.status}: ${issued.text}`);
    const entry = {
      tenantId: tenant.body.tenant_id,
      keyId: issued.body.key_id,
      key: issued.body.key,
    };
    created.tenants.push(entry);
    return entry;
  }

  const health = await fetch(`${client.url}/healthz`).catch((error) => error);
  if (!(health instanceof Response) || !health.ok)
    throw new Error(
      `${client.url}/healthz did not answer 200 (${health.status ?? health.message})`,
    );
  const tenant = await newTenant("main");
  const results = [];
  try {
    for (const check of CHECKS) {
      if (only && !only.includes(check.id)) continue;
      const started = Date.now();
      const t = context(check.id);
      let outcome;
      try {
        const evidence = await check.run(t);
        outcome = { id: check.id, promise: check.promise, ok: true, evidence };
      } catch (error) {
        outcome = {
          id: check.id,
          promise: check.promise,
          ok: false,
          failure: error instanceof CheckFailed ? error.message : `error: ${error.message}`,
          evidence: error.evidence ?? [],
        };
      }
      outcome.ms = Date.now() - started;
      results.push(outcome);
      onResult?.(outcome);
    }
  } finally {
    await cleanup().catch(() => {});
  }
  return { ok: results.every((r) => r.ok), results, tenantId: tenant.tenantId };

  /** What a check can do: the public API as the tenant, as its agent (run token), and the upstream. */
  function context(checkId) {
    const api = (method, path, body, headers) =>
      client.call(method, path, tenant.key, body, headers);
    return {
      api,
      random,
      sleep,
      seen: () => client.seen,
      name: (label) => `conf_${runId}_${label}`.slice(0, 64),
      upstream: (label) =>
        upstreamNamespace(upstream.controlUrl, upstream.publicUrl, `${runId}-${checkId}-${label}`),
      /** Registers a tool; a keyed one is verified against its own upstream (counts reset after). */
      async tool(manifest, up) {
        const put = await api("PUT", `/v1/tools/${manifest.name}`, manifest);
        if (put.status !== 201 && put.status !== 200)
          throw new Error(`PUT /v1/tools/${manifest.name} answered ${put.status}: ${put.text}`);
        created.tools.push(manifest.name);
        if (manifest.idempotency?.mode === "header") {
          const verified = await api("POST", `/v1/tools/${manifest.name}/verify`, {
            arguments: { amount: 1, currency: "usd" },
          });
          if (verified.status !== 200)
            throw new Error(
              `verifying ${manifest.name} answered ${verified.status}: ${verified.text}`,
            );
        }
        await up?.mark();
        return manifest.name;
      },
      async secret(name, value) {
        const put = await api("PUT", `/v1/secrets/${name}`, { value });
        if (put.status < 300) created.secrets.push(name);
        return put;
      },
      async run(tools, budgets = {}) {
        const res = await api("POST", "/v1/runs", {
          user: { id: "conformance-user", scopes: [] },
          tools,
          budgets,
        });
        if (res.status !== 201)
          throw new Error(`POST /v1/runs answered ${res.status}: ${res.text}`);
        created.runs.push(res.body.run_id);
        return { runId: res.body.run_id, runToken: res.body.run_token };
      },
      /** A native turn as the agent posts it (run token); `wait`: seconds it may hold the answer. */
      turn: (run, calls, wait = 5) =>
        client.call(
          "POST",
          `/v1/runs/${run.runId}/turns?format=native`,
          run.runToken,
          { calls },
          { Prefer: `wait=${wait}` },
        ),
      /** Polls a turn until no call in it is still pending (up to ~20 s). */
      async settle(run, turnId) {
        let last = null;
        for (let i = 0; i < 4; i++) {
          last = await client.call(
            "GET",
            `/v1/runs/${run.runId}/turns/${turnId}?wait=5`,
            run.runToken,
          );
          const results = last.body?.results ?? [];
          if (results.length > 0 && results.every((r) => r.status !== "pending")) {
            if (results.every((r) => r.status !== "outcome_unknown") || last.status === 200)
              return last;
          }
        }
        return last;
      },
      async otherTenant() {
        const other = await newTenant("other");
        return { call: (method, path, body) => client.call(method, path, other.key, body) };
      },
    };
  }

  async function cleanup() {
    const first = created.tenants[0];
    for (const run of created.runs)
      await client.call("POST", `/v1/runs/${run}/cancel`, first.key).catch(() => {});
    for (const tool of created.tools)
      await client.call("DELETE", `/v1/tools/${tool}`, first.key).catch(() => {});
    for (const secret of created.secrets)
      await client.call("DELETE", `/v1/secrets/${secret}`, first.key).catch(() => {});
    for (const t of created.tenants)
      await client
        .call("DELETE", `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`, adminToken)
        .catch(() => {});
  }
}

/** The results as a plain-text table: check, PASS/FAIL, time, then the evidence lines. */
export function formatResults(results) {
  const lines = [];
  const width = Math.max(...results.map((r) => r.id.length), 5);
  lines.push(`${"check".padEnd(width)}  result  time`);
  lines.push(`${"-".repeat(width)}  ------  -----`);
  for (const r of results) {
    lines.push(
      `${r.id.padEnd(width)}  ${r.ok ? "PASS  " : "FAIL  "}  ${(r.ms / 1000).toFixed(1)} s`,
    );
    lines.push(`${" ".repeat(width)}    ${r.promise}`);
    if (!r.ok) lines.push(`${" ".repeat(width)}    ✗ ${r.failure}`);
    for (const line of r.evidence) lines.push(`${" ".repeat(width)}    · ${line}`);
  }
  const failed = results.filter((r) => !r.ok).length;
  lines.push("");
  lines.push(
    failed === 0
      ? `${results.length} of ${results.length} promises kept.`
      : `${failed} of ${results.length} promises BROKEN.`,
  );
  return lines.join("\n");
}
