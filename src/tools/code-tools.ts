// Tools defined in code, offered to every tenant by name (a tenant manifest of the same name wins).
// create_shipment shows why code tools exist: its request needs logic (unit conversion, a body
// shape that is not the input) that a manifest template cannot express.
import { z } from "zod";
import { defineTool } from "./define.ts";
import type { ToolSpec } from "./spec.ts";

const createShipment = defineTool({
  name: "create_shipment",
  description:
    "Book a parcel shipment for one order with the demo carrier. Weight in kilograms. Returns the shipment id.",
  input: z.object({ order_id: z.string().min(1), weight_kg: z.number().positive().max(70) }),
  output: z.object({ id: z.string() }).loose(),
  risk: "write",
  idempotency: { mode: "header" },
  operationKey: ["order_id"],
  config: ["DEMO_UPSTREAM_URL"],
  request: (input, ctx) => {
    const base = ctx.config["DEMO_UPSTREAM_URL"];
    if (base === undefined) return { error: "DEMO_UPSTREAM_URL is not configured" };
    const body = JSON.stringify({
      order_id: input.order_id,
      weight_grams: Math.round(input.weight_kg * 1000),
    });
    return {
      method: "POST",
      url: `${base}/shipments`,
      headers: { "Content-Type": "application/json" },
      body,
    };
  },
});

export const CODE_TOOLS: Record<string, ToolSpec> = { [createShipment.name]: createShipment };
