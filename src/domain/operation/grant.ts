// The grant arm (issue 35 item 1): a call a standing grant approved whose grant was revoked or
// expired before its first send falls back to asking a person — nothing sent, never refused because
// of the grant. Only a call not yet sent lapses (awaiting its lock or a quota slot, or held unsent):
// a call already sent continues under its key (stopping it would not unsend it). What it waited
// with goes back (its lease, its quota place); after the approval it asks for them anew.
import { requestApproval } from "./approval.ts";
import { unchanged } from "./steps.ts";
import type { OperationEvent, OperationPlan, OperationState, Step } from "./state.ts";

export function onGrantLapsed(
  state: OperationState,
  event: Extract<OperationEvent, { type: "grant_lapsed" }>,
  plan: OperationPlan,
  nowMs: number,
): Step {
  if (!plan.approval || plan.grant?.id !== event.grantId) return unchanged(state);
  const giveBack = giveBackOf(state);
  if (giveBack === null) return unchanged(state);
  const asked = requestApproval(plan.approval, nowMs, [
    { type: "grant_lapsed", at_ms: nowMs, grant_id: event.grantId, reason: event.reason },
  ]);
  return { ...asked, effects: [...giveBack, ...asked.effects] };
}

/** What an unsent call gives back as it turns to a person (null: it is not an unsent call). */
function giveBackOf(state: OperationState): Step["effects"] | null {
  if (state.phase === "awaiting_lock") return [{ kind: "release_lock" }];
  if (state.phase === "awaiting_quota")
    return [{ kind: "release_lock" }, { kind: "release_quota" }];
  if (state.phase === "held" && state.resume.phase === "unsent") return [];
  return null;
}
