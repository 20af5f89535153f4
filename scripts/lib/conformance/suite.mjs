// The conformance suite's runner: a throw-away tenant on the deployment (admin route), the suite's
// own test upstream, each check of checks.mjs in turn with a fresh context, each check's last look
// after all of them (`later`: a promise that must still hold at the end), then cleanup: unknown
// outcomes the checks left are resolved (else their operations and runs are never pruned), runs
// cancelled, tools and secrets deleted, keys revoked. There is no route that deletes a tenant: the
// tenants stay, empty, and are reported. Every cleanup step that fails is reported, never swallowed.
// Results are data; the CLI (scripts/conformance.mjs) prints them.
import { randomBytes } from "node:crypto";
import { CHECKS, CheckFailed } from "./checks.mjs";
import { deploymentClient, sleep, upstreamNamespace } from "./client.mjs";

/**
 * The CLI's exit code: 0 every promise kept and everything cleaned up; 1 a promise broken; 3
 * every promise kept but cleanup failed (a key may still be live: revoke it by hand). 2 is the
 * CLI's own: the suite could not run.
 */
export const exitCodeOf = ({ ok, cleanup }) => (!ok ? 1 : cleanup.failures.length > 0 ? 3 : 0);

/** What cleanup left behind and what failed, as lines for a person. */
export function formatCleanup(cleanup, { upstreamUrl = null } = {}) {
  const lines = [];
  for (const f of cleanup.failures)
    lines.push(
      `cleanup FAILED: ${f.step}${f.status ? ` answered ${f.status}` : ""}${f.detail ? `: ${f.detail}` : ""}`,
    );
  if (cleanup.failures.length > 0)
    lines.push("  → undo these by hand (a key not revoked keeps its scopes: revoke it now).");
  if (cleanup.tenants.length > 0)
    lines.push(
      `left behind: tenant(s) ${cleanup.tenants.join(", ")} (no route deletes a tenant; their keys are revoked, their runs cancelled)`,
    );
  if (upstreamUrl)
    lines.push(
      `remember: remove ${new URL(upstreamUrl).host} from TOOLGATE_UPSTREAM_ALLOWLIST if you added it for this run`,
    );
  return lines.join("\n");
}

const SCOPES = [
  "runs:write",
  "runs:read",
  "tools:write",
  "secrets:write",
  "approvals:decide",
  "operations:resolve",
  "traces:read",
  "events:read",
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
  const created = { runs: [], tools: [], secrets: [], tenants: [], unknowns: [] };
  /** Each check's last look (run after every check): [check id, fn]. */
  const later = [];

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
  let cleaned;
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
    // A promise that must hold for longer than its check (e.g. "never resent"): looked at again now.
    for (const [id, look] of later) {
      const outcome = results.find((r) => r.id === id);
      if (!outcome?.ok) continue;
      try {
        outcome.evidence.push(...(await look()));
      } catch (error) {
        outcome.ok = false;
        outcome.failure = error instanceof CheckFailed ? error.message : `error: ${error.message}`;
        if (error.evidence) outcome.evidence.push(...error.evidence);
        onResult?.(outcome);
      }
    }
  } finally {
    cleaned = await cleanup().catch((error) => ({
      failures: [{ step: "cleanup", detail: error.message }],
    }));
  }
  return {
    ok: results.every((r) => r.ok),
    results,
    tenantId: tenant.tenantId,
    cleanup: {
      ...cleaned,
      tenants: created.tenants.map((t) => t.tenantId),
    },
  };

  /** What a check can do: the public API as the tenant, as its agent (run token), and the upstream. */
  function context(checkId) {
    const api = (method, path, body, headers) =>
      client.call(method, path, tenant.key, body, headers);
    return {
      api,
      random,
      sleep,
      seen: () => client.seen,
      /** `look` runs once every check has run: what it throws fails this check. */
      later: (look) => void later.push([checkId, look]),
      /** An operation this check leaves `outcome_unknown` on purpose: cleanup resolves it. */
      leftUnknown: (operationId) => void created.unknowns.push(operationId),
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

  /** Everything the checks made, undone where a route allows; `failures`: each step that failed. */
  async function cleanup() {
    const failures = [];
    /** One step: an answer outside `accepted` (or none) is a failure, said with what it was. */
    const step = async (what, method, path, token, body, accepted = [200, 201, 204, 404, 410]) => {
      try {
        const res = await client.call(method, path, token, body);
        if (!accepted.includes(res.status))
          failures.push({ step: what, status: res.status, detail: res.text.slice(0, 200) });
        return res;
      } catch (error) {
        failures.push({ step: what, detail: error.message });
        return null;
      }
    };
    const first = created.tenants[0];
    // Unknown outcomes first (keyless writes nobody else can settle): those the checks named and
    // those the tenant lists; a person's verdict, as the suite's test upstream recorded it.
    for (const t of created.tenants) {
      const listed = await step(
        "list unknown outcomes",
        "GET",
        "/v1/unknown-outcomes?limit=500",
        t.key,
        undefined,
        [200],
      );
      const ids = new Set(t === first ? created.unknowns : []);
      for (const op of listed?.body?.operations ?? []) ids.add(op.operation_id);
      for (const id of ids) {
        const op = await step(`read operation ${id}`, "GET", `/v1/operations/${id}`, t.key);
        if (op?.body?.phase !== "outcome_unknown") continue;
        await step(`resolve operation ${id}`, "POST", `/v1/operations/${id}/resolve`, t.key, {
          outcome: "succeeded",
          reason:
            "toolgate conformance cleanup: a test call to the suite's own test upstream, which committed it",
        });
      }
    }
    for (const run of created.runs)
      await step(`cancel run ${run}`, "POST", `/v1/runs/${run}/cancel`, first.key);
    for (const tool of created.tools)
      await step(`delete tool ${tool}`, "DELETE", `/v1/tools/${tool}`, first.key);
    for (const secret of created.secrets)
      await step(`delete secret ${secret}`, "DELETE", `/v1/secrets/${secret}`, first.key);
    // Last: each key (broad scopes) revoked; one that was not is the failure that matters most.
    for (const t of created.tenants)
      await step(
        `revoke key ${t.keyId} of tenant ${t.tenantId}`,
        "DELETE",
        `/v1/admin/tenants/${t.tenantId}/keys/${t.keyId}`,
        adminToken,
      );
    return { failures };
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
