// Approval policy and the awaiting_approval arm of the state machine, as tables.
import { describe, expect, it } from "vitest";
import {
  approvalHashOf,
  needsApproval,
  type Decision,
} from "../../../src/domain/operation/index.ts";
import {
  transition,
  type OperationPlan,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import type { ApprovalRule } from "../../../src/tools/spec.ts";

const rule = (mode: ApprovalRule["mode"], when: ApprovalRule["when"] = null): ApprovalRule => ({
  mode,
  when,
  expiresInMs: 60_000,
  fourEyes: true,
});

describe("needsApproval", () => {
  it.each([
    ["always", rule("always"), { amount: 1 }, true],
    ["never", rule("never"), { amount: 1_000_000 }, false],
    ["gt below", rule("when", { amount: { gt: 100 } }), { amount: 100 }, false],
    ["gt above", rule("when", { amount: { gt: 100 } }), { amount: 100.01 }, true],
    ["gte", rule("when", { amount: { gte: 100 } }), { amount: 100 }, true],
    ["lt", rule("when", { amount: { lt: 0 } }), { amount: -1 }, true],
    ["eq", rule("when", { currency: { eq: "eur" } }), { currency: "eur" }, true],
    [
      "in (no match)",
      rule("when", { reason: { in: ["fraud", "other"] } }),
      { reason: "damaged" },
      false,
    ],
    [
      "any condition asks",
      rule("when", { amount: { gt: 100 }, currency: { eq: "eur" } }),
      { amount: 5, currency: "eur" },
      true,
    ],
    ["absent field asks (fail closed)", rule("when", { amount: { gt: 100 } }), {}, true],
    [
      "non-number for a numeric rule asks",
      rule("when", { amount: { gt: 100 } }),
      { amount: "5" },
      true,
    ],
  ] as const)("%s", (_what, r, input, expected) => {
    expect(needsApproval(r, input as Record<string, unknown>)).toBe(expected);
  });
});

describe("awaiting_approval", () => {
  const T = 100_000;
  const plan: OperationPlan = {
    operationId: "op_a",
    idempotencyKey: "tg_a",
    safety: "keyed",
    timeoutMs: 2_000,
    hasLookup: false,
    settleMs: 2_000,
    resource: null,
    retry: {
      maxAttempts: 3,
      minDelayMs: 0,
      initialDelayMs: 1_000,
      maxDelayMs: 10_000,
      maxElapsedMs: 60_000,
    },
    approval: {
      inputHash: "h1",
      toolVersion: "v1",
      requestedBy: "alice",
      fourEyes: true,
      expiresAtMs: T + 60_000,
      preview: false,
    },
  };
  const waiting: OperationState = { phase: "awaiting_approval", requestedAtMs: T };
  const decision = (over: Partial<Decision> = {}): Decision => ({
    verdict: "approve",
    approverId: "bob",
    via: "api_key",
    reason: null,
    inputHash: null,
    toolVersion: null,
    ...over,
  });
  const at = (
    state: OperationState | null,
    event: Parameters<typeof transition>[1],
    nowMs = T + 1_000,
  ) => transition(state, event, plan, nowMs);

  it("start asks a person: nothing is sent, the expiry alarm is set, the inbox opened", () => {
    const step = at(null, { type: "start", inputHash: "h1", callId: "c", tool: "refund" }, T);
    expect(step.ok && step.value.state).toEqual(waiting);
    expect(step.ok && step.value.effects).toEqual([
      { kind: "set_alarm", atMs: T + 60_000 },
      { kind: "inbox", state: "pending" },
    ]);
  });

  it.each([
    [
      "approve → attempt 1",
      { type: "decide", decision: decision(), denial: null },
      T + 1_000,
      "executing",
      null,
    ],
    [
      "approve after expiry → approval_expired",
      { type: "decide", decision: decision(), denial: null },
      T + 60_000,
      "recorded",
      "approval_expired",
    ],
    [
      "reject → approval_rejected",
      { type: "decide", decision: decision({ verdict: "reject", reason: "no" }), denial: null },
      T + 1_000,
      "recorded",
      "approval_rejected",
    ],
    [
      "approve, but the run refuses → that refusal",
      {
        type: "decide",
        decision: decision(),
        denial: { status: "rejected", code: "forbidden", message: "m" },
      },
      T + 1_000,
      "recorded",
      "forbidden",
    ],
    [
      "alarm before expiry (early, at-least-once) → still waiting",
      { type: "alarm", inFlight: false },
      T + 59_999,
      "awaiting_approval",
      null,
    ],
    [
      "alarm at expiry → approval_expired",
      { type: "alarm", inFlight: false },
      T + 60_000,
      "recorded",
      "approval_expired",
    ],
    ["cancel → cancelled", { type: "cancel", by: "k" }, T + 1_000, "recorded", "cancelled"],
    [
      "denied (run cancelled) → that refusal",
      { type: "denied", status: "cancelled", code: "cancelled", message: "m" },
      T + 1_000,
      "recorded",
      "cancelled",
    ],
  ] as const)("%s", (_what, event, nowMs, phase, code) => {
    const step = at(waiting, event as Parameters<typeof transition>[1], nowMs);
    expect(step.ok).toBe(true);
    if (!step.ok) return;
    expect(step.value.state.phase).toBe(phase);
    if (code)
      expect(
        step.value.state.phase === "recorded" &&
          "code" in step.value.state.outcome &&
          step.value.state.outcome.code,
      ).toBe(code);
    if (phase === "executing")
      expect(step.value.effects.map((e) => e.kind)).toEqual(["set_alarm", "send_attempt", "inbox"]);
    if (phase === "recorded")
      expect(step.value.effects.map((e) => e.kind)).toEqual(["clear_alarm", "inbox"]);
  });

  it.each([
    [
      "the requester cannot approve (four eyes)",
      decision({ approverId: "alice" }),
      "self_approval",
    ],
    ["a decision naming other arguments", decision({ inputHash: "h2" }), "approval_mismatch"],
    [
      "a decision naming another tool version",
      decision({ toolVersion: "v0" }),
      "approval_mismatch",
    ],
  ] as const)("%s → refused, nothing changes", (_what, d, code) => {
    const step = at(waiting, { type: "decide", decision: d, denial: null });
    expect(!step.ok && step.error.code).toBe(code);
  });

  describe("a payment's approval (x402, issue 37) binds to its own approval_hash", () => {
    const payment = { amount: "10000", asset: "0xa5", network: "eip155:84532", payTo: "0xb0" };
    const paid = { ...plan, approval: { ...plan.approval!, payment } };
    const hash = approvalHashOf(paid.approval);

    it("a plain approval's is its input hash; a payment's differs, and with any part of the requirement", () => {
      expect(approvalHashOf(plan.approval!)).toBe("h1");
      expect(hash).not.toBe("h1");
      for (const part of ["amount", "asset", "network", "payTo"] as const)
        expect(
          approvalHashOf({ inputHash: "h1", payment: { ...payment, [part]: "0x0" } }),
        ).not.toBe(hash);
      expect(approvalHashOf({ inputHash: "h2", payment })).not.toBe(hash);
    });

    it.each([
      [
        "the call's own approval (its approval_hash, the input hash) → refused",
        { approvalHash: "h1" },
        false,
      ],
      ["only the arguments (input_hash, no approval_hash) → refused", { inputHash: "h1" }, false],
      [
        "another payment's approval_hash → refused",
        { approvalHash: approvalHashOf({ inputHash: "h1", payment: { ...payment, amount: "1" } }) },
        false,
      ],
      [
        "its approval_hash with its input_hash → approved",
        { inputHash: "h1", approvalHash: hash },
        true,
      ],
      ["nothing → approved (a bare approve decides what is pending)", {}, true],
    ] as const)("a decision naming %s", (_what, over, approved) => {
      const step = transition(
        waiting,
        { type: "decide", decision: decision(over), denial: null },
        paid,
        T + 1_000,
      );
      if (approved) expect(step.ok && step.value.state.phase).toBe("executing");
      else
        expect(!step.ok && step.error).toMatchObject({
          code: "approval_mismatch",
          field: "approval_hash",
        });
    });
  });

  describe("edit-on-approve (issue 35 item 2)", () => {
    const edit = (over: Record<string, unknown> = {}) => ({
      type: "edit" as const,
      edit: {
        fromHash: "h1",
        inputHash: "h2",
        by: "bob",
        via: "api_key" as const,
        reason: "less",
        ...over,
      },
    });
    const editedPlan = {
      ...plan,
      approval: { ...plan.approval!, inputHash: "h2", editedBy: "bob" },
    };

    it("an edit of the version the person saw: still awaiting, nothing sent, the inbox refreshed, the edit traced", () => {
      const step = at(waiting, edit());
      expect(step.ok && step.value.state).toEqual(waiting);
      expect(step.ok && step.value.effects).toEqual([{ kind: "inbox", state: "pending" }]);
      expect(step.ok && step.value.trace).toEqual([
        {
          type: "approval_edited",
          at_ms: T + 1_000,
          by: "bob",
          via: "api_key",
          from_input_hash: "h1",
          input_hash: "h2",
          reason: "less",
        },
      ]);
    });

    it.each([
      [
        "a stale version (edited meanwhile)",
        waiting,
        edit({ fromHash: "h0" }),
        T + 1_000,
        "approval_mismatch",
      ],
      [
        "not awaiting approval",
        { phase: "awaiting_lock", requestedAtMs: T, blockedBy: null } as OperationState,
        edit(),
        T + 1_000,
        "not_awaiting_approval",
      ],
    ] as const)("%s → refused, nothing changes", (_what, state, event, nowMs, code) => {
      const step = at(state, event, nowMs);
      expect(!step.ok && step.error.code).toBe(code);
    });

    it("an edit at or after the expiry records approval_expired (an edit buys no time)", () => {
      const step = at(waiting, edit(), T + 60_000);
      expect(step.ok && step.value.state.phase).toBe("recorded");
    });

    it.each([
      [
        "the editor approving their own edit (four eyes)",
        decision({ approverId: "bob", inputHash: "h2" }),
        "self_approval",
      ],
      [
        "an approval of the version before the edit",
        decision({ approverId: "carol", inputHash: "h1" }),
        "approval_mismatch",
      ],
    ] as const)("%s → refused", (_what, d, code) => {
      const step = transition(
        waiting,
        { type: "decide", decision: d, denial: null },
        editedPlan,
        T + 1_000,
      );
      expect(!step.ok && step.error.code).toBe(code);
    });

    it("another person approving the edited hash → attempt 1; the editor may reject it", () => {
      const ok = transition(
        waiting,
        {
          type: "decide",
          decision: decision({ approverId: "carol", inputHash: "h2" }),
          denial: null,
        },
        editedPlan,
        T + 1_000,
      );
      expect(ok.ok && ok.value.state.phase).toBe("executing");
      const rejected = transition(
        waiting,
        {
          type: "decide",
          decision: decision({ approverId: "bob", verdict: "reject", reason: "no" }),
          denial: null,
        },
        editedPlan,
        T + 1_000,
      );
      expect(rejected.ok && rejected.value.state.phase).toBe("recorded");
    });

    it("without four eyes the editor approves their own edit", () => {
      const alone = { ...editedPlan, approval: { ...editedPlan.approval, fourEyes: false } };
      const step = transition(
        waiting,
        {
          type: "decide",
          decision: decision({ approverId: "bob", inputHash: "h2" }),
          denial: null,
        },
        alone,
        T + 1_000,
      );
      expect(step.ok && step.value.state.phase).toBe("executing");
    });
  });

  describe("passkey step-up (issue 35)", () => {
    const stepped = { ...plan, approval: { ...plan.approval!, stepUp: "passkey" as const } };
    const decide = (d: Decision) =>
      transition(waiting, { type: "decide", decision: d, denial: null }, stepped, T + 1_000);

    it.each([
      [
        "approve without a verified passkey → step_up_required",
        decision(),
        false,
        "step_up_required",
      ],
      ["approve with one → attempt 1", decision({ stepUp: "passkey" }), true, "executing"],
      [
        "reject needs none → approval_rejected",
        decision({ verdict: "reject", reason: "no" }),
        true,
        "recorded",
      ],
      [
        "a passkey does not excuse other arguments → approval_mismatch (input_hash)",
        decision({ stepUp: "passkey", inputHash: "h2" }),
        false,
        "approval_mismatch",
      ],
    ] as const)("%s", (_what, d, ok, outcome) => {
      const step = decide(d);
      expect(step.ok).toBe(ok);
      if (step.ok) expect(step.value.state.phase).toBe(outcome);
      else expect(step.error.code).toBe(outcome);
      if (!step.ok && step.error.code === "approval_mismatch")
        expect(step.error.field).toBe("input_hash");
    });

    it("the trace records the decider's verification and the step-up; the model reads the reason verbatim", () => {
      const approved = decide(
        decision({ via: "access", approverId: "bob@example.com", stepUp: "passkey" }),
      );
      expect(approved.ok && approved.value.trace[0]).toMatchObject({
        type: "approval_decided",
        by: "bob@example.com",
        via: "access",
        step_up: "passkey",
      });
      const words = ' "no" — not twice\n';
      const rejected = decide(decision({ verdict: "reject", reason: words }));
      expect(
        rejected.ok && rejected.value.state.phase === "recorded" && rejected.value.state.outcome,
      ).toMatchObject({ code: "approval_rejected", reason: words });
    });
  });

  it("a decision after the call left awaiting_approval is refused (the shell answers with the recorded one)", () => {
    const executing: OperationState = {
      phase: "executing",
      attempt: 1,
      keyIssuedAtMs: T,
      startedAtMs: T,
      firstAttemptAtMs: T,
      cancelRequested: false,
      mayHaveApplied: null,
    };
    const step = at(executing, { type: "decide", decision: decision(), denial: null });
    expect(!step.ok && step.error.code).toBe("not_awaiting_approval");
  });
});
