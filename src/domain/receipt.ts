// Signed receipts (issue 37): what a settled operation actually did, as one JSON payload a third
// party verifies offline (Ed25519 over its RFC 8785 canonical JSON, docs/receipt.schema.json). Pure:
// the payload is a function of the operation's frozen call, its hash-chained trace and the link to
// its compensation; the shell adds the key id and time of signing and signs. Receipts chain per
// operation: a later one (its compensation linked) names the hash of the one before.
import { z } from "zod";
import type { TraceEvent } from "./journal/trace-event.ts";
import type { Outcome } from "./operation/state.ts";
import { canonicalJson, sha256Hex } from "./canonical-json.ts";

export const RECEIPT_TYPE = "toolgate.receipt/v1";

/**
 * What the receipt marks: the operation settled, or a compensation was linked to it (the
 * compensation's own receipts say how that ended; a later generation is linked anew).
 */
export type ReceiptKind = "settled" | "compensation_linked";

export type ReceiptApproval = {
  /** The event's hash on the operation's log chain: an id no one can mint afterwards. */
  id: string;
  /** A routed approval's counted vote (issue 35), or the decision (with quorum: its last vote). */
  kind: "vote" | "decision";
  verdict: "approve" | "reject";
  /** sha256(tenant "\n" decider id): whoever knows the identity can confirm it, no one can read it. */
  decider_hash: string;
  via: string | null;
  decided_at_ms: number;
  step_up: "passkey" | null;
  /** A delegate cast it (the vote is the delegator's): the delegate's identity hash. */
  cast_by_hash: string | null;
};

/** The signed payload: every field is covered by the signature (no optional field, null instead). */
export type ReceiptPayload = {
  type: typeof RECEIPT_TYPE;
  kind: ReceiptKind;
  /** 1, 2, … within this operation's chain: a skipped link is a gap. */
  seq: number;
  operation_id: string;
  tenant: string;
  run: string;
  tool: string;
  tool_version: string;
  input_hash: string;
  approvals: ReceiptApproval[];
  /** The tenant's Cedar policy set version that decided at the start (null: the tenant had none). */
  policy_version: string | null;
  idempotency_key_hash: string;
  attempts: { count: number; started_at_ms: number[] };
  outcome: {
    status: Outcome["status"];
    code: string | null;
    via: "attempt" | "reconcile" | "resolve";
    late: boolean;
    /** The outcome was unknown first: why, and what settled it (a resend with the same key, the
     *  tool's status lookup, or a person's verdict). Null: never unknown. */
    unknown: { code: string; settled_by: "resend" | "lookup" | "person" } | null;
  };
  /** sha256 of the canonical recorded result (succeeded), else of the last upstream answer; null: none. */
  upstream_response_hash: string | null;
  compensation: { compensates: string | null; compensated_by: string | null };
  /** The chain hash of the log's `recorded` event: anchors the receipt in the operation's log. */
  log_hash: string | null;
  recorded_at_ms: number;
  previous_receipt_hash: string | null;
  /** When and with which of the tenant's keys it was signed (the verifier checks the key's window). */
  issued_at_ms: number;
  kid: string;
};

/** A receipt as served: the payload, its detached signature, and its hash (the next link names it). */
export type SignedReceipt = {
  payload: ReceiptPayload;
  alg: "EdDSA";
  /** base64url Ed25519 signature over the UTF-8 bytes of canonicalJson(payload). */
  signature: string;
  /** sha256 hex of canonicalJson(payload): what the next receipt's previous_receipt_hash names. */
  hash: string;
};

/** What the operation knows when a receipt is due (the shell reads it from the log). */
export type ReceiptFacts = {
  operationId: string;
  tenantId: string;
  runId: string;
  tool: string;
  toolVersion: string;
  inputHash: string;
  idempotencyKey: string;
  policyVersion: string | null;
  compensates: string | null;
  compensatedBy: string | null;
  events: readonly TraceEvent[];
  recorded: {
    outcome: Outcome;
    attempts: number;
    recordedAtMs: number;
    via: "attempt" | "reconcile" | "resolve";
    late: boolean;
  };
};

/**
 * The receipts still to sign, in order, after `chain` (the stored one): the settled one first,
 * then one for a compensation linked since the last one named (`compensatedBy`, the link now).
 */
export function receiptsDue(
  chain: ReadonlyArray<Pick<ReceiptPayload, "kind" | "compensation">>,
  compensatedBy: string | null,
): ReceiptKind[] {
  const due: ReceiptKind[] = chain.length === 0 ? ["settled"] : [];
  const named = chain.findLast((r) => r.kind === "compensation_linked")?.compensation;
  if (compensatedBy !== null && compensatedBy !== (named?.compensated_by ?? null))
    due.push("compensation_linked");
  return due;
}

export const receiptHash = (payload: ReceiptPayload): Promise<string> =>
  sha256Hex(canonicalJson(payload));

/** The payload of receipt `kind` (the `seq`-th), chained onto `previous`, signed by `kid` at `issuedAtMs`. */
export async function receiptPayload(
  facts: ReceiptFacts,
  kind: ReceiptKind,
  seq: number,
  previousHash: string | null,
  signer: { kid: string; issuedAtMs: number },
): Promise<ReceiptPayload> {
  const { events, recorded } = facts;
  const who = (id: string) => sha256Hex(`${facts.tenantId}\n${id}`);
  const approvals: ReceiptApproval[] = [];
  for (const event of events) {
    if (event.type !== "approval_decided" && event.type !== "approval_voted") continue;
    const vote = event.type === "approval_voted";
    approvals.push({
      id: event.hash ?? `seq:${event.seq ?? approvals.length}`,
      kind: vote ? "vote" : "decision",
      verdict: vote ? "approve" : event.verdict,
      decider_hash: await who(event.by),
      via: event.via ?? null,
      decided_at_ms: event.at_ms,
      step_up: (!vote && event.step_up) || null,
      cast_by_hash: event.cast_by ? await who(event.cast_by) : null,
    });
  }
  const started = events.flatMap((e) => (e.type === "attempt_started" ? [e.at_ms] : []));
  const outcome = recorded.outcome;
  return {
    type: RECEIPT_TYPE,
    kind,
    seq,
    operation_id: facts.operationId,
    tenant: facts.tenantId,
    run: facts.runId,
    tool: facts.tool,
    tool_version: facts.toolVersion,
    input_hash: facts.inputHash,
    approvals,
    policy_version: facts.policyVersion,
    idempotency_key_hash: await sha256Hex(facts.idempotencyKey),
    attempts: { count: recorded.attempts, started_at_ms: started },
    outcome: {
      status: outcome.status,
      code: outcome.status === "succeeded" ? null : outcome.code,
      via: recorded.via,
      late: recorded.late,
      unknown: unknownSettled(events, recorded.via),
    },
    upstream_response_hash: await responseHash(outcome, events),
    // The settled receipt says what was known when it settled, whenever it was signed.
    compensation: {
      compensates: facts.compensates,
      compensated_by: kind === "compensation_linked" ? facts.compensatedBy : null,
    },
    log_hash: events.findLast((e) => e.type === "recorded" && "status" in e)?.hash ?? null,
    recorded_at_ms: recorded.recordedAtMs,
    previous_receipt_hash: previousHash,
    issued_at_ms: signer.issuedAtMs,
    kid: signer.kid,
  };
}

/** Whether the outcome was unknown before it was recorded, and what settled it. */
function unknownSettled(
  events: readonly TraceEvent[],
  via: "attempt" | "reconcile" | "resolve",
): ReceiptPayload["outcome"]["unknown"] {
  const unknown = events.findLast((e) => e.type === "outcome_unknown");
  if (!unknown || !("code" in unknown)) return null;
  const settledBy = via === "resolve" ? "person" : via === "reconcile" ? "lookup" : "resend";
  return { code: unknown.code, settled_by: settledBy };
}

/** The recorded result's hash (what the upstream answered that toolgate accepted), else the last answer's. */
async function responseHash(
  outcome: Outcome,
  events: readonly TraceEvent[],
): Promise<string | null> {
  if (outcome.status === "succeeded") return sha256Hex(canonicalJson(outcome.result ?? null));
  const answered = events.findLast((e) => e.type === "attempt_finished" && e.response);
  return answered?.type === "attempt_finished" && answered.response
    ? sha256Hex(canonicalJson(answered.response))
    : null;
}

/**
 * How long an operation's isolate keeps a signing key it fetched from its tenant, and so how long
 * a key rotated out may still sign: its `not_after` is the rotation plus this (never a receipt
 * whose key had ended when it was signed).
 */
export const RECEIPT_KEY_CACHE_MS = 30_000;
/** A new key's window; a key within RECEIPT_KEY_CACHE_MS of its end is replaced before it signs. */
export const RECEIPT_KEY_LIFETIME_MS = 365 * 24 * 60 * 60_000;

/** Whether key window [notBeforeMs, notAfterMs] covers `atMs` (both ends included). */
export const keyCovers = (key: { notBeforeMs: number; notAfterMs: number }, atMs: number) =>
  key.notBeforeMs <= atMs && atMs <= key.notAfterMs;

// The published format (docs/receipt.schema.json is this, generated; test/unit/receipt-schema.test.ts
// keeps them equal): strict, every field required, so a verifier sees every field that is signed.
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const Ms = z.number().int().nonnegative();
export const ReceiptPayloadSchema = z
  .object({
    type: z.literal(RECEIPT_TYPE),
    kind: z.enum(["settled", "compensation_linked"]),
    seq: z.number().int().min(1),
    operation_id: z.string(),
    tenant: z.string(),
    run: z.string(),
    tool: z.string(),
    tool_version: Hex64.describe(
      "sha256 of the tool's canonical source: what an approval binds to",
    ),
    input_hash: Hex64.describe("sha256 of the frozen input's RFC 8785 JSON"),
    approvals: z.array(
      z
        .object({
          id: z.string().describe("the event's hash on the operation's log chain"),
          kind: z.enum(["vote", "decision"]),
          verdict: z.enum(["approve", "reject"]),
          decider_hash: Hex64.describe('sha256(tenant + "\\n" + decider id)'),
          via: z.string().nullable(),
          decided_at_ms: Ms,
          step_up: z.literal("passkey").nullable(),
          cast_by_hash: Hex64.nullable(),
        })
        .strict(),
    ),
    policy_version: z.string().nullable().describe("the Cedar policy set version that decided"),
    idempotency_key_hash: Hex64,
    attempts: z.object({ count: z.number().int().min(0), started_at_ms: z.array(Ms) }).strict(),
    outcome: z
      .object({
        status: z.enum(["succeeded", "rejected", "failed", "budget_exhausted", "cancelled"]),
        code: z.string().nullable(),
        via: z.enum(["attempt", "reconcile", "resolve"]),
        late: z.boolean(),
        unknown: z
          .object({ code: z.string(), settled_by: z.enum(["resend", "lookup", "person"]) })
          .strict()
          .nullable(),
      })
      .strict(),
    upstream_response_hash: Hex64.nullable(),
    compensation: z
      .object({ compensates: z.string().nullable(), compensated_by: z.string().nullable() })
      .strict(),
    log_hash: z.string().nullable(),
    recorded_at_ms: Ms,
    previous_receipt_hash: Hex64.nullable(),
    issued_at_ms: Ms,
    kid: z.string().describe("the signing key's RFC 7638 thumbprint, in the tenant's JWKS"),
  })
  .strict();
export const SignedReceiptSchema = z
  .object({
    payload: ReceiptPayloadSchema,
    alg: z.literal("EdDSA"),
    signature: z
      .string()
      .regex(/^[A-Za-z0-9_-]{86}$/)
      .describe("Ed25519 over the UTF-8 bytes of the payload's RFC 8785 JSON, base64url"),
    hash: Hex64.describe("sha256 of the payload's RFC 8785 JSON (the next receipt names it)"),
  })
  .strict()
  .meta({ title: "toolgate receipt (toolgate.receipt/v1)" });
