// Standing grants in tests (issue 35): an irreversible refund tool a person approves by default
// (the customer bound from the run's context), a run for a customer, one call, and a grant posted
// and shown through the public API — shared by the grants, grant-chain and console tests.
import { expect } from "vitest";
import { api, manifest, turn, unique } from "./api.ts";

/** An irreversible refund (a person approves each by default), the customer bound from the run. */
export function refundTool(url: string, overrides: Record<string, unknown> = {}) {
  return manifest({
    url,
    risk: "irreversible_write",
    description: "Refund the customer.",
    input_schema: {
      type: "object",
      additionalProperties: false,
      properties: {
        amount: { type: "integer", minimum: 1 },
        customer_id: { type: "string" },
        order_id: { type: "string" },
      },
      required: ["amount", "customer_id"],
    },
    output_schema: { type: "object" },
    request: { method: "POST", url: `${url}/refunds` },
    bind: { customer_id: "context.customer_id" },
    ...overrides,
  });
}

export const as = (key?: string): Record<string, string> =>
  key ? { Authorization: `Bearer ${key}` } : {};
export async function registered(
  url: string,
  overrides: Record<string, unknown> = {},
  key?: string,
) {
  const tool = refundTool(url, overrides);
  expect((await api("PUT", `/v1/tools/${tool.name}`, tool, as(key))).status).toBe(201);
  return tool.name as string;
}
export async function newRun(tool: string, customer: string, key?: string) {
  const body = {
    user: { id: "u1", scopes: [] },
    tools: [tool],
    context: { customer_id: customer },
  };
  const run = await api("POST", "/v1/runs", body, as(key));
  expect(run.status).toBe(201);
  return run.body.run_id as string;
}
export const call = (tool: string, amount: number, id = unique("call"), extra = {}) => ({
  id,
  name: tool,
  arguments: { amount, ...extra },
});
/** One call in its own turn (as the tenant of `key`, else the default test tenant). */
export const one = async (runId: string, c: ReturnType<typeof call>, wait = 5, key?: string) =>
  key
    ? (
        await api(
          "POST",
          `/v1/runs/${runId}/turns?format=native`,
          { calls: [c] },
          { ...as(key), Prefer: `wait=${wait}` },
        )
      ).body.results[0]
    : (await turn(runId, [c], wait)).body.results[0];

export const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
/** A grant on `amount` (≤ 50 a call, ≤ 100 in all, an hour) for one customer, or "any". */
export const refundGrant = (
  tool: string,
  customer: string | "any",
  extra: Record<string, unknown> = {},
) => ({
  tools: [tool],
  subject: customer === "any" ? "any" : { "context.customer_id": customer },
  field: "amount",
  per_call_max: 50,
  total_max: 100,
  expires_at: inAnHour(),
  reason: "goodwill refunds",
  ...extra,
});
export const postGrant = (body: Record<string, unknown>, key?: string) =>
  api("POST", "/v1/grants", body, as(key));
export async function grant(body: Record<string, unknown>, key?: string) {
  const made = await postGrant(body, key);
  expect(made.status).toBe(201);
  return made.body.grant.id as string;
}
export const shown = async (id: string, key?: string) =>
  (await api("GET", `/v1/grants/${id}`, undefined, as(key))).body;
