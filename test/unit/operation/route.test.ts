// A routed approval (issue 35) in the awaiting_approval arm, as tables: who may vote, quorum of
// distinct people besides the proposer, a delegate's vote as its delegator's, any entitled reject
// rejects, and the alarm that reminds once, escalates once and never approves.
import { describe, expect, it } from "vitest";
import {
  transition,
  type Decision,
  type OperationPlan,
  type OperationState,
} from "../../../src/domain/operation/index.ts";
import { hasAttribute } from "../../../src/domain/operation/route.ts";
import { plan as basePlan } from "./fixtures.ts";

const T = 100_000;
const route = {
  quorum: 2,
  steps: [
    {
      group: { name: "finance", scopes: ["approvals:finance"], members: ["carol"] },
      remindAfterMs: 10_000,
      escalateAfterMs: 20_000,
    },
    {
      group: { name: "leads", scopes: [], members: ["dave"] },
      remindAfterMs: 5_000,
      escalateAfterMs: null,
    },
  ],
};
const plan: OperationPlan = {
  ...basePlan("keyed"),
  approval: {
    inputHash: "h1",
    toolVersion: "v1",
    requestedBy: "alice",
    fourEyes: true,
    expiresAtMs: T + 60_000,
    preview: false,
    route,
  },
};
const decision = (approverId: string, over: Partial<Decision> = {}): Decision => ({
  verdict: "approve",
  approverId,
  via: "api_key",
  reason: null,
  inputHash: null,
  toolVersion: null,
  scopes: ["approvals:decide", "approvals:finance"],
  ...over,
});
const decide = (state: OperationState, d: Decision, nowMs = T + 1_000) =>
  transition(state, { type: "decide", decision: d, denial: null }, plan, nowMs);
const alarm = (state: OperationState, nowMs: number) =>
  transition(state, { type: "alarm", inFlight: false }, plan, nowMs);
const started = () => {
  const step = transition(
    null,
    { type: "start", inputHash: "h1", callId: "c", tool: "refund" },
    plan,
    T,
  );
  if (!step.ok) throw new Error("start refused");
  return step.value;
};
const after = (state: OperationState, ...ds: Decision[]) =>
  ds.reduce((s, d) => {
    const step = decide(s, d);
    if (!step.ok) throw new Error(step.error.code);
    return step.value.state;
  }, state);

describe("routed approval: votes and quorum", () => {
  it("start: routing begins at step 0, the alarm at the first reminder (before the expiry)", () => {
    const step = started();
    expect(step.state).toEqual({
      phase: "awaiting_approval",
      requestedAtMs: T,
      routing: { step: 0, stepAtMs: T, reminded: false, votes: [] },
    });
    expect(step.effects[0]).toEqual({ kind: "set_alarm", atMs: T + 10_000 });
  });

  it.each([
    // [what, decisions before, the decision, its result: phase | error code, votes after]
    ["one eligible vote: still waiting, counted", [], decision("bob"), "awaiting_approval", 1],
    [
      "second distinct vote: quorum → executing",
      [decision("bob")],
      decision("erin"),
      "executing",
      2,
    ],
    ["same person twice: counted once", [decision("bob")], decision("bob"), "awaiting_approval", 1],
    ["the proposer's vote: refused", [], decision("alice"), "self_approval", 0],
    [
      "the proposer's vote cast by a delegate: refused",
      [],
      decision("bob", { onBehalfOf: { id: "alice", scopes: ["approvals:finance"] } }),
      "self_approval",
      0,
    ],
    [
      "a key outside every group reached: refused",
      [],
      decision("mallory", { scopes: ["approvals:decide"] }),
      "not_an_approver",
      0,
    ],
    [
      "a member of a group not reached yet: refused",
      [],
      decision("dave", { scopes: [] }),
      "not_an_approver",
      0,
    ],
    [
      "a listed member without the scope: counted",
      [],
      decision("carol", { scopes: [] }),
      "awaiting_approval",
      1,
    ],
    [
      "a delegate's vote is its delegator's (judged by the delegator's scopes)",
      [decision("bob")],
      decision("zed", { scopes: [], onBehalfOf: { id: "erin", scopes: ["approvals:finance"] } }),
      "executing",
      2,
    ],
    [
      "a delegate voting for someone who already voted: counted once",
      [decision("bob")],
      decision("zed", { scopes: [], onBehalfOf: { id: "bob", scopes: ["approvals:finance"] } }),
      "awaiting_approval",
      1,
    ],
    [
      "one person pressing twice in two capacities: counted once",
      [decision("bob")],
      decision("bob", { onBehalfOf: { id: "erin", scopes: ["approvals:finance"] } }),
      "awaiting_approval",
      1,
    ],
    [
      "one eligible reject rejects at once",
      [decision("bob")],
      decision("erin", { verdict: "reject", reason: "no" }),
      "recorded",
      1,
    ],
  ] as const)("%s", (_what, before, d, expected, votes) => {
    const state = after(started().state, ...before);
    const step = decide(state, d);
    if (!step.ok) {
      expect(step.error.code).toBe(expected);
      return;
    }
    expect(step.value.state.phase).toBe(expected);
    const counted =
      step.value.state.phase === "awaiting_approval" ? step.value.state.routing!.votes : null;
    if (counted) expect(counted).toHaveLength(votes);
    if (expected === "executing") {
      expect(step.value.effects).toContainEqual({ kind: "route", what: "quorum_reached" });
      expect(step.value.trace.map((t) => t.type)).toEqual(
        expect.arrayContaining(["approval_voted", "approval_decided"]),
      );
    }
  });

  it("a delegated vote is recorded as the delegator's, cast by the delegate", () => {
    const d = decision("zed", {
      scopes: [],
      onBehalfOf: { id: "erin", scopes: ["approvals:finance"] },
    });
    const step = decide(started().state, d);
    expect(step.ok && step.value.trace).toEqual([
      {
        type: "approval_voted",
        at_ms: T + 1_000,
        by: "erin",
        cast_by: "zed",
        via: "api_key",
        votes: 1,
        quorum: 2,
      },
    ]);
    expect(step.ok && step.value.effects).toEqual([{ kind: "route", what: "voted" }]);
  });
});

describe("routed approval: the alarm reminds, escalates, never approves", () => {
  it.each([
    // [what, alarm at, phase after, step after, reminded, route effects]
    ["early: nothing, re-armed at the reminder", T + 9_999, "awaiting_approval", 0, false, []],
    ["reminder due: reminded once", T + 10_000, "awaiting_approval", 0, true, ["reminded"]],
    // After a kill the alarm comes late, past both: one reminder, one escalation, in one step.
    [
      "late past both: reminded and escalated",
      T + 25_000,
      "awaiting_approval",
      1,
      false,
      ["reminded", "escalated"],
    ],
    ["at expiry: expired, not approved", T + 60_000, "recorded", null, null, []],
  ] as const)("%s", (_what, nowMs, phase, stepAfter, reminded, whats) => {
    const step = alarm(started().state, nowMs);
    expect(step.ok).toBe(true);
    if (!step.ok) return;
    expect(step.value.state.phase).toBe(phase);
    if (step.value.state.phase === "awaiting_approval") {
      expect(step.value.state.routing!.step).toBe(stepAfter);
      expect(step.value.state.routing!.reminded).toBe(reminded);
    } else
      expect(
        step.value.state.phase === "recorded" &&
          "code" in step.value.state.outcome &&
          step.value.state.outcome.code,
      ).toBe("approval_expired");
    expect(
      step.value.effects.filter((e) => e.kind === "route").map((e) => e.kind === "route" && e.what),
    ).toEqual(whats);
  });

  it("the same alarm again changes nothing (at-least-once); the last step waits for the expiry", () => {
    const first = alarm(started().state, T + 25_000);
    if (!first.ok) throw new Error("refused");
    const again = alarm(first.value.state, T + 25_000);
    expect(again.ok && again.value.changed).toBe(false);
    // The last group's reminder, then nothing until the expiry: never an approval by itself.
    const reminded = alarm(first.value.state, T + 30_000);
    if (!reminded.ok) throw new Error("refused");
    expect(reminded.value.trace.map((t) => t.type)).toEqual(["approval_reminded"]);
    expect(reminded.value.effects[0]).toEqual({ kind: "set_alarm", atMs: T + 60_000 });
    const quiet = alarm(reminded.value.state, T + 59_999);
    expect(quiet.ok && quiet.value.state.phase).toBe("awaiting_approval");
    expect(quiet.ok && quiet.value.changed).toBe(false);
  });

  it("after escalation the next group may vote and earlier groups keep theirs", () => {
    const escalated = alarm(started().state, T + 25_000);
    if (!escalated.ok) throw new Error("refused");
    const withBob = after(escalated.value.state, decision("bob"));
    const step = decide(withBob, decision("dave", { scopes: [] }), T + 26_000);
    expect(step.ok && step.value.state.phase).toBe("executing");
  });
});

describe("a group by attribute (hasAttribute): only a person Access verified, their own vote", () => {
  const group = {
    name: "finance",
    scopes: [],
    members: [],
    claims: { groups: ["finance"], "custom.dept": ["treasury"] },
    email_domains: ["Fin.Example.com"],
  };
  const access = (claims: Record<string, string[]>, over: Partial<Decision> = {}) =>
    decision("someone", { via: "access", claims, ...over });
  const rows: Array<[string, Decision, boolean]> = [
    ["groups claim holds the value", access({ groups: ["staff", "finance"] }), true],
    ["custom claim holds the value", access({ "custom.dept": ["treasury"] }), true],
    ["the value under another claim name", access({ dept: ["treasury"] }), false],
    ["another group", access({ groups: ["sales"] }), false],
    ["email domain, any case", access({ email: ["Bo@fin.example.COM"] }), true],
    ["a subdomain is another domain", access({ email: ["bo@x.fin.example.com"] }), false],
    [
      "claims without Access (a key)",
      decision("k", { via: "api_key", claims: { groups: ["finance"] } }),
      false,
    ],
    [
      "a delegated vote: the delegate's attributes are not the delegator's",
      access({ groups: ["finance"] }, { onBehalfOf: { id: "dana", scopes: [] } }),
      false,
    ],
    ["no claims", decision("someone", { via: "access" }), false],
  ];
  it.each(rows)("%s", (_name, d, expected) => {
    expect(hasAttribute(group, d)).toBe(expected);
  });
  it("a plan frozen before attribute groups (no claims, no domains) matches no attribute", () => {
    const old = { name: "old", scopes: [], members: ["carol"] };
    expect(hasAttribute(old, access({ groups: ["finance"], email: ["a@fin.example.com"] }))).toBe(
      false,
    );
  });
});
