// Outcome classification, exactly DESIGN.md's table: (risk × idempotency mode × what happened) →
// succeed, fail for good, retry, or outcome unknown with the way it will be reconciled.
// One layer decides retryability and it is this one; nothing else retries. A retry also says
// whether the attempt may have applied, so the state machine never later claims it did not.
import type { Observation } from "./observation.ts";
import type { Risk } from "./identity.ts";
import type { UnknownCode } from "./journal/trace-event.ts";

export type { UnknownCode };

export type IdempotencyMode = "header" | "natural" | "none";

/** How a repeat of this call behaves upstream — the only thing classification needs from the tool. */
export type RepeatSafety = "read" | "keyed" | "lookup" | "neither";

export function repeatSafety(
  risk: Risk,
  mode: IdempotencyMode,
  hasReconcile: boolean,
): RepeatSafety {
  if (risk === "read") return "read";
  if (mode === "header" || mode === "natural") return "keyed";
  return hasReconcile ? "lookup" : "neither";
}

export type FailCode =
  "invalid_arguments" | "upstream_forbidden" | "permanent_failure" | "invalid_output";

export type Decision =
  | { kind: "succeed"; result: unknown }
  /**
   * `coversEarlierAttempts`: the answer also settles earlier attempts of the same key (a keyed
   * upstream answers a repeated key from its idempotency layer). False when the request never
   * reached that layer (credentials refused, nothing sent), so an earlier ambiguity still stands.
   */
  | {
      kind: "fail";
      status: "rejected" | "failed";
      code: FailCode;
      message: string;
      coversEarlierAttempts: boolean;
    }
  /** `mayHaveApplied`: null when this attempt certainly had no effect; else why it may have. */
  | {
      kind: "retry";
      retryAfterMs: number | null;
      reason: string;
      mayHaveApplied: UnknownCode | null;
    }
  /** The effect may have happened. `resend` = same key again; `lookup` = the status request; `human` = a person. */
  | {
      kind: "unknown";
      code: UnknownCode;
      reconcile: "resend" | "lookup" | "human";
      reason: string;
    };

const DO_NOT_RETRY = "Do not retry this call; tell the user what happened.";

export function classify(safety: RepeatSafety, observed: Observation): Decision {
  switch (observed.kind) {
    case "ok":
      return { kind: "succeed", result: observed.result };
    case "invalid_output":
      // The upstream answered 2xx: for a write the effect happened, so this is never retried, and
      // the model must not read "failed" as "not done" (it would tell the user the write failed).
      if (safety === "read")
        return fail(
          "failed",
          "invalid_output",
          `The tool answered with output toolgate could not accept (${observed.detail}). ${DO_NOT_RETRY}`,
        );
      return fail(
        "failed",
        "invalid_output",
        `The tool accepted this call (it answered success), so it took effect, but toolgate could not accept its answer (${observed.detail}), so there is no result to show. Do not retry this call; tell the user it was done but its result could not be read.`,
      );
    case "body_lost":
      // A 2xx arrived, so a write took effect; only its result was lost. A keyed write asks again
      // with the same key (the upstream replays the stored answer); any other write must not be
      // repeated, and saying "failed" without saying it took effect would be a lie.
      if (safety === "read")
        return { kind: "retry", retryAfterMs: null, reason: observed.detail, mayHaveApplied: null };
      if (safety === "keyed")
        return {
          kind: "unknown",
          code: observed.timedOut ? "timeout_unknown" : "connection_lost",
          reconcile: "resend",
          reason: observed.detail,
        };
      return fail(
        "failed",
        "invalid_output",
        `The tool accepted this call (it answered success), so it took effect, but its answer was cut off and toolgate could not read the result (${observed.detail}). ${DO_NOT_RETRY}`,
      );
    case "config_error":
      return {
        ...fail(
          "failed",
          "permanent_failure",
          `The tool is misconfigured (${observed.detail}). ${DO_NOT_RETRY}`,
        ),
        coversEarlierAttempts: false,
      };
    case "not_sent":
      // Stopped inside toolgate before fetch: a retry for every tool, and it settles nothing earlier.
      return { kind: "retry", retryAfterMs: null, reason: observed.detail, mayHaveApplied: null };
    case "timeout":
      return ambiguous(safety, "timeout_unknown", observed.detail);
    case "connection_lost":
      return ambiguous(safety, "connection_lost", observed.detail);
    case "crash":
      return ambiguous(
        safety,
        "crash_unknown",
        "toolgate restarted while the attempt was in flight",
      );
    case "http_error":
      return classifyStatus(safety, observed.status, observed.retryAfterMs, observed.detail);
  }
}

/** Cloudflare's edge answers these itself when it never got a connection to the origin: nothing was sent. */
const NOT_SENT: Record<number, string> = {
  521: "Cloudflare reports the origin refused the connection (HTTP 521)",
  522: "Cloudflare reports connecting to the origin timed out (HTTP 522)",
  523: "Cloudflare reports the origin is unreachable (HTTP 523)",
};

function classifyStatus(
  safety: RepeatSafety,
  status: number,
  retryAfterMs: number | null,
  detail: string,
): Decision {
  if (status === 400 || status === 422) {
    return fail(
      "rejected",
      "invalid_arguments",
      `The tool rejected the arguments (HTTP ${status}: ${detail}). Fix the arguments or tell the user; do not repeat the same call.`,
    );
  }
  if (status === 401 || status === 403) {
    return {
      ...fail(
        "failed",
        "upstream_forbidden",
        `The tool refused toolgate's credentials (HTTP ${status}). ${DO_NOT_RETRY}`,
      ),
      coversEarlierAttempts: false,
    };
  }
  // The only proof that the origin never took the request (Cloudflare docs, "Error 521/522/523"):
  // it refused the connection, never completed the TCP handshake or never acknowledged the request
  // bytes (522 covers both), or could not be routed to. 520 and 524 come after the origin had it.
  const notSent = NOT_SENT[status];
  if (notSent)
    return {
      kind: "retry",
      retryAfterMs,
      reason: `nothing was sent: ${notSent}`,
      mayHaveApplied: null,
    };
  // A 3xx to a write means the upstream took the request and pointed elsewhere: a 303 after a POST
  // usually means "done, see there", a 307/308 "not done here". toolgate follows no redirect, so
  // it cannot tell which: the outcome is unknown. Resending would only earn the same 3xx (the
  // answer is deterministic), so a keyed write goes to a person too; a status lookup can settle it.
  // A read that was redirected simply did not get its answer.
  if (status >= 300 && status < 400) {
    if (safety === "read")
      return fail(
        "failed",
        "permanent_failure",
        `The tool answered with a redirect that toolgate does not follow (HTTP ${status}: ${detail}). ${DO_NOT_RETRY}`,
      );
    return {
      kind: "unknown",
      code: "redirect_unknown",
      reconcile: safety === "lookup" ? "lookup" : "human",
      reason: `HTTP ${status}: ${detail}`,
    };
  }
  // A keyed write answered 409 when the upstream still holds the first request with this key
  // (Stripe-style "in progress", e.g. after toolgate crashed mid-attempt): asking again later with
  // the same key is the only safe move; declaring it a permanent failure would hide a live effect.
  if (status === 409 && safety === "keyed")
    return {
      kind: "retry",
      retryAfterMs,
      reason: `HTTP 409 for the same key: ${detail}`,
      mayHaveApplied: "upstream_error_unknown",
    };
  if (status === 408 || status === 429 || status >= 500) {
    // Only a 429 says the request was not processed; any 5xx (and 408) may come after the effect
    // (a 500 mid-write, a 502/504/524 from a gateway whose origin went on working).
    if (safety === "read" || status === 429)
      return {
        kind: "retry",
        retryAfterMs,
        reason: status === 429 ? "HTTP 429: the request was not processed" : `HTTP ${status}`,
        mayHaveApplied: null,
      };
    if (safety === "keyed")
      return {
        kind: "retry",
        retryAfterMs,
        reason: `HTTP ${status}`,
        mayHaveApplied: "upstream_error_unknown",
      };
    return ambiguous(safety, "upstream_error_unknown", `HTTP ${status} after the request was sent`);
  }
  return fail(
    "failed",
    "permanent_failure",
    `The tool failed permanently (HTTP ${status}: ${detail}). ${DO_NOT_RETRY}`,
  );
}

function ambiguous(safety: RepeatSafety, code: UnknownCode, reason: string): Decision {
  switch (safety) {
    case "read":
      return { kind: "retry", retryAfterMs: null, reason, mayHaveApplied: null };
    case "keyed":
      return { kind: "unknown", code, reconcile: "resend", reason };
    case "lookup":
      return { kind: "unknown", code, reconcile: "lookup", reason };
    case "neither":
      return { kind: "unknown", code, reconcile: "human", reason };
  }
}

const fail = (
  status: "rejected" | "failed",
  code: FailCode,
  message: string,
): Extract<Decision, { kind: "fail" }> => ({
  kind: "fail",
  status,
  code,
  message,
  coversEarlierAttempts: true,
});
