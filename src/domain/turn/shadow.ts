// A shadow run's admission rules (issue 22, DESIGN "Shadow runs and undo"), pure: a write whose
// tool declares no sandbox is refused before anything is frozen; the writes it admits claim limits
// across runs in a separate shadow ledger (limit objects of their own, so a week of shadow traffic
// never eats a live run's allowance, nor a live run's reservations a shadow run's); and its
// operations have ids of their own (identity.ts), so a shadow call never joins a live operation
// with the same business key, nor a live call a shadow one.
import type { LimitClaim } from "../limit/window.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { RunState } from "./turn.ts";

export const isShadow = (run: RunState): boolean => run.mode === "shadow";

/** A limit name no manifest can declare (names are letters, digits, _ and -): the shadow ledger's. */
export const SHADOW_LEDGER_PREFIX = "shadow:";

export function shadowRefusal(
  run: RunState,
  spec: ToolSpec,
): { code: "shadow_unsupported"; message: string } | null {
  if (!isShadow(run) || spec.risk === "read" || spec.sandbox !== null) return null;
  return {
    code: "shadow_unsupported",
    message: `This conversation is a trial run: "${spec.name}" changes things and has no sandbox, so it was not performed and will not be. Do not retry; tell the user this action is not available in the trial.`,
  };
}

export const shadowClaims = (run: RunState, claims: LimitClaim[]): LimitClaim[] =>
  isShadow(run)
    ? claims.map((claim) => ({ ...claim, name: `${SHADOW_LEDGER_PREFIX}${claim.name}` }))
    : claims;
