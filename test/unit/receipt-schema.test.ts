// The published receipt format (issue 37): docs/receipt.schema.json is exactly the schema toolgate
// serves in its OpenAPI components (regenerate it from SignedReceiptSchema when the format changes),
// what receiptPayload builds is what it describes, and which receipts are due after a chain.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { z } from "zod";
import {
  receiptPayload,
  ReceiptPayloadSchema,
  receiptsDue,
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
  const payload = await receiptPayload(facts, "compensation_linked", 2, "c".repeat(64), {
    kid: "kid",
    issuedAtMs: 4,
  });
  expect(ReceiptPayloadSchema.parse(payload)).toEqual(payload);
  expect(payload).toMatchObject({
    outcome: { status: "failed", code: "invalid_output", unknown: { settled_by: "person" } },
    compensation: { compensated_by: "op_2" },
    approvals: [{ kind: "decision", step_up: null, via: null }],
  });
  expect(payload.approvals[0]!.cast_by_hash).toMatch(/^[0-9a-f]{64}$/);
  // The settled receipt says what was known when it settled: no compensation yet.
  const settled = await receiptPayload(facts, "settled", 1, null, { kid: "kid", issuedAtMs: 4 });
  expect(settled.compensation.compensated_by).toBeNull();
});

it.each([
  { chain: [], link: null, due: ["settled"] },
  { chain: [], link: "op_u1", due: ["settled", "compensation_linked"] },
  { chain: [["settled", null]], link: null, due: [] },
  { chain: [["settled", null]], link: "op_u1", due: ["compensation_linked"] },
  {
    chain: [
      ["settled", null],
      ["compensation_linked", "op_u1"],
    ],
    link: "op_u1",
    due: [],
  },
  // A new generation after a failed compensation: linked anew, one more link.
  {
    chain: [
      ["settled", null],
      ["compensation_linked", "op_u1"],
    ],
    link: "op_u2",
    due: ["compensation_linked"],
  },
] as const)("receiptsDue($chain, $link) → $due", ({ chain, link, due }) => {
  const stored = chain.map(([kind, by]) => ({
    kind,
    compensation: { compensates: null, compensated_by: by },
  }));
  expect(receiptsDue(stored, link)).toEqual(due);
});

it("a routed approval: every counted vote, then the decision, each identity hashed", async () => {
  const voted = (by: string, atMs: number, votes: number) =>
    ({
      type: "approval_voted",
      at_ms: atMs,
      by,
      via: "access",
      votes,
      quorum: 2,
      hash: `v${votes}`,
    }) as const;
  const payload = await receiptPayload(
    {
      operationId: "op_1",
      tenantId: "ten_1",
      runId: "run_1",
      tool: "t",
      toolVersion: "a".repeat(64),
      inputHash: "b".repeat(64),
      idempotencyKey: "k",
      policyVersion: null,
      compensates: null,
      compensatedBy: null,
      events: [
        voted("ann", 1, 1),
        voted("bob", 2, 2),
        {
          type: "approval_decided",
          at_ms: 2,
          verdict: "approve",
          by: "bob",
          reason: null,
          step_up: "passkey",
        },
      ],
      recorded: {
        outcome: { status: "succeeded", result: {} },
        attempts: 1,
        recordedAtMs: 3,
        via: "attempt",
        late: false,
      },
    },
    "settled",
    1,
    null,
    { kid: "k", issuedAtMs: 4 },
  );
  expect(payload.approvals.map((a) => [a.kind, a.verdict, a.decided_at_ms, a.step_up])).toEqual([
    ["vote", "approve", 1, null],
    ["vote", "approve", 2, null],
    ["decision", "approve", 2, "passkey"],
  ]);
  expect(new Set(payload.approvals.map((a) => a.decider_hash)).size).toBe(2);
  expect(JSON.stringify(payload)).not.toMatch(/ann|bob/);
});
