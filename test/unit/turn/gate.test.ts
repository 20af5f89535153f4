// domain/turn/gate.ts: mayExecute, asked before each retry, uses the gate's own checks.
import { describe, expect, it } from "vitest";
import type { RunState } from "../../../src/domain/turn/turn.ts";
import { admitCall, mayExecute } from "../../../src/domain/turn/gate.ts";
import { offered, run } from "./fixtures.ts";

describe("mayExecute uses the gate's checks", () => {
  type Row = [string, RunState | null, string, number, string];
  const rows: Row[] = [
    ["allowed", run(), "charge", 0, "ok"],
    ["run gone", null, "charge", 0, "cancelled"],
    ["run cancelled", run({ cancelledAtMs: 1 }), "charge", 0, "cancelled"],
    ["deadline passed", run({ budgets: { max_duration_ms: 10 } }), "charge", 10, "deadline"],
    ["tool withdrawn", run(), "other", 0, "tool_not_allowed"],
    ["scope revoked", run({ user: { id: "u", scopes: [] } }), "charge", 0, "forbidden"],
  ];
  it.each(rows)("%s → %s", (_what, r, tool, nowMs, expected) => {
    const verdict = mayExecute(r, offered, tool, nowMs);
    expect(verdict.ok ? "ok" : verdict.error.code).toBe(expected);
  });

  it("agrees with the gate on offered tools and scopes, case by case", () => {
    for (const scopes of [[], ["pay"], ["pay", "other"], ["other"]]) {
      for (const tool of ["charge", "other"]) {
        const gate = admitCall(
          { id: "c", name: tool, arguments: { amount: 1 } },
          offered,
          {},
          scopes,
        );
        const retry = mayExecute(run({ user: { id: "u", scopes } }), offered, tool, 0);
        expect(retry.ok ? "ok" : retry.error.code).toBe(gate.ok ? "ok" : gate.error.code);
      }
    }
  });
});
