// Helpers for the undo attack tests (test/integration/undo-attacks.test.ts): a shop of a refund tool
// and a charge tool that declares it as its compensation, and counters over the refund upstream.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { expect } from "vitest";
import type { Env } from "../../src/durable/env.ts";
import { placedStub } from "../../src/durable/placement.ts";
import { api, manifest, testTenant, unique, upstream } from "./api.ts";

export const REFUND_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    charge_id: { type: "string", minLength: 1 },
    amount: { type: "integer", exclusiveMinimum: 0 },
    reason: { enum: ["requested_by_customer", "duplicate"] },
  },
  required: ["charge_id", "amount", "reason"],
};
export const UNDO = {
  charge_id: "{result.id}",
  amount: "{input.amount}",
  reason: "requested_by_customer",
};

export type Up = ReturnType<typeof upstream>;
export type As = Record<string, string>;

export const refundTool = (url: string, extra: Record<string, unknown> = {}) =>
  manifest({
    url,
    name: unique("refund"),
    description: "Refund a charge.",
    input_schema: REFUND_SCHEMA,
    request: { method: "POST", url: `${url}/refunds` },
    timeout_ms: 300,
    ...extra,
  });

export const put = (tool: Record<string, unknown>, as: As = {}) =>
  api("PUT", `/v1/tools/${tool.name as string}`, tool, as);

export async function newRun(tools: string[], as: As = {}) {
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools }, as);
  expect(run.status, JSON.stringify(run.body)).toBe(201);
  return run.body.run_id as string;
}
export async function newRunWithToken(tools: string[], as: As = {}) {
  const run = await api("POST", "/v1/runs", { user: { id: "u1", scopes: [] }, tools }, as);
  expect(run.status, JSON.stringify(run.body)).toBe(201);
  return { runId: run.body.run_id as string, runToken: run.body.run_token as string };
}

/** A refund tool, a charge tool whose compensation is that refund, and a run offering the charge. */
export async function shop(
  opts: {
    refund?: Record<string, unknown>;
    undo?: Record<string, unknown>;
    as?: As;
    offerRefund?: boolean;
  } = {},
) {
  const as = opts.as ?? {};
  if (!as.Authorization) await testTenant();
  const up = upstream();
  const refund = refundTool(up.url, opts.refund);
  expect((await put(refund, as)).status).toBe(201);
  const charge = manifest({
    url: up.url,
    compensate: { tool: refund.name, arguments: UNDO, ...opts.undo },
  });
  const putCharge = await put(charge, as);
  expect(putCharge.status, JSON.stringify(putCharge.body)).toBe(201);
  const tools = [charge.name as string, ...(opts.offerRefund ? [refund.name as string] : [])];
  const { runId, runToken } = await newRunWithToken(tools, as);
  return { up, refund, charge, runId, runToken, as };
}

export async function charged(runId: string, name: string, amount: number, as: As = {}) {
  const res = await api(
    "POST",
    `/v1/runs/${runId}/turns?format=native`,
    { calls: [{ id: unique("c"), name, arguments: { amount, currency: "usd" } }] },
    { Prefer: "wait=5", ...as },
  );
  const result = res.body.results[0] as {
    operation_id: string;
    status: string;
    result?: { id: string };
  };
  expect(result.status).toBe("succeeded");
  return result;
}

export const compensate = (operationId: string, as: As = {}, wait = 0) =>
  api(
    "POST",
    `/v1/operations/${operationId}/compensate?wait=${wait}`,
    { reason: "customer asked" },
    as,
  );
export const cancelRollback = (runId: string, as: As = {}) =>
  api("POST", `/v1/runs/${runId}/cancel`, { rollback: true }, as);

export const runObject = (runId: string) => placedStub(env as unknown as Env, "RUNS", runId) as any;

export const refundsOf = async (up: Up) =>
  (await up.state()).effects.filter((e) => e.path.endsWith("/refunds"));
export const refundRequestsOf = async (up: Up) =>
  (await up.state()).requests.filter((r) => r.path.endsWith("/refunds"));

/** Drives the rollback's alarm until it no longer changes (each step waits for the previous one). */
export async function settleRollback(runId: string, as: As = {}) {
  let last = "";
  for (let i = 0; i < 10; i++) {
    await runDurableObjectAlarm(runObject(runId));
    const report = (await api("GET", `/v1/runs/${runId}`, undefined, as)).body.rollback;
    for (const step of report.steps)
      if (step.compensation_id)
        await api("GET", `/v1/operations/${step.compensation_id}?wait=5`, undefined, as);
    const now = JSON.stringify(report);
    if (now === last) return report;
    last = now;
  }
  return JSON.parse(last);
}
