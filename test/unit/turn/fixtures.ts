// Builders shared by the turn's unit tables: a compiled charge tool with its manifest, a run, the
// key secret, and `frozen`, which gates and freezes calls as the RunObject does at admission.
import type { RunState, TurnCall } from "../../../src/domain/turn/turn.ts";
import { freezeTurn, gateTurn } from "../../../src/domain/turn/admit.ts";
import type { Usage } from "../../../src/domain/turn/budget.ts";
import { compileManifest } from "../../../src/tools/manifest/compile.ts";

export const manifestOf = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: "Charge.",
  input_schema: {
    type: "object",
    additionalProperties: false,
    properties: { amount: { type: "number" } },
    required: ["amount"],
  },
  risk: "write",
  request: { method: "POST", url: "http://127.0.0.1:1/charges" },
  idempotency: { mode: "header" },
  ...extra,
});
export const compile = (manifest: unknown) => {
  const compiled = compileManifest(manifest, { allowlist: [], allowLoopback: true });
  if (!compiled.ok) throw new Error(compiled.error.detail);
  return compiled.value;
};
export const chargeManifest = manifestOf("charge", { requires_scopes: ["pay"], cost: 2 });
export const offered = new Map([["charge", compile(chargeManifest)]]);
export const run = (over: Partial<RunState> = {}): RunState => ({
  runId: "run_1",
  tenantId: "t_1",
  user: { id: "u", scopes: ["pay"] },
  tools: { charge: { kind: "manifest", manifest: chargeManifest } },
  toolsHash: "h",
  context: {},
  budgets: {},
  createdAtMs: 0,
  expiresAtMs: 1e12,
  cancelledAtMs: null,
  ...over,
});
export const usage0: Usage = { turns: 0, toolCalls: 0, cost: 0 };
export const KEY_SECRET = new Uint8Array(32).fill(7);
export const call = (id: string, amount: number, name = "charge") => ({
  id,
  name,
  arguments: { amount },
});

export async function frozen(
  r: RunState,
  calls: Array<ReturnType<typeof call>>,
  registered: string[] = [],
) {
  return freezeTurn(r, gateTurn(r, offered, calls), new Set(registered), KEY_SECRET);
}
export const shape = (calls: TurnCall[]) =>
  calls.map((c) =>
    "fixed" in c ? `${c.fixed.status}/${"code" in c.fixed ? c.fixed.code : ""}` : "submit",
  );
