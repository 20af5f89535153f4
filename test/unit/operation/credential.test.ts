// The awaiting_credential arm (issue 36): a send that found no usable token of the user sent
// nothing and gives its attempt back; connected, the same attempt (same number, same key) is sent;
// the recheck re-arms; a cancel or denial is decided as the retry it gave back (an earlier ambiguous
// attempt keeps its honesty). Given state S and event E at time T → state S', effects.
import { describe, expect, it } from "vitest";
import {
  CREDENTIAL_RECHECK_MS,
  CREDENTIAL_WAIT_MS,
} from "../../../src/domain/operation/credential.ts";
import { transition } from "../../../src/domain/operation/transition.ts";
import { stateAlarmAtMs, type OperationState } from "../../../src/domain/operation/index.ts";
import { envelopeFor } from "../../../src/domain/envelope.ts";
import { beforeSend, decodeState, encodeState, health } from "../../../src/domain/credential.ts";
import { executing, plan, step, T } from "./fixtures.ts";

const required = {
  type: "credential_required",
  attempt: 2,
  provider: "calendar",
  reason: "invalid_grant",
  connectUrl: "https://as.example/authorize?state=s",
} as const;
const waiting = step(executing(2), required).state;
const at = (
  nowMs: number,
  state: OperationState,
  event: Parameters<typeof transition>[1],
  p = plan("keyed"),
) => {
  const result = transition(state, event, p, nowMs);
  if (!result.ok) throw new Error(result.error.code);
  return result.value;
};

describe("awaiting_credential", () => {
  it("the attempt in flight that asked: waits, nothing sent, a recheck armed", () => {
    const s = step(executing(2), required);
    expect(s.state).toMatchObject({ phase: "awaiting_credential", attempt: 2, requestedAtMs: T });
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: T + CREDENTIAL_RECHECK_MS }]);
    expect(s.trace).toEqual([
      {
        type: "credential_required",
        at_ms: T,
        attempt: 2,
        provider: "calendar",
        reason: "invalid_grant",
      },
    ]);
    expect(stateAlarmAtMs(s.state, plan("keyed"), T)).toBe(T + CREDENTIAL_RECHECK_MS);
  });

  it("cancelled while the token was asked for: recorded cancelled, never left waiting", () => {
    const s = step(executing(2, true), required);
    expect(s.state).toMatchObject({ phase: "recorded", outcome: { status: "cancelled" } });
  });

  it("a late answer for another attempt changes nothing", () => {
    expect(step(executing(3), required).changed).toBe(false);
  });

  it("connected: the same attempt number is sent (the key never changes)", () => {
    const s = step(waiting, { type: "credential_ready" });
    expect(s.state).toMatchObject({ phase: "executing", attempt: 2 });
    expect(s.effects.map((e) => e.kind)).toEqual(["set_alarm", "send_attempt"]);
    expect(s.effects[1]).toEqual({ kind: "send_attempt", attempt: 2 });
    expect(step(executing(2), { type: "credential_ready" }).changed).toBe(false);
  });

  it("the recheck with no connection yet re-arms, sending nothing", () => {
    const s = step(waiting, { type: "alarm", inFlight: false });
    expect(s.state.phase).toBe("awaiting_credential");
    expect(s.effects).toEqual([{ kind: "set_alarm", atMs: T + CREDENTIAL_RECHECK_MS }]);
  });

  it("cancelled while waiting: recorded cancelled, nothing more sent; after an ambiguous attempt: unknown", () => {
    const s = step(waiting, { type: "cancel", by: "u" });
    expect(s.state).toMatchObject({ phase: "recorded", outcome: { status: "cancelled" } });
    expect(s.trace[0]).toMatchObject({ type: "cancel_requested", phase: "awaiting_credential" });
    const ambiguous = {
      ...waiting,
      mayHaveApplied: { atMs: 0, code: "timeout_unknown" },
    } as OperationState;
    expect(step(ambiguous, { type: "cancel", by: "u" }).state.phase).toBe("outcome_unknown");
  });

  it("a freeze's hold or a pause while waiting: held as the retry it gave back; released, the same attempt is sent", () => {
    const hold = { kind: "freeze", freezeId: "frz_1", reason: "incident" } as const;
    const held = step(waiting, { type: "hold", hold });
    expect(held.state).toMatchObject({
      phase: "held",
      resume: { phase: "retry_scheduled", attempt: 1 },
    });
    const released = step(held.state, { type: "release", of: "freeze", by: "ops" });
    expect(released.effects).toContainEqual({ kind: "send_attempt", attempt: 2 });
    expect(step(waiting, { type: "pause", by: "ops" }).state.phase).toBe("held");
  });

  it("the wait ends: at the approval's default bound, or sooner the run's deadline; an early alarm re-arms", () => {
    expect(waiting).toMatchObject({ expiresAtMs: T + CREDENTIAL_WAIT_MS });
    const deadline = { ...plan("keyed"), deadlineAtMs: T + 60_000 };
    const short = step(executing(2), required, deadline);
    expect(short.state).toMatchObject({ expiresAtMs: T + 60_000 });
    expect(short.effects).toEqual([{ kind: "set_alarm", atMs: T + 60_000 }]);
    const early = at(T + 59_000, short.state, { type: "alarm", inFlight: false }, deadline);
    expect(early.state.phase).toBe("awaiting_credential");
    expect(early.effects).toEqual([{ kind: "set_alarm", atMs: T + 60_000 }]);
  });

  it("nobody connected in time: recorded not sent (rejected / credential_required), with the attempts sent", () => {
    const end = T + CREDENTIAL_WAIT_MS;
    for (const event of [
      { type: "alarm", inFlight: false },
      { type: "credential_ready" },
    ] as const) {
      const s = at(end, waiting, event);
      expect(s.state).toMatchObject({
        phase: "recorded",
        attempts: 1,
        outcome: { status: "rejected", code: "credential_required" },
      });
      expect(s.trace[0]).toMatchObject({ type: "credential_expired", provider: "calendar" });
    }
    const ambiguous = {
      ...waiting,
      mayHaveApplied: { atMs: 0, code: "timeout_unknown" },
    } as OperationState;
    expect(at(end, ambiguous, { type: "alarm", inFlight: false }).state.phase).toBe(
      "outcome_unknown",
    );
  });

  it("the model reads pending / credential_required with the link to pass on", () => {
    expect(envelopeFor("op_1", waiting, "keyed")).toMatchObject({
      status: "pending",
      code: "credential_required",
      connect_url: required.connectUrl,
      allowed_next_actions: ["ask_user_to_connect", "wait", "tell_user"],
    });
  });
});

describe("a connection's worth (domain/credential.ts)", () => {
  const facts = { expiresAtMs: T + 3_600_000, scopes: ["a"], hasRefresh: true, dead: false };
  it.each([
    ["none", null, [], T, "needs_consent", "needs_consent"],
    ["fresh", facts, ["a"], T, "use", "connected"],
    ["a scope missing", facts, ["b"], T, "needs_consent", "needs_consent"],
    ["expired, refreshable", { ...facts, expiresAtMs: T + 1_000 }, [], T, "refresh", "connected"],
    [
      "expired, no refresh",
      { ...facts, expiresAtMs: T, hasRefresh: false },
      [],
      T,
      "needs_consent",
      "needs_consent",
    ],
    [
      "expiring, no refresh",
      { ...facts, expiresAtMs: T + 300_000, hasRefresh: false },
      [],
      T,
      "use",
      "expiring",
    ],
    ["dead", { ...facts, dead: true }, [], T, "needs_consent", "needs_consent"],
  ] as const)("%s", (_, f, wanted, now, send, seen) => {
    expect(beforeSend(f, [...wanted], now)).toBe(send);
    expect(health(f, [...wanted], now)).toBe(seen);
  });

  it("a state decodes to the coordinates it was made with; anything else is refused", () => {
    const state = encodeState(
      { tenantId: "ten_1", user: "u", provider: "cal", nonce: "n".repeat(43) },
      (t) => btoa(t),
    );
    expect(decodeState(state, (t) => atob(t))).toMatchObject({
      ok: true,
      value: { tenantId: "ten_1", user: "u", provider: "cal" },
    });
    for (const bad of ["", "x", "a.b", `${state}.more`, `${btoa("[1,2]")}.${"n".repeat(43)}`])
      expect(decodeState(bad, (t) => atob(t)).ok).toBe(false);
  });
});
