// The result envelope the model reads (before a provider adapter wraps it): status, operation id,
// and either the result or code + message + allowed next actions. Messages tell the model what to
// do, because the model will act on them: refusals say "do not retry; tell the user".
import type { RepeatSafety } from "./classify.ts";
import type { OperationState } from "./operation/index.ts";
import { settlingUntilMs } from "./operation/view.ts";
import type { EditedCall, Envelope, ModelStatus, PaidCall } from "./public-shapes.ts";

// The shapes themselves have no imports, so the client package ships them (public-shapes.ts).
export type { EditedCall, Envelope, ModelStatus, PaidCall } from "./public-shapes.ts";

const NEXT_ACTIONS: Record<Exclude<ModelStatus, "succeeded">, string[]> = {
  rejected: ["fix_arguments", "tell_user"],
  failed: ["tell_user"],
  budget_exhausted: ["tell_user"],
  cancelled: ["tell_user"],
  outcome_unknown: ["wait", "check_status", "tell_user"],
  awaiting_approval: ["wait", "check_status", "tell_user"],
  pending: ["wait"],
};

/** Waiting is not failing: only a refusal, a failure or an unknown outcome is marked as an error. */
export const isWaitingOrSucceeded = (envelope: Envelope): boolean =>
  envelope.status === "succeeded" ||
  envelope.status === "pending" ||
  envelope.status === "awaiting_approval";

export function refusal(
  status: Exclude<ModelStatus, "succeeded">,
  operationId: string,
  code: string,
  message: string,
): Envelope {
  const actions =
    status === "rejected" && code !== "invalid_arguments" ? ["tell_user"] : NEXT_ACTIONS[status];
  return { status, operation_id: operationId, code, message, allowed_next_actions: actions };
}

/** A person's words travel as written: the model reads them in `reason`, not only inside `message`. */
const withReason = (envelope: Envelope, reason: string | undefined): Envelope =>
  reason === undefined || envelope.status === "succeeded" ? envelope : { ...envelope, reason };

/** A paid call's success says what it paid and how the merchant settled it (x402, issue 37). */
export const withPayment = (envelope: Envelope, paid: PaidCall | null): Envelope =>
  paid === null || envelope.status !== "succeeded" ? envelope : { ...envelope, payment: paid };

/** A person's edit travels with every envelope after it (issue 35 item 2): what ran, and how it differs. */
export const withEdit = (envelope: Envelope, edited: EditedCall | undefined): Envelope =>
  edited === undefined ? envelope : { ...envelope, edited };

/** `safety` picks the truthful words for an unknown outcome: what toolgate can and cannot do about it. */
export function envelopeFor(
  operationId: string,
  state: OperationState,
  safety: RepeatSafety,
  /** The clock reading: a wait for a quota says how long is left (null: only when). */
  nowMs: number | null = null,
): Envelope {
  // Settling late by itself (retry-late.ts), through its tries too: one steady, true answer.
  const untilMs = settlingUntilMs(state);
  if (untilMs !== null && state.phase !== "recorded" && "code" in state)
    return refusal("outcome_unknown", operationId, state.code, settlingText(safety, untilMs));
  if (untilMs !== null && state.phase === "executing" && state.mayHaveApplied)
    return refusal(
      "outcome_unknown",
      operationId,
      state.mayHaveApplied.code,
      settlingText(safety, untilMs),
    );
  switch (state.phase) {
    case "awaiting_quota":
      return quotaWait(operationId, state.reason, state.long, state.dueAtMs, nowMs);
    case "awaiting_lock":
      return refusal(
        "pending",
        operationId,
        "resource_locked",
        state.blockedBy
          ? `Another change to the same resource (operation ${state.blockedBy}) is still being settled; nothing has been done for this call yet and it runs as soon as that one is settled. Wait; do not call it again.`
          : // Asked for, not yet answered: no other change is known to hold it (newcomer #24).
            "Taking the lock on the resource this call changes before it runs; nothing has been done yet and it runs once the lock is granted. Wait; do not call it again.",
      );
    case "awaiting_approval":
      return refusal(
        "awaiting_approval",
        operationId,
        "approval_required",
        "A person must approve this call before it runs; nothing has been done yet. Do not call it again: its result will arrive when the person decides (keep polling this turn, or ask toolgate_check_status with this operation_id). Tell the user it is waiting for approval.",
      );
    case "recorded":
      return state.outcome.status === "succeeded"
        ? { status: "succeeded", operation_id: operationId, result: state.outcome.result }
        : withReason(
            refusal(state.outcome.status, operationId, state.outcome.code, state.outcome.message),
            state.outcome.reason,
          );
    case "executing":
      return refusal(
        "pending",
        operationId,
        "executing",
        `toolgate is running this call (attempt ${state.attempt}). Wait for its result; do not call it again.`,
      );
    case "retry_scheduled":
      // After an ambiguous attempt the next one is a resend with the same key, not a first try:
      // "pending" would let a cancel claim it never took effect.
      if (state.mayHaveApplied)
        return refusal(
          "outcome_unknown",
          operationId,
          state.mayHaveApplied.code,
          `It is not yet known whether this took effect: an earlier attempt may have reached the tool. toolgate will send it again with the same idempotency key by itself. Do not retry; wait or tell the user it is being checked.`,
        );
      if (state.paused)
        return quotaWait(operationId, "paused", state.paused.long, state.dueAtMs, nowMs);
      return refusal(
        "pending",
        operationId,
        "retry_scheduled",
        `The tool failed transiently (${state.reason}); toolgate will retry it by itself. Wait; do not call it again.`,
      );
    case "reconciling":
      return refusal(
        "outcome_unknown",
        operationId,
        state.code,
        "It is not yet known whether this took effect; toolgate is checking with the tool. Do not retry; wait or tell the user it is being checked.",
      );
    case "outcome_unknown":
      return refusal(
        "outcome_unknown",
        operationId,
        state.code,
        state.reconcile === "human"
          ? WAITING_FOR_PERSON[safety]
          : "It is not yet known whether this took effect; toolgate is reconciling it safely. Do not retry; wait or tell the user it is being checked.",
      );
    case "held":
      return heldEnvelope(operationId, state);
    case "awaiting_credential":
      return {
        status: "pending",
        operation_id: operationId,
        code: "credential_required",
        message:
          state.reason === "invalid_grant"
            ? `The user's connection to ${state.provider} was revoked or expired; nothing was sent. Ask the user to reconnect by opening connect_url; this call then continues by itself (it waits until ${isoUtc(state.expiresAtMs)}). Do not call it again.`
            : `This tool acts as the user, who has not connected ${state.provider} (${state.reason}); nothing was sent. Ask the user to open connect_url; this call then continues by itself (it waits until ${isoUtc(state.expiresAtMs)}). Do not call it again.`,
        allowed_next_actions: ["ask_user_to_connect", "wait", "tell_user"],
        connect_url: state.connectUrl,
      };
  }
}

/**
 * A call waiting for a quota (issue 34 item 4): nothing sent, still pending. A long pause (the
 * upstream's quota is used up, e.g. a daily limit) is `quota_exhausted`, told apart from a short
 * wait for a slot or a transient 429 (`rate_limited`), so the model tells the user it is queued
 * for hours rather than seconds.
 */
function quotaWait(
  operationId: string,
  reason: "rate" | "concurrency" | "paused",
  long: boolean,
  dueAtMs: number | null,
  nowMs: number | null,
): Envelope {
  const when =
    dueAtMs === null
      ? "as soon as there is one"
      : nowMs === null
        ? `at ${isoUtc(dueAtMs)}`
        : `in ~${Math.max(1, Math.ceil((dueAtMs - nowMs) / 1000))} s (${isoUtc(dueAtMs)})`;
  if (long)
    return refusal(
      "pending",
      operationId,
      "quota_exhausted",
      `The upstream's quota is used up until ${dueAtMs === null ? "it resets" : isoUtc(dueAtMs)}; nothing has been sent for this call. toolgate keeps it queued and sends it by itself then. Do not call it again; tell the user it is queued until then.`,
    );
  const why =
    reason === "paused"
      ? "The upstream asked for a pause (rate limited)"
      : reason === "concurrency"
        ? "Its quota's calls at a time are all in use"
        : dueAtMs === null
          ? "toolgate is asking this call's quota for a slot"
          : "Its quota allows no more calls right now";
  return refusal(
    "pending",
    operationId,
    "rate_limited",
    `${why}; nothing has been sent yet. Next slot ${when}: toolgate sends it by itself then. Wait; do not call it again.`,
  );
}

/**
 * Held by a freeze or a pause (issue 34): `pending` with code `frozen` (and the freeze) or `paused`
 * — unless an earlier attempt may have applied: then it stays an unknown outcome, never "pending",
 * which a cancel could read as "never took effect".
 */
function heldEnvelope(
  operationId: string,
  state: Extract<OperationState, { phase: "held" }>,
): Envelope {
  const { hold, resume } = state;
  const why =
    hold.kind === "freeze"
      ? `An operator froze these calls (freeze ${hold.freezeId}: ${hold.reason})`
      : `A person paused this call`;
  const ambiguity =
    resume.phase === "outcome_unknown"
      ? resume.code
      : resume.phase === "retry_scheduled"
        ? (resume.mayHaveApplied?.code ?? null)
        : null;
  const envelope = ambiguity
    ? refusal(
        "outcome_unknown",
        operationId,
        ambiguity,
        `It is not yet known whether this took effect. ${why}; toolgate sends nothing more until that ends, then continues with the same idempotency key. Do not retry; tell the user it is on hold.`,
      )
    : refusal(
        "pending",
        operationId,
        hold.kind === "freeze" ? "frozen" : "paused",
        `${why}; nothing has been sent for it and it continues by itself when that ends. Wait; do not call it again; tell the user it is on hold.`,
      );
  return hold.kind === "freeze" && "code" in envelope
    ? { ...envelope, freeze: { id: hold.freezeId, reason: hold.reason } }
    : envelope;
}

/** What the model is told while toolgate settles an unknown outcome late by itself (never "it did not happen"). */
export function settlingText(safety: RepeatSafety, untilMs: number): string {
  const until = isoUtc(untilMs);
  const how =
    safety === "keyed"
      ? "toolgate keeps settling it by itself, sending it again only with the same idempotency key (so it cannot take effect twice)"
      : "toolgate keeps settling it by itself, asking the tool's status lookup";
  return `It is not yet known whether this took effect: the tool did not answer clearly, and ${how} until ${until}. Do not retry. Tell the user it is being settled; learn the result later with toolgate_check_status and this operation_id.`;
}

const WAITING_FOR_PERSON: Record<RepeatSafety, string> = {
  keyed:
    "toolgate could not confirm whether this reached the tool and took effect. It will not repeat it except with the same idempotency key, and only if a person decides so; a person is checking. Do not retry; tell the user it is being checked.",
  lookup:
    "It is not known whether this took effect: the tool's status lookup gave no clear answer. A person is checking. Do not retry; tell the user it is being checked.",
  neither:
    "It is not known whether this took effect, and this tool offers no safe way to check or to repeat it. A person is checking. Do not retry; tell the user it is being checked.",
  read: "This read could not be completed and a person is checking. Do not retry; tell the user.",
};

/**
 * Run-level texts: what the model reads when the run (not the tool) decides a call's fate. Each
 * says whether the call took effect only where toolgate knows it, and what to do next.
 */
export const RUN_TEXT = {
  /** Only what the tombstone knows: how the identical request settled, not what it did. */
  pruned: (prunedAt: string, status: string) =>
    `An identical request was settled earlier as ${status}; its record was pruned at ${prunedAt} after the retention period, so toolgate will not send it again. Do not retry; tell the user.`,
  unknownTool: (name: string) =>
    `There is no tool named "${name}". Do not retry it; use one of the offered tools or tell the user.`,
  /** Said only after the operation was asked: no identical earlier call exists (or it could not be asked). */
  runCancelled:
    "The run was cancelled, so toolgate did not send this call now. If an identical earlier call already ran, its result stands. Do not retry; tell the user.",
  cancelledBeforeRetry:
    "The run was cancelled before this call took effect. Do not retry; tell the user.",
  deadlineBeforeRetry:
    "This conversation ran out of time before the call could be retried. It did not take effect. Do not retry; tell the user.",
  withdrawnBeforeRetry: (tool: string) =>
    `The tool ${tool} was withdrawn from this conversation before it could run. Do not retry; tell the user.`,
  /** A closed call never claims "it did not take effect": a sent attempt may still commit. */
  closedWhileRunning: (operationId: string) =>
    `Cancelled while it was already running or starting, so it may still complete; toolgate records the outcome on operation ${operationId}. Do not retry; tell the user.`,
  toolUnavailable: "toolgate could not run this tool. Do not retry; tell the user.",
  toolChangedWhileWaiting: (tool: string) =>
    `The tool ${tool} changed while this call waited for approval, so that approval no longer applies and nothing was executed. Do not retry; tell the user.`,
  toolBusy:
    "toolgate could not read this call's state just now; it may be running. Wait for its result; do not call it again.",
} as const;

/** `ms` since the epoch as ISO 8601 UTC to the second (pure: civil-from-days, Howard Hinnant's algorithm). */
export function isoUtc(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  const days = Math.floor(seconds / 86_400);
  const rest = seconds - days * 86_400;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const two = (n: number) => String(n).padStart(2, "0");
  const time = `${two(Math.floor(rest / 3600))}:${two(Math.floor((rest % 3600) / 60))}:${two(rest % 60)}`;
  return `${String(year).padStart(4, "0")}-${two(month)}-${two(day)}T${time}Z`;
}
