// The published receipt format (issue 37): docs/receipt.schema.json is exactly the schema toolgate
// serves in its OpenAPI components (regenerate it from SignedReceiptSchema when the format changes),
// and what receiptPayload builds is what it describes.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { z } from "zod";
import {
  receiptPayload,
  ReceiptPayloadSchema,
  SignedReceiptSchema,
  type ReceiptFacts,
} from "../../src/domain/receipt.ts";

const DOCS = join(import.meta.dirname, "..", "..", "docs", "receipt.schema.json");

it("docs/receipt.schema.json is SignedReceiptSchema as JSON Schema", () => {
  const published = JSON.parse(readFileSync(DOCS, "utf8"));
  expect(published).toEqual(z.toJSONSchema(SignedReceiptSchema, { io: "output" }));
});

it("a payload receiptPayload builds reads as the schema says, every field present", async () => {
  const facts: ReceiptFacts = {
    operationId: "op_1",
    tenantId: "ten_1",
    runId: "run_1",
    tool: "charge_card",
    toolVersion: "a".repeat(64),
    inputHash: "b".repeat(64),
    idempotencyKey: "k",
    policyVersion: "v1",
    compensates: null,
    compensatedBy: "op_2",
    events: [
      { type: "outcome_unknown", at_ms: 2, code: "timeout_unknown", reconcile: "resend" },
      {
        type: "approval_decided",
        at_ms: 1,
        verdict: "approve",
        by: "bo",
        reason: null,
        cast_by: "al",
      },
    ],
    recorded: {
      outcome: { status: "failed", code: "invalid_output", message: "no" },
      attempts: 2,
      recordedAtMs: 3,
      via: "resolve",
      late: true,
    },
  };
  const payload = await receiptPayload(facts, "compensated", 2, "c".repeat(64), {
    kid: "kid",
    issuedAtMs: 4,
  });
  expect(ReceiptPayloadSchema.parse(payload)).toEqual(payload);
  expect(payload).toMatchObject({
    outcome: { status: "failed", code: "invalid_output", unknown: { settled_by: "person" } },
    compensation: { compensated_by: "op_2" },
    approvals: [{ step_up: null, via: null }],
  });
  expect(payload.approvals[0]!.cast_by_hash).toMatch(/^[0-9a-f]{64}$/);
  // The settled receipt says what was known when it settled: no compensation yet.
  const settled = await receiptPayload(facts, "settled", 1, null, { kid: "kid", issuedAtMs: 4 });
  expect(settled.compensation.compensated_by).toBeNull();
});
