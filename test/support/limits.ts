// A refund tool with one limit across runs per customer (issue 21), shared by the limit tests:
// 1,000 per customer per 24 h on the sum of `amount` unless `limit` says otherwise (a name given
// there is shared by every tool that names it).
import { manifest, unique } from "./api.ts";

export function refundTool(url: string, limit: Record<string, unknown> = {}, extra = {}) {
  const limitName = (limit.name as string | undefined) ?? unique("refunds_per_customer_day");
  return {
    limitName,
    tool: manifest({
      url,
      description: "Refund the customer.",
      input_schema: {
        type: "object",
        additionalProperties: false,
        properties: { amount: { type: "integer", minimum: 1 }, customer_id: { type: "string" } },
        required: ["amount", "customer_id"],
      },
      output_schema: { type: "object" },
      request: { method: "POST", url: `${url}/refunds` },
      bind: { customer_id: "context.customer_id" },
      limits_across_runs: [
        {
          name: limitName,
          subject: "context.customer_id",
          window: "24h",
          sum: "amount",
          max: 1000,
          ...limit,
        },
      ],
      ...extra,
    }),
  };
}
