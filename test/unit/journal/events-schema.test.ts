// The public events' contract (issue 32): every event type has its own data schema, published in the
// OpenAPI document, and an event whose data does not match its type is refused.
import { describe, expect, it } from "vitest";
import { EVENT_TYPES, ToolgateEvent } from "../../../src/domain/journal/events.ts";
import { openApiDocument } from "../../../src/http/openapi.ts";

describe("ToolgateEvent", () => {
  it("the OpenAPI document publishes one schema per event type, each with its data", () => {
    const doc = openApiDocument() as { components: { schemas: Record<string, unknown> } };
    const schema = doc.components.schemas.ToolgateEvent as {
      oneOf?: Array<{ properties: { type: { const: string }; data: { properties: object } } }>;
      anyOf?: Array<{ properties: { type: { const: string }; data: { properties: object } } }>;
    };
    const arms = schema.oneOf ?? schema.anyOf ?? [];
    expect(arms.map((arm) => arm.properties.type.const).sort()).toEqual([...EVENT_TYPES].sort());
    for (const arm of arms)
      expect(Object.keys(arm.properties.data.properties).length).toBeGreaterThan(0);
  });

  it("data that does not match its type is refused", () => {
    const envelope = {
      id: `evt_${"0".repeat(32)}`,
      at_ms: 1,
      tenant_id: "ten_1",
      run_id: null,
      operation_id: null,
      tool: null,
    };
    expect(
      ToolgateEvent.safeParse({ ...envelope, type: "webhook.test", data: { webhook_id: "w" } })
        .success,
    ).toBe(true);
    expect(
      ToolgateEvent.safeParse({ ...envelope, type: "endpoint.failing", data: { webhook_id: "w" } })
        .success,
    ).toBe(false);
    expect(ToolgateEvent.safeParse({ ...envelope, type: "no.such", data: {} }).success).toBe(false);
  });
});
