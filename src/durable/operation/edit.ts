// Edit-on-approve (issue 35 item 2), the operation's side: a person's edited arguments for a call
// awaiting approval become a new frozen version of it, or nothing changes. In order, each refusal
// typed and leaving the operation as it was (still awaiting approval, its original hash): the pure
// arm's own checks first (awaiting, not expired, the version the person saw); the run's gate again
// (schema, bound and key fields, scopes, per-call limits: domain/turn/edit.ts); the tenant's Cedar
// set of the moment on the edited request; the reservations of limits across runs re-sized
// (limits.ts resizeClaims, put back on any later refusal). Then one transition writes the new
// version (its plan bound to the new hash and its editor) with the `approval_edited` event.
// Idempotency key: unchanged. An edit happens only before any attempt (nothing was ever sent under
// the key) and the approval binds to the edited hash, after which the version never changes again:
// the upstream sees exactly one body under the key.
import { editedCall } from "../../domain/turn/edit.ts";
import type { Decision, OperationEvent } from "../../domain/operation/index.ts";
import { transition } from "../../domain/operation/index.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { evaluatePolicies, policyRefusal, policyRequestFor } from "../../policies/evaluate.ts";
import { wouldSend } from "../../tools/shadow.ts";
import type { Env } from "../env.ts";
import { runStub, tenantStub } from "../stubs.ts";
import type { EditAdmitted } from "../run/contracts.ts";
import type { FrozenRow, Head, OperationError } from "./contracts.ts";
import { ask } from "./gather.ts";
import { resizeClaims } from "./limits.ts";
import { missing, proposedHash, type OperationLog } from "./log.ts";
import { decodeInput } from "../store/operation-rows.ts";

/** `edited`: a new version was written; `same`: the arguments are the ones it holds; `closed`: it expired. */
export type EditDone = "edited" | "same" | "closed";
type Apply = (event: OperationEvent, frozen: FrozenRow | null) => Result<unknown, OperationError>;

const UNASKED =
  "toolgate could not re-check the edited arguments just now; nothing was changed or sent. Try again shortly.";

export async function editCall(
  env: Env,
  log: OperationLog,
  apply: Apply,
  tenantId: string,
  decision: Decision,
  edited: Record<string, unknown>,
): Promise<Result<EditDone, OperationError>> {
  const head = log.headFor(tenantId);
  if (!head) return err(missing(log.store, tenantId));
  const { plan } = head.frozen;
  const nowMs = Date.now();
  const edit = {
    fromHash: decision.inputHash ?? "",
    inputHash: head.frozen.input_hash,
    by: decision.approverId,
    via: decision.via,
    reason: decision.reason,
  };
  // The arm's own checks before anything is asked (stale, not awaiting); an expiry is recorded.
  const dry = transition(head.state, { type: "edit", edit }, plan, nowMs);
  if (!dry.ok) return dry;
  // x402 (issue 37): the 402's requirement and its reservations answer these arguments; an edit
  // would leave them answering others. Approve or reject the paid call as it is.
  if (plan.payment)
    return err({
      code: "field_not_editable",
      field: "payment",
      detail:
        "An x402 payment was accepted for these arguments: approve or reject the call as it is. Nothing was changed.",
    });
  if (dry.value.state.phase !== "awaiting_approval") {
    apply({ type: "edit", edit }, null);
    return ok("closed");
  }
  const loaded = log.loadFixed();
  if (!loaded.ok) return err({ code: "invalid_tool", detail: loaded.error });
  const { spec, input: current } = loaded.value;
  const asked = await ask(() =>
    runStub(env, head.frozen.run_id).admitEdit(tenantId, spec.name, current.value, edited),
  );
  if (!asked.answered) return err({ code: "unavailable", detail: UNASKED });
  if (!asked.value.ok) return err(refusalOf(asked.value.error));
  const admitted = asked.value.value;
  if (admitted.input.hash === head.frozen.input_hash) return ok("same");
  const { user, context } = admitted.principal;
  const policyRequest = policyRequestFor(
    spec,
    admitted.input.value,
    user,
    head.frozen.run_id,
    context,
  );
  // The tenant's Cedar set of this moment on the edited request (the same function as every send).
  const checks = await ask(() => tenantStub(env, tenantId).sendChecks());
  if (!checks.answered) return err({ code: "unavailable", detail: UNASKED });
  const set = checks.value.policies;
  const cedar = set ? evaluatePolicies(set, policyRequest) : null;
  if (cedar?.decision === "deny")
    return err({ code: "policy_denied", detail: `${policyRefusal(cedar)} Nothing was changed.` });
  const claims = await ask(() =>
    resizeClaims(env, tenantId, head.frozen.id, plan.limits ?? [], admitted.claims),
  );
  if (!claims.answered) return err({ code: "unavailable", detail: UNASKED });
  if (claims.value.denied)
    return err({ code: "policy_denied", detail: `${claims.value.denied} Nothing was changed.` });
  const version = versionOf(head, spec, admitted, decision, nowMs, {
    policyRequest,
    limits: claims.value.held,
    cedar,
  });
  const applied = apply(
    { type: "edit", edit: { ...edit, inputHash: admitted.input.hash } },
    version,
  );
  if (!applied.ok) {
    // Decided or expired during the awaits: the reservations go back to what the plan holds.
    await ask(() =>
      resizeClaims(env, tenantId, head.frozen.id, claims.value.held, plan.limits ?? []),
    );
    return applied;
  }
  return ok("edited");
}

/** The new frozen version: the edited input, its plan bound to the new hash and its editor. */
function versionOf(
  head: Head,
  spec: Parameters<typeof policyRequestFor>[0] & Parameters<typeof wouldSend>[0],
  admitted: EditAdmitted,
  decision: Decision,
  nowMs: number,
  checked: {
    policyRequest: ReturnType<typeof policyRequestFor>;
    limits: NonNullable<FrozenRow["plan"]["limits"]>;
    cedar: ReturnType<typeof evaluatePolicies> | null;
  },
): FrozenRow {
  const { frozen } = head;
  const { plan } = frozen;
  const { input } = admitted;
  // The model's proposal: row 1's input, carried by every later version.
  const proposedInput = frozen.edit?.proposed_input ?? frozen.input;
  const { limits: _old, cedar: _cedar, ...rest } = plan;
  const cedar = checked.cedar
    ? {
        version: checked.cedar.version,
        decision: checked.cedar.decision,
        policies: checked.cedar.policies,
      }
    : plan.cedar;
  return {
    ...frozen,
    input: input.canonical,
    input_hash: input.hash,
    plan: {
      ...rest,
      approval: { ...plan.approval!, inputHash: input.hash, editedBy: decision.approverId },
      resource: spec.risk === "read" ? null : spec.resourceKey(input.value),
      policyRequest: checked.policyRequest,
      ...(checked.limits.length > 0 ? { limits: checked.limits } : {}),
      ...(cedar ? { cedar } : {}),
      ...(plan.shadow
        ? { shadow: { would_send: wouldSend(spec, input, plan.idempotencyKey) } }
        : {}),
    },
    edit: {
      proposed_hash: proposedHash(frozen),
      proposed_input: proposedInput,
      from_hash: frozen.input_hash,
      by: decision.approverId,
      via: decision.via,
      reason: decision.reason,
      at_ms: nowMs,
      model: editedCall(decodeInput(proposedInput), input.value, admitted.bound, decision.reason),
    },
  };
}

/** The run's refusal as the approver reads it: typed, nothing changed. */
function refusalOf(error: {
  code: string;
  message?: string;
  detail?: string;
  field?: string;
}): OperationError {
  const detail = `${error.message ?? error.detail ?? error.code}`;
  switch (error.code) {
    case "field_not_editable":
      return { code: "field_not_editable", field: error.field ?? "", detail };
    case "invalid_arguments":
    case "policy_denied":
      return { code: error.code, detail };
    case "not_found":
      return { code: "not_found" };
    default:
      // forbidden (scopes revoked), tool_not_allowed (withdrawn), shadow_unsupported, …
      return { code: "forbidden", detail: `${detail} (${error.code})` };
  }
}
