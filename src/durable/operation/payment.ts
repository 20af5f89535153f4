// The x402 shell (issue 37 item 2), for tools that declare `payment` only: a tool without one takes
// none of these paths. Before a send: the one payload — signed now by the tenant's signer webhook
// (Standard Webhooks, the tool's `signer.secret`) when the plan holds an accepted requirement and no
// payload, and written with the plan in the transition's transaction before any paid byte goes out —
// as @x402/core's headers. After a 402: the verdict (domain/payment.ts) as the `payment_required`
// event and, when accepted, the plan holding the requirement (and the approval a person is asked).
// toolgate never holds a wallet key and never signs twice for an operation that stored a payload.
import { x402Client } from "@x402/core/client";
import { x402HTTPClient } from "@x402/core/http";
import { PaymentPayloadV2Schema, PaymentRequiredV2Schema } from "@x402/core/schemas";
import type { PaymentPayload, PaymentRequired, SettleResponse } from "@x402/core/types";
import { canonicalJson } from "../../domain/canonical-json.ts";
import type { Observation } from "../../domain/observation.ts";
import type { Exchange, OperationEvent, OperationPlan } from "../../domain/operation/index.ts";
import type { PaymentVerdict } from "../../domain/operation/state.ts";
import {
  choosePayment,
  paymentFailedMessage,
  paymentIdOf,
  payloadMismatch,
  refusedMessage,
  type PaymentDeclaration,
  type Settlement,
} from "../../domain/payment.ts";
import { standardWebhookHeaders } from "../../events/deliver.ts";
import { isTimeout, readCapped } from "../../tools/http-tool.ts";
import { toolVersion } from "../../tools/catalog.ts";
import type { ToolSpec } from "../../tools/spec.ts";
import type { Env } from "../env.ts";
import { claimsFor } from "../../domain/limit/claims.ts";
import { err } from "../../domain/result.ts";
import type { FrozenRow, Head } from "./contracts.ts";
import { reserveClaims, type Reserved } from "./limits.ts";
import { gather, holdOf } from "./gather.ts";
import { toolName, type OperationLog } from "./log.ts";

/** @x402/core's HTTP client: the header names and encodings of the version in use (v2). */
const x402 = new x402HTTPClient(new x402Client());

export const SIGNER_TIMEOUT_MS = 10_000;

/** What a send carries: the stored payment's headers (null: unpaid), or why nothing may be sent. */
export type Paying = { headers: Record<string, string> | null } | { observation: Observation };

/** Applies an event, writing `frozen` (a new plan) in the same transaction when given. */
export type ApplyWith = (event: OperationEvent, frozen?: FrozenRow) => unknown;

/**
 * Before attempt `attempt` of a paid tool: the stored payload's headers, or the one signature
 * asked for now and stored before this returns. A signer that does not answer sends nothing (a
 * `not_sent`, retried); one that refuses, or signs something else, is a configuration failure.
 * The signer may take seconds: once signed and stored, the send asks what a retry asks (the run's
 * verdict, the Cedar set and the freezes of the moment, `gather`) before any paid byte goes out.
 */
export async function payBeforeSend(
  env: Env,
  log: OperationLog,
  declared: PaymentDeclaration,
  attempt: number,
  secrets: Record<string, string>,
  apply: ApplyWith,
): Promise<Paying> {
  const head = log.head()!;
  const stored = head.frozen.plan.payment;
  if (!stored) return { headers: null };
  if (stored.payload) return { headers: x402.encodePaymentSignatureHeader(stored.payload) };
  const signed = await askSigner(declared, secrets, head.frozen, stored.required, stored);
  if ("observation" in signed) return signed;
  const paymentId = paymentIdOf(signed.payload);
  const now = log.head()!;
  const frozen: FrozenRow = {
    ...now.frozen,
    plan: { ...now.frozen.plan, payment: { ...stored, payload: signed.payload, paymentId } },
  };
  apply({ type: "payment_signed", attempt, paymentId }, frozen);
  // Written only if this attempt is still the one in flight and not cancelled: else send nothing.
  const kept = log.head()!.frozen.plan.payment?.payload;
  if (!kept)
    return { observation: { kind: "not_sent", detail: "the attempt ended before it was paid" } };
  const stopped = await checkAfterSigning(env, log, attempt, apply);
  if (stopped) return { observation: { kind: "not_sent", detail: stopped } };
  return { headers: x402.encodePaymentSignatureHeader(kept) };
}

/**
 * A send point (ARCHITECTURE "a new send point"): the checks a retry makes, after the signature.
 * Unanswered: this attempt sent nothing and is retried (whose alarm asks again). A denial or a
 * `refuse` freeze ends the call, a `hold` freeze holds it (`payment_stopped`): the payload stays
 * stored and unsent. Returns why nothing is sent, or null: send.
 */
async function checkAfterSigning(
  env: Env,
  log: OperationLog,
  attempt: number,
  apply: ApplyWith,
): Promise<string | null> {
  const { frozen } = log.head()!;
  const want = { authorize: { tool: toolName(frozen) }, secretsOf: null, budget: null };
  const gathered = await gather(env, frozen, want, Date.now());
  // Cancelled (or ended) while it asked: the paid request is not sent; the cancel records it.
  const now = log.head()!.state;
  if (now.phase !== "executing" || now.attempt !== attempt || now.cancelRequested)
    return "cancelled before the paid request was sent";
  const { verdict } = gathered;
  if (!verdict.answered)
    return `toolgate could not ask whether the paid request may still be sent (${verdict.detail})`;
  const hold = holdOf(gathered.freeze);
  const stop = hold
    ? ({ kind: "hold", hold } as const)
    : verdict.value.ok
      ? null
      : ({ kind: "denied", ...verdict.value.error } as const);
  if (!stop) return null;
  apply({ type: "payment_stopped", attempt, stop });
  return "the paid request was stopped before it was sent";
}

/**
 * The signer webhook: POST { type, operation_id, tool, payment_required, accepted }, signed per
 * Standard Webhooks with the tool's signer secret (`webhook-id`: the operation's, the same on every
 * ask, so the signer can answer a repeat with the payload it signed). Answers { payment_payload }.
 */
async function askSigner(
  declared: PaymentDeclaration,
  secrets: Record<string, string>,
  frozen: FrozenRow,
  required: PaymentRequired,
  stored: NonNullable<OperationPlan["payment"]>,
): Promise<{ payload: PaymentPayload } | { observation: Observation }> {
  const fail = (kind: "not_sent" | "config_error", detail: string) => ({
    observation: { kind, detail: `payment signer: ${detail}` } as Observation,
  });
  const secret = secrets[declared.signer.secret];
  if (!secret) return fail("config_error", `the tenant has no secret ${declared.signer.secret}`);
  const id = `${frozen.id}.payment`;
  const body = JSON.stringify({
    type: "x402.payment.sign",
    operation_id: frozen.id,
    tool: toolName(frozen),
    payment_required: required,
    accepted: stored.accepted,
  });
  let headers: Record<string, string>;
  try {
    headers = standardWebhookHeaders(secret, id, Date.now(), body);
  } catch (error) {
    return fail("config_error", `the signer secret is not a whsec_ secret (${String(error)})`);
  }
  let response: Response;
  try {
    response = await fetch(declared.signer.url, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(SIGNER_TIMEOUT_MS),
    });
  } catch (error) {
    return fail("not_sent", isTimeout(error) ? "no answer in time" : "could not be reached");
  }
  if (response.status >= 500 || response.status === 429)
    return fail("not_sent", `answered HTTP ${response.status}`);
  if (response.status < 200 || response.status >= 300)
    return fail("config_error", `refused to sign (HTTP ${response.status})`);
  let parsed: unknown = null;
  try {
    parsed = JSON.parse((await readCapped(response)) ?? "null");
  } catch {}
  const payload = PaymentPayloadV2Schema.safeParse(
    (parsed as { payment_payload?: unknown } | null)?.payment_payload,
  );
  if (!payload.success) return fail("config_error", "answered no x402 v2 payment_payload");
  // The signer signs what toolgate accepted, or nothing is sent: it cannot pay another requirement.
  if (canonicalJson(payload.data.accepted) !== canonicalJson(stored.accepted))
    return fail("config_error", "signed another requirement than the one accepted");
  const off = payloadMismatch(stored.accepted, payload.data as PaymentPayload);
  if (off) return fail("config_error", `signed a payment other than the one accepted: ${off}`);
  return { payload: payload.data as PaymentPayload };
}

/**
 * After a paid tool's attempt: a 402 becomes the `payment_required` event (null: not a 402, the
 * attempt finishes as any other). Once a payload was sent, a 402 refuses that payment: recorded
 * failed, never signed again. Accepted: the plan written with the event holds the requirement and,
 * over `approval_over` with no earlier attempt in doubt, the approval a person is asked.
 */
export async function after402(
  env: Env,
  log: OperationLog,
  spec: ToolSpec & { payment: PaymentDeclaration },
  attempt: number,
  observation: Observation,
  exchange: Exchange | undefined,
): Promise<{ event: OperationEvent; frozen?: FrozenRow } | null> {
  if (observation.kind !== "http_error" || observation.status !== 402) return null;
  const head = log.head()!;
  const { plan } = head.frozen;
  const event = (verdict: PaymentVerdict) =>
    ({ type: "payment_required", attempt, observation, exchange, verdict }) as const;
  const refuse = (reason: string, detail: string, released = false) =>
    event({
      kind: "refuse",
      status: "rejected",
      code: "payment_refused",
      reason,
      message: refusedMessage(detail),
      ...(released ? { released } : {}),
    });
  if (plan.payment?.payload) {
    const why = observation.detail || "HTTP 402";
    return {
      event: event({
        kind: "refuse",
        status: "failed",
        code: "payment_failed",
        reason: "payment_failed",
        message: paymentFailedMessage(why),
      }),
    };
  }
  const required = readRequirement(exchange);
  const choice = choosePayment(spec.payment, required);
  if (choice.kind === "refuse") return { event: refuse(choice.reason, choice.detail) };
  // Reserved against the tool's `payment` limits across runs before anything is signed.
  const limited = await reservePayment(env, head.frozen, spec, choice.accepted.amount);
  if ("unavailable" in limited)
    return {
      event: {
        type: "attempt_finished",
        attempt,
        observation: { kind: "not_sent", detail: limited.unavailable },
        exchange,
      },
    };
  if ("denied" in limited)
    return { event: refuse("payment_limit", limited.denied, limited.held), frozen: limited.frozen };
  const asks = choice.approval || limited.needsApproval;
  const mayHaveApplied = head.state.phase === "executing" && head.state.mayHaveApplied !== null;
  if (asks && mayHaveApplied)
    return {
      event: refuse(
        "payment_approval",
        "a person must approve it, and an earlier attempt is unknown",
      ),
    };
  const rule = spec.approval;
  const { accepted } = choice;
  const approval = asks
    ? {
        inputHash: head.frozen.input_hash,
        toolVersion: await toolVersion(head.frozen.source),
        requestedBy: plan.policyRequest?.user.id ?? plan.approval?.requestedBy ?? "",
        fourEyes: rule.fourEyes,
        ...(rule.stepUp ? { stepUp: rule.stepUp } : {}),
        ...(rule.route ? { route: rule.route } : {}),
        expiresAtMs: Date.now() + rule.expiresInMs,
        preview: false,
        payment: {
          amount: accepted.amount,
          asset: accepted.asset,
          network: accepted.network,
          payTo: accepted.payTo,
        },
      }
    : null;
  const frozen: FrozenRow = {
    ...head.frozen,
    plan: {
      ...limited.frozen.plan,
      payment: { required: required!, accepted, payload: null, paymentId: null },
      ...(approval ? { approval } : {}),
    },
  };
  const verdict: PaymentVerdict = {
    kind: "pay",
    amount: accepted.amount,
    asset: accepted.asset,
    payTo: accepted.payTo,
    network: accepted.network,
    approval,
  };
  return { event: event(verdict), frozen };
}

/**
 * The payment's claims on the tool's limits across runs (`payment: true`), reserved at their
 * objects (idempotent by operation id) and frozen into the plan written with the event: released by
 * the recorded outcome when nothing was paid. A limit object that does not answer: nothing is
 * signed now (the 402 is retried as an attempt that sent nothing).
 */
async function reservePayment(
  env: Env,
  frozen: FrozenRow,
  spec: ToolSpec,
  amount: string,
): Promise<
  | { unavailable: string }
  | { denied: string; held: boolean; frozen: FrozenRow }
  | { needsApproval: boolean; frozen: FrozenRow }
> {
  const { plan } = frozen;
  if (!spec.limitsAcrossRuns.some((limit) => limit.measure.kind === "payment"))
    return { needsApproval: false, frozen };
  const request = plan.policyRequest;
  const units = Number(amount);
  const claims = Number.isSafeInteger(units)
    ? claimsFor(
        spec.limitsAcrossRuns,
        {},
        request?.run ?? {},
        request?.user.id ?? "",
        units,
        frozen.run_id,
      )
    : err({ code: "policy_denied" as const, message: `amount ${amount} is too large to count` });
  if (!claims.ok) return { denied: claims.error.message, held: false, frozen };
  let reserved: Reserved;
  try {
    reserved = await reserveClaims(env, frozen.tenant_id, frozen.id, claims.value);
  } catch (error) {
    return { unavailable: `a limit across runs could not be asked: ${String(error)}` };
  }
  const held: FrozenRow = {
    ...frozen,
    plan: { ...plan, limits: [...(plan.limits ?? []), ...reserved.held] },
  };
  if (reserved.denied)
    return {
      denied: `it would go over the limit ${reserved.denied.limit}`,
      held: reserved.held.length > 0,
      frozen: held,
    };
  return { needsApproval: reserved.needsApproval, frozen: held };
}

/** The 402's PAYMENT-REQUIRED, decoded by @x402/core and checked by its v2 schema; null: none readable. */
function readRequirement(exchange: Exchange | undefined): PaymentRequired | null {
  const headers = exchange?.response?.headers ?? {};
  try {
    const decoded = x402.getPaymentRequiredResponse((name) => headers[name.toLowerCase()]);
    const checked = PaymentRequiredV2Schema.safeParse(decoded);
    return checked.success ? (checked.data as PaymentRequired) : null;
  } catch {
    return null;
  }
}

/**
 * The plan holding the merchant's settlement, when this answer to the signed payment carried one
 * (PAYMENT-RESPONSE, decoded by @x402/core): written with the attempt's row, so the model's
 * envelope says what was paid and how it settled. Undefined: nothing to record.
 */
export function settledRow(
  log: OperationLog,
  exchange: Exchange | undefined,
): FrozenRow | undefined {
  const { frozen } = log.head()!;
  const stored = frozen.plan.payment;
  const settlement = settlementOf(exchange?.response?.headers);
  if (!stored?.payload || !settlement) return undefined;
  return { ...frozen, plan: { ...frozen.plan, payment: { ...stored, settlement } } };
}

/** An answer's PAYMENT-RESPONSE, decoded by @x402/core; null: none readable. */
function settleResponseOf(headers: Record<string, string> | undefined): SettleResponse | null {
  if (headers?.["payment-response"] === undefined) return null;
  try {
    return x402.getPaymentSettleResponse((name) => headers[name.toLowerCase()]);
  } catch {
    return null;
  }
}

/** The settlement as the model reads it: no payer, no extensions. */
function settlementOf(headers: Record<string, string> | undefined): Settlement | null {
  const settled = settleResponseOf(headers);
  if (!settled) return null;
  const { success, transaction, network } = settled;
  return { success, transaction, network };
}

/**
 * An x402 operation's payment (issue 37), for GET /v1/operations/{id}: what was accepted, the
 * payment's id once signed, and the merchant's settlement (its PAYMENT-RESPONSE, decoded by
 * @x402/core) from the newest answer that carried one. Absent: no 402 was accepted.
 */
export type PaymentView = {
  payment?: {
    amount: string;
    asset: string;
    pay_to: string;
    network: string;
    signed: boolean;
    payment_id: string | null;
    settlement: SettleResponse | null;
  };
};

export function paymentViewOf(log: OperationLog, head: Head): PaymentView {
  const stored = head.frozen.plan.payment;
  if (!stored) return {};
  const answered = log
    .events()
    .flatMap((e) => (e.type === "attempt_finished" && e.response ? [e.response.headers] : []))
    .filter((headers) => headers["payment-response"] !== undefined)
    .at(-1);
  const settlement = settleResponseOf(answered);
  const { amount, asset, payTo, network } = stored.accepted;
  return {
    payment: {
      amount,
      asset,
      pay_to: payTo,
      network,
      signed: stored.payload !== null,
      payment_id: stored.paymentId,
      settlement,
    },
  };
}
