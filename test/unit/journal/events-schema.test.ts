// The public events' contract (issue 32): every event type has its own data schema, published in the
// OpenAPI document, and an event whose data does not match its type is refused.
import { describe, expect, it } from "vitest";
import { EVENT_TYPES, EventMessage, ToolgateEvent } from "../../../src/domain/journal/events.ts";
import { openApiDocument } from "../../../src/http/openapi.ts";

const envelope = {
  id: `evt_${"0".repeat(32)}`,
  at_ms: 1,
  tenant_id: "ten_1",
  run_id: null,
  operation_id: null,
  tool: null,
};

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

describe("EventMessage (the EVENTS queue, parsed once by its consumer)", () => {
  const event = { ...envelope, type: "webhook.test", data: { webhook_id: "w" } };
  // Another version's data: the envelope is sound, the data not this version's.
  const written = { ...event, data: { written_by: "v-previous" } };
  const drop = { kind: "index_drop", tenant_id: "ten_1", operations: ["op_1"], runs: [] };

  it.each([
    ["an event", { kind: "event", event }, { kind: "event", event, typed: true }],
    ["another version's event, kept untyped", { kind: "event", event: written }, { typed: false }],
    [
      "a delivery retry",
      { kind: "delivery", endpoint_id: "e", event, attempt: 3, first_attempt_at_ms: 5 },
      { kind: "delivery", endpoint_id: "e", attempt: 3, first_attempt_at_ms: 5, typed: true },
    ],
    ["a delivery queued before issue 38", { kind: "delivery", endpoint_id: "e", event }, {}],
    ["an index retry", { kind: "index_retry", event: written }, { typed: false }],
    ["an index drop", drop, drop],
  ])("%s is read", (_, body, read) => {
    const parsed = EventMessage.safeParse(body);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toMatchObject(read);
  });

  it.each([
    ["null", null],
    ["an unknown kind", { kind: "other", event }],
    ["an event without an envelope", { kind: "event", event: { type: "webhook.test" } }],
    ["a delivery without its endpoint", { kind: "delivery", event }],
    ["a delivery with attempt 0", { kind: "delivery", endpoint_id: "e", event, attempt: 0 }],
    ["an index drop without its tenant", { ...drop, tenant_id: undefined }],
    ["an index drop with a non-string id", { ...drop, runs: [42] }],
    ["an index drop without its runs", { ...drop, runs: undefined }],
  ])("%s is malformed", (_, body) => {
    expect(EventMessage.safeParse(body).success).toBe(false);
  });
});
