// Helpers for the Cedar policy-set tests (test/integration/cedar-*.test.ts): a tenant of its own
// with a refund tool (amount: integer, customer_id bound from the run's context), runs of it, one
// refund call per turn, and the policy set's routes.
import { expect } from "vitest";
import { ALL_SCOPES, api, manifest, newTenant, unique } from "./api.ts";

export const REFUND_INPUT = {
  type: "object",
  additionalProperties: false,
  properties: { amount: { type: "integer", minimum: 1 }, customer_id: { type: "string" } },
  required: ["amount", "customer_id"],
};

export async function tenantWithRefunds(url: string, extra: Record<string, unknown> = {}) {
  const { key, tenantId } = await newTenant(ALL_SCOPES);
  const as = { Authorization: `Bearer ${key}` };
  const tool = manifest({
    url,
    name: unique("refund"),
    description: "Refund the customer.",
    input_schema: REFUND_INPUT,
    output_schema: { type: "object" },
    request: { method: "POST", url: `${url}/refunds` },
    bind: { customer_id: "context.customer_id" },
    ...extra,
  });
  expect((await api("PUT", `/v1/tools/${tool.name as string}`, tool, as)).status).toBe(201);
  const name = tool.name as string;
  const run = async (attributes: Record<string, string> = {}, tools = [name]) => {
    const created = await api(
      "POST",
      "/v1/runs",
      {
        user: { id: unique("agent_user"), scopes: [], attributes },
        tools,
        context: { customer_id: "cus_1" },
      },
      as,
    );
    expect(created.status).toBe(201);
    return created.body.run_id as string;
  };
  /** One call of `tool` (the refund tool unless named) in a turn of its own; its result. */
  const call = async (runId: string, args: Record<string, unknown>, wait = 3, tool = name) =>
    (
      await api(
        "POST",
        `/v1/runs/${runId}/turns?format=native`,
        { calls: [{ id: unique("call"), name: tool, arguments: args }] },
        { ...as, Prefer: `wait=${wait}` },
      )
    ).body.results[0];
  const refund = (runId: string, amount: number, wait = 3) => call(runId, { amount }, wait);
  const putPolicies = (policies: string) => api("PUT", "/v1/policies", { policies }, as);
  return { tenantId, as, name, tool, run, call, refund, putPolicies };
}

export const seniorOnlyOver500 = (tool: string) => `
@id("allow-refunds")
permit (principal, action == Action::"${tool}", resource);

@id("big-refunds-need-senior")
forbid (principal, action == Action::"${tool}", resource)
when { context.arguments.amount > 500 }
unless { principal.hasTag("senior") };
`;
