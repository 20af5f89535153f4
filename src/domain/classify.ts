// Outcome classification, exactly DESIGN.md's table: (risk × idempotency mode × what happened) →
// succeed, fail for good, retry, or outcome unknown with the way it will be reconciled.
// One layer decides retryability and it is this one; nothing else retries.
import type { Observation } from "./observation.ts";
import type { Risk } from "./identity.ts";

export type IdempotencyMode = "header" | "natural" | "none";

/** How a repeat of this call behaves upstream — the only thing classification needs from the tool. */
export type RepeatSafety = "read" | "keyed" | "lookup" | "neither";

export function repeatSafety(risk: Risk, mode: IdempotencyMode, hasReconcile: boolean): RepeatSafety {
  if (risk === "read") return "read";
  if (mode === "header" || mode === "natural") return "keyed";
  return hasReconcile ? "lookup" : "neither";
}

export type UnknownCode = "timeout_unknown" | "crash_unknown" | "connection_lost";
export type FailCode = "invalid_arguments" | "upstream_forbidden" | "permanent_failure" | "invalid_output";

export type Decision =
  | { kind: "succeed"; result: unknown }
  | { kind: "fail"; status: "rejected" | "failed"; code: FailCode; message: string }
  | { kind: "retry"; retryAfterMs: number | null; reason: string }
  /** The effect may have happened. `resend` = same key again; `lookup` = the status request; `human` = a person. */
  | { kind: "unknown"; code: UnknownCode; reconcile: "resend" | "lookup" | "human"; reason: string };

const DO_NOT_RETRY = "Do not retry this call; tell the user what happened.";

export function classify(safety: RepeatSafety, observed: Observation): Decision {
  switch (observed.kind) {
    case "ok":
      return { kind: "succeed", result: observed.result };
    case "invalid_output":
      // The upstream answered 2xx: for a write the effect happened, so this is never retried.
      return fail("failed", "invalid_output", `The tool answered with output toolgate could not accept (${observed.detail}). ${DO_NOT_RETRY}`);
    case "config_error":
      return fail("failed", "permanent_failure", `The tool is misconfigured (${observed.detail}). ${DO_NOT_RETRY}`);
    case "not_sent":
      return { kind: "retry", retryAfterMs: null, reason: `nothing was sent: ${observed.detail}` };
    case "timeout":
      return ambiguous(safety, "timeout_unknown", observed.detail);
    case "connection_lost":
      return ambiguous(safety, "connection_lost", observed.detail);
    case "crash":
      return ambiguous(safety, "crash_unknown", "toolgate restarted while the attempt was in flight");
    case "http_error":
      return classifyStatus(safety, observed.status, observed.retryAfterMs, observed.detail);
  }
}

function classifyStatus(safety: RepeatSafety, status: number, retryAfterMs: number | null, detail: string): Decision {
  if (status === 400 || status === 422) {
    return fail("rejected", "invalid_arguments", `The tool rejected the arguments (HTTP ${status}: ${detail}). Fix the arguments or tell the user; do not repeat the same call.`);
  }
  if (status === 401 || status === 403) {
    return fail("failed", "upstream_forbidden", `The tool refused toolgate's credentials (HTTP ${status}). ${DO_NOT_RETRY}`);
  }
  // A keyed write answered 409 when the upstream still holds the first request with this key
  // (Stripe-style "in progress", e.g. after toolgate crashed mid-attempt): asking again later with
  // the same key is the only safe move; declaring it a permanent failure would hide a live effect.
  if (status === 409 && safety === "keyed") return { kind: "retry", retryAfterMs, reason: `HTTP 409 for the same key: ${detail}` };
  if (status === 408 || status === 429 || status >= 500) {
    if (safety === "read" || safety === "keyed") return { kind: "retry", retryAfterMs, reason: `HTTP ${status}` };
    if (status === 429) return { kind: "retry", retryAfterMs, reason: "HTTP 429: the request was not processed" };
    return ambiguous(safety, "connection_lost", `HTTP ${status} after the request was sent`);
  }
  return fail("failed", "permanent_failure", `The tool failed permanently (HTTP ${status}: ${detail}). ${DO_NOT_RETRY}`);
}

function ambiguous(safety: RepeatSafety, code: UnknownCode, reason: string): Decision {
  switch (safety) {
    case "read":
      return { kind: "retry", retryAfterMs: null, reason };
    case "keyed":
      return { kind: "unknown", code, reconcile: "resend", reason };
    case "lookup":
      return { kind: "unknown", code, reconcile: "lookup", reason };
    case "neither":
      return { kind: "unknown", code, reconcile: "human", reason };
  }
}

const fail = (status: "rejected" | "failed", code: FailCode, message: string): Decision => ({ kind: "fail", status, code, message });
