// Does an upstream really deduplicate by its idempotency header? The verdict and its checks as
// stored (the judges in verification-judges.ts turn the requests POST /v1/tools/{name}/verify sent
// into them), what a verdict counts for, and `idempotencyTrust`: what an unproven promise means for
// a new operation. Pure: the shell sends the requests, scrubs secrets and digests bodies.
// Stripe's documented contract is the reference: same key + same body → the stored status and body;
// same key + other body → an error; a concurrent duplicate → 409 (or the replay once stored).
import { repeatSafety, type IdempotencyMode, type RepeatSafety } from "./classify.ts";
import type { Risk } from "./identity.ts";

/** What a verdict's checks concluded, as stored (`Verification.status`), wherever they were sent. */
export const VerdictStatus = ["verified", "failed", "unverified"] as const;
export type VerdictStatus = (typeof VerdictStatus)[number];

/**
 * The one answer to "is this tool verified?" that every reader gives — GET /v1/tools, the
 * console's tools and run pages, a run's warnings and traces, `npm start`'s banner — decided by
 * `verificationStatus` alone. `verified_sandbox_only`: its checks passed against a sandbox origin,
 * so the production upstream was never tested and runs treat the tool as unverified.
 */
export const VerificationStatus = [
  "verified",
  "verified_sandbox_only",
  "failed",
  "unverified",
] as const;
export type VerificationStatus = (typeof VerificationStatus)[number];

export type CheckName =
  | "first_send"
  | "same_key_replay"
  | "changed_body_refused"
  | "concurrent_duplicate"
  | "lookup_finds_effect"
  | "lookup_unknown_key";

/** One request as sent (secret values already replaced by "[redacted]"). */
export type Sent = {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
};
/**
 * What came back. `digest`: SHA-256 of the body's canonical JSON (raw text when not JSON), over the
 * whole body; `body` is the evidence kept, cut to a few KiB (`truncated`). `valid_output`: the body
 * passes the tool's output schema.
 */
export type Received =
  | {
      kind: "response";
      status: number;
      body: unknown;
      digest: string;
      truncated: boolean;
      valid_output: boolean;
    }
  /** Timeout, lost connection, or a request that could not be built (then nothing was sent). */
  | { kind: "no_response"; detail: string };
export type Exchange = { idempotency_key: string; sent: Sent; received: Received };

export type Check = {
  name: CheckName;
  status: "passed" | "failed" | "skipped";
  /** The promise this check tests, and what was observed (short, for a table). */
  expected: string;
  observed: string;
  exchanges: Exchange[];
};

export type Verification = {
  status: VerdictStatus;
  checked_at: string | null;
  /** The hash of the tool's request, idempotency and reconcile settings this verdict holds for. */
  settings_hash: string | null;
  /** The origin the checks were sent to, when it replaced the tool's own (a sandbox). */
  base_url: string | null;
  checks: Check[];
};

export const UNVERIFIED: Verification = {
  status: "unverified",
  checked_at: null,
  settings_hash: null,
  base_url: null,
  checks: [],
};

/**
 * What a verdict counts for: only checks sent to the tool's own origin vouch for it. A verdict
 * obtained against a sandbox (`base_url`) is stored and shown with the tool, but the production
 * upstream was never tested: `verified_sandbox_only`, which runs treat as unverified.
 */
export function verificationStatus(verification: Verification): VerificationStatus {
  return verification.status === "verified" && verification.base_url !== null
    ? "verified_sandbox_only"
    : verification.status;
}

/** Only a verdict from the tool's own origin lets runs rely on its idempotency key. */
export const countsForRuns = (status: VerificationStatus): boolean => status === "verified";

/** The human line for each answer, the same wherever it is shown. */
export function verificationSummary(status: VerificationStatus): string {
  switch (status) {
    case "verified":
      return "verified against its own origin: runs rely on its idempotency key";
    case "verified_sandbox_only":
      return "verified against the sandbox only: runs treat it as unverified";
    case "failed":
      return "verification failed: runs treat it as unverified";
    case "unverified":
      return "not verified: runs treat it as unverified";
  }
}

/** A verdict as the API and the console show it: `status` is the answer, with what it means for runs. */
export type VerificationView = Omit<Verification, "status"> & {
  status: VerificationStatus;
  counts_for_runs: boolean;
  summary: string;
};

export function verificationView(verification: Verification): VerificationView {
  const status = verificationStatus(verification);
  return {
    ...verification,
    status,
    counts_for_runs: countsForRuns(status),
    summary: verificationSummary(status),
  };
}

/** A verdict holds only for the settings it was checked with; anything else is unverified. */
export function verificationFor(
  stored: Verification | null,
  currentSettingsHash: string | null,
): Verification {
  return stored && currentSettingsHash !== null && stored.settings_hash === currentSettingsHash
    ? stored
    : UNVERIFIED;
}

/** What an operation of this tool may rely on, given its verdict and the deployment's policy. */
export type IdempotencyTrust = {
  safety: RepeatSafety;
  hasLookup: boolean;
  /** Set when the tool promises a key that is not verified: the trace and the export say so. */
  unverified: { status: Exclude<VerificationStatus, "verified">; enforced: boolean } | null;
};

/**
 * A write that promises safe repeats (mode `header`, or `natural`, which verify cannot check)
 * whose verdict is not `verified`: under TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY it runs as mode
 * `none` with no trusted status lookup (the lookup is part of what verify proves), so an ambiguous
 * attempt waits for a person instead of being resent; otherwise it keeps its promise and is
 * flagged. `status` null: no verdict applies (a code tool, reviewed with the deployment). Reads
 * and mode `none` promise nothing and are untouched.
 */
export function idempotencyTrust(
  risk: Risk,
  mode: IdempotencyMode,
  hasReconcile: boolean,
  status: VerificationStatus | null,
  requireVerified: boolean,
): IdempotencyTrust {
  const safety = repeatSafety(risk, mode, hasReconcile);
  if (risk === "read" || mode === "none" || status === null || status === "verified")
    return { safety, hasLookup: hasReconcile, unverified: null };
  if (!requireVerified)
    return { safety, hasLookup: hasReconcile, unverified: { status, enforced: false } };
  return { safety: "neither", hasLookup: false, unverified: { status, enforced: true } };
}

/**
 * The trace event an unverified tool's operation starts with, and a run's warning for the tool:
 * the one answer's line first, then what the operation relies on because of it.
 */
export function unverifiedTraceDetail(
  unverified: NonNullable<IdempotencyTrust["unverified"]>,
): string {
  const what = `${verificationSummary(unverified.status)} (only a "header" tool verified against its own origin with POST /v1/tools/{name}/verify counts)`;
  return unverified.enforced
    ? `${what}; TOOLGATE_REQUIRE_VERIFIED_IDEMPOTENCY is on, so it runs as idempotency mode "none" — an ambiguous attempt is not resent and its status lookup is not trusted; a person settles it`
    : `${what}; automatic resends after an ambiguous attempt rely on a promise no one has checked`;
}
