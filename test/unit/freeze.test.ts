// domain/freeze.ts `frozenBy`, the one decision every send point asks: each scope matches only its
// own calls, writes_only lets reads through, an expired freeze never applies, refuse wins over hold
// (then the oldest), and no freeze is no answer. Also freezeOf's refusal of a past expiry.
import { describe, expect, it } from "vitest";
import {
  frozenBy,
  freezeOf,
  nextExpiryMs,
  type Freeze,
  type FreezeCall,
} from "../../src/domain/freeze.ts";

const NOW = 1_000_000;
const call: FreezeCall = {
  tool: "refund",
  origin: "https://pay.example.com",
  user: "u1",
  run: "run_1",
  write: true,
};
const freeze = (id: string, scope: Freeze["scope"], over: Partial<Freeze> = {}): Freeze => ({
  id,
  scope,
  writes_only: false,
  mode: "hold",
  reason: "r",
  expires_at_ms: null,
  created_at_ms: NOW - 10,
  created_by: "ops",
  ...over,
});

describe("frozenBy", () => {
  it.each([
    ["tenant", { tenant: true }, {}, true],
    ["tool: this one", { tool: "refund" }, {}, true],
    ["tool: another", { tool: "charge" }, {}, false],
    ["origin: this one", { origin: "https://pay.example.com" }, {}, true],
    ["origin: another port", { origin: "https://pay.example.com:8443" }, {}, false],
    ["origin: none could be built", { origin: "https://pay.example.com" }, { origin: null }, false],
    ["user: this one", { user: "u1" }, {}, true],
    ["user: another", { user: "u2" }, {}, false],
    ["run: this one", { run: "run_1" }, {}, true],
    ["run: another", { run: "run_2" }, {}, false],
  ] as const)("scope %s → applies: %s", (_name, scope, over, applies) => {
    const f = freeze("fz_1", scope as Freeze["scope"]);
    expect(frozenBy([f], { ...call, ...over }, NOW)).toBe(applies ? f : null);
  });

  it("writes_only: a write is frozen, a read goes through", () => {
    const f = freeze("fz_1", { tool: "refund" }, { writes_only: true });
    expect(frozenBy([f], call, NOW)).toBe(f);
    expect(frozenBy([f], { ...call, write: false }, NOW)).toBeNull();
    // Without writes_only, reads are frozen too.
    const all = freeze("fz_2", { tool: "refund" });
    expect(frozenBy([all], { ...call, write: false }, NOW)).toBe(all);
  });

  it("expiry: applies until expires_at, never at or after it", () => {
    const f = freeze("fz_1", { tenant: true }, { expires_at_ms: NOW + 1 });
    expect(frozenBy([f], call, NOW)).toBe(f);
    expect(frozenBy([f], call, NOW + 1)).toBeNull();
    expect(frozenBy([f], call, NOW + 60_000)).toBeNull();
    expect(nextExpiryMs([f, freeze("fz_2", { tenant: true })], NOW)).toBe(NOW + 1);
    expect(nextExpiryMs([f], NOW + 1)).toBeNull();
  });

  it("refuse wins over hold whatever the order; among equals the oldest", () => {
    const hold = freeze("fz_h", { tool: "refund" }, { created_at_ms: NOW - 100 });
    const refuse = freeze("fz_r", { user: "u1" }, { mode: "refuse", created_at_ms: NOW - 1 });
    expect(frozenBy([hold, refuse], call, NOW)).toBe(refuse);
    expect(frozenBy([refuse, hold], call, NOW)).toBe(refuse);
    const older = freeze("fz_old", { tenant: true }, { created_at_ms: NOW - 500 });
    expect(frozenBy([hold, older], call, NOW)).toBe(older);
    // An expired refuse does not beat a live hold.
    const gone = { ...refuse, expires_at_ms: NOW - 1 };
    expect(frozenBy([gone, hold], call, NOW)).toBe(hold);
  });

  it("no freezes: null", () => {
    expect(frozenBy([], call, NOW)).toBeNull();
  });

  it("freezeOf: an expires_at not in the future is refused (freeze_expired); otherwise stored with defaults", () => {
    const body = { scope: { tenant: true as const }, mode: "hold" as const, reason: "r" };
    expect(
      freezeOf("fz_1", { ...body, expires_at: new Date(NOW).toISOString() }, "ops", NOW),
    ).toMatchObject({ ok: false, error: { code: "freeze_expired" } });
    expect(freezeOf("fz_1", body, "ops", NOW)).toEqual({
      ok: true,
      value: {
        id: "fz_1",
        scope: { tenant: true },
        writes_only: false,
        mode: "hold",
        reason: "r",
        expires_at_ms: null,
        created_at_ms: NOW,
        created_by: "ops",
      },
    });
  });
});
