// The HTTP executor: performs one attempt (or one reconcile lookup) and reports exactly one
// observation as plain data, whatever fails: it never throws, never retries and never decides
// (classify() does). Redirects are not followed; bodies are size-capped and read under the same
// timeout as the request. It never claims "nothing was sent": workerd reports a refused, a reset and
// a dropped connection alike ("Network connection lost."), so only Cloudflare's 521/522/523 prove it.
// Secrets travel only over https (loopback http in development), and every injected secret value
// is scrubbed from whatever upstream text comes back before anyone stores or shows it (secrets.ts).
// Verification probes (probe.ts) go through this same request path.
import { parseRetryAfterMs } from "../domain/retry.ts";
import type { LookupObservation, Observation } from "../domain/observation.ts";
import type { FrozenInput } from "../domain/identity.ts";
import type { BuiltRequest, RequestBuilder, RequestContext, SendRoute, ToolSpec } from "./spec.ts";
import { sandboxed } from "./shadow.ts";
import { jsonTextProblem } from "../domain/strict-json.ts";
import { cutClear, REDACTED, redactionFor } from "../domain/redact.ts";
import type { Exchange } from "../domain/operation/index.ts";
import {
  insecureForSecrets,
  maskSecrets,
  scrubSecrets,
  scrubText,
  secretForms,
} from "./secrets.ts";

export const MAX_RESPONSE_BYTES = 1024 * 1024;

/** Every request of an operation states its route (shadow.ts `routeOf`, from the frozen plan). */
export type SendContext = RequestContext & { route: SendRoute };

export type AttemptContext = SendContext & {
  signal: AbortSignal | null;
  fencingToken: string | null;
  /** x402 (issue 37): the stored payment's headers, the same on every attempt (absent: unpaid). */
  payment?: Record<string, string> | null;
};

// A host that does not resolve is not special-cased: workerd (local, compatibility date 2026-11-01)
// rejects fetch("http://nonexistent.invalid/") with a generic `Error: internal error; reference = …`
// (its log: "failed to lookup address information: Name or service not known"), the same error any
// internal failure produces, so it cannot prove that nothing was sent. It is `connection_lost`.
export async function sendAttempt(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: AttemptContext,
): Promise<Observation> {
  return (await sendAttemptTraced(spec, input, ctx)).observation;
}

/**
 * One attempt and its exchange for the trace: the request as sent with every secret by name (never
 * valued), and the answer's status, the headers in KEPT_HEADERS and an error body's start. Secrets
 * are scrubbed from all of it once more, as from the observation.
 */
export async function sendAttemptTraced(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: AttemptContext,
): Promise<{ observation: Observation; exchange: Exchange }> {
  const exchange: Exchange = { request: null, response: null };
  const observation = await attemptOnce(spec, input, ctx, exchange);
  const values = Object.values(ctx.secrets);
  return {
    observation: scrubSecrets(observation, values),
    exchange: scrubSecrets(
      {
        request: exchange.request && maskSecrets(exchange.request, ctx.secrets),
        response: exchange.response && {
          ...exchange.response,
          snippet: observation.kind === "http_error" ? observation.detail : null,
        },
      },
      values,
    ),
  };
}

/** The answer headers an operator reads (the rest is noise, or may carry what should not be kept). */
const KEPT_HEADERS = [
  "content-type",
  "retry-after",
  // The IETF ratelimit-headers draft (issue 34): an answer saying the quota is used up pauses the origin.
  "ratelimit",
  "ratelimit-policy",
  "location",
  "idempotent-replayed",
  "request-id",
  "x-request-id",
  "cf-ray",
  // x402 (issue 37): the 402's requirement, and the settlement of a paid request.
  "payment-required",
  "payment-response",
];

const mapValues = (record: Record<string, string>, to: (value: string) => string) =>
  Object.fromEntries(Object.entries(record).map(([name, value]) => [name, to(value)]));

const keptHeaders = (headers: Headers): Record<string, string> =>
  Object.fromEntries(
    KEPT_HEADERS.flatMap((name) => {
      const value = headers.get(name);
      return value === null ? [] : [[name, value]];
    }),
  );

export async function sendLookup(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: SendContext,
): Promise<LookupObservation> {
  return scrubSecrets(await lookupOnce(spec, input, ctx), Object.values(ctx.secrets));
}

/** What the approver is shown: the upstream's answer to the preview request (scrubbed, capped), or why there is none. */
export type Preview = { status: number | null; body: unknown; detail: string | null };

export async function sendPreview(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: SendContext,
): Promise<Preview> {
  return scrubSecrets(await previewOnce(spec, input, ctx), Object.values(ctx.secrets));
}

async function attemptOnce(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: AttemptContext,
  exchange: Exchange,
): Promise<Observation> {
  const made = build(spec.buildRequest, input, ctx);
  if ("error" in made) return { kind: "config_error", detail: made.error };
  const routed = sandboxed(made, ctx.route);
  if ("refuse" in routed) return { kind: "config_error", detail: routed.refuse };
  if ("answer" in routed) return validateOutput(spec, JSON.stringify(routed.answer));
  const built = routed.send;
  const insecure = insecureForSecrets(built.url, ctx);
  if (insecure) return { kind: "config_error", detail: insecure };
  if (spec.idempotency.mode === "header" && spec.idempotency.header)
    built.headers[spec.idempotency.header] = ctx.idempotencyKey;
  if (ctx.fencingToken) built.headers["Toolgate-Fencing-Token"] = ctx.fencingToken;
  const paid = ctx.payment ?? {};
  exchange.request = {
    method: built.method,
    url: built.url,
    // The signed payment is stored with the operation; the trace says it went, not what it says.
    headers: { ...built.headers, ...mapValues(paid, () => "(the operation's x402 payment)") },
    body: built.body ?? null,
  };
  Object.assign(built.headers, paid);
  let response: Response;
  try {
    response = await send(built, spec.timeoutMs, ctx.signal);
  } catch (error) {
    return isTimeout(error)
      ? { kind: "timeout", detail: `no response within ${spec.timeoutMs} ms` }
      : { kind: "connection_lost", detail: String(error) };
  }
  exchange.response = {
    status: response.status,
    headers: keptHeaders(response.headers),
    snippet: null,
  };
  if (response.status < 200 || response.status >= 300) {
    const detail =
      response.status >= 300 && response.status < 400
        ? `redirect to ${response.headers.get("Location") ?? "?"} not followed`
        : await snippet(response, ctx.secrets, redactionFor(spec.redact, input.value).values);
    return {
      kind: "http_error",
      status: response.status,
      retryAfterMs: parseRetryAfterMs(response.headers.get("Retry-After"), Date.now()),
      detail,
    };
  }
  // The fetch signal also aborts the body stream (observed in workerd: a body that stalls after
  // the headers rejects the read with TimeoutError when `timeout_ms` runs out).
  let body: string | null;
  try {
    body = await readCapped(response);
  } catch (error) {
    return {
      kind: "body_lost",
      timedOut: isTimeout(error),
      detail: `HTTP ${response.status} arrived but its body could not be read (${isTimeout(error) ? `not complete within ${spec.timeoutMs} ms` : String(error)})`,
    };
  }
  if (body === null)
    return { kind: "invalid_output", detail: `response larger than ${MAX_RESPONSE_BYTES} bytes` };
  const observed = validateOutput(spec, body);
  return observed.kind === "ok" ? { ...observed, status: response.status } : observed;
}

async function lookupOnce(
  spec: ToolSpec,
  input: FrozenInput,
  ctx: SendContext,
): Promise<LookupObservation> {
  if (!spec.buildReconcile)
    return { kind: "inconclusive", detail: "the tool has no reconcile request" };
  const made = build(spec.buildReconcile, input, ctx);
  if ("error" in made) return { kind: "inconclusive", detail: made.error };
  const routed = sandboxed(made, ctx.route);
  if ("refuse" in routed) return { kind: "inconclusive", detail: routed.refuse };
  if ("answer" in routed) return { kind: "found", result: routed.answer };
  const built = routed.send;
  const insecure = insecureForSecrets(built.url, ctx);
  if (insecure) return { kind: "inconclusive", detail: insecure };
  try {
    const response = await send(built, spec.timeoutMs, null);
    if (response.status === 404) return { kind: "not_found" };
    if (response.status !== 200)
      return { kind: "inconclusive", detail: `status lookup answered HTTP ${response.status}` };
    const body = await readCapped(response);
    const observed = body === null ? null : validateOutput(spec, body);
    // The effect happened either way; a malformed lookup answer still isn't proof of absence.
    return observed?.kind === "ok"
      ? { kind: "found", result: observed.result }
      : { kind: "inconclusive", detail: "status lookup answer was not valid output" };
  } catch (error) {
    return { kind: "inconclusive", detail: String(error) };
  }
}

async function previewOnce(spec: ToolSpec, input: FrozenInput, ctx: SendContext): Promise<Preview> {
  if (!spec.buildPreview) return { status: null, body: null, detail: "the tool has no preview" };
  const made = build(spec.buildPreview, input, ctx);
  if ("error" in made) return { status: null, body: null, detail: made.error };
  const routed = sandboxed(made, ctx.route);
  if ("refuse" in routed) return { status: null, body: null, detail: routed.refuse };
  if ("answer" in routed)
    return {
      status: null,
      body: null,
      detail: "shadow run: the sandbox has a fixed answer, no preview",
    };
  const built = routed.send;
  const insecure = insecureForSecrets(built.url, ctx);
  if (insecure) return { status: null, body: null, detail: insecure };
  try {
    const response = await send(built, spec.timeoutMs, null);
    const text = await readCapped(response);
    if (text === null)
      return {
        status: response.status,
        body: null,
        detail: `preview larger than ${MAX_RESPONSE_BYTES} bytes`,
      };
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: response.status, body, detail: null };
  } catch (error) {
    return { status: null, body: null, detail: String(error) };
  }
}

/** A code tool's builder is code: if it throws, nothing was sent and the call is misconfigured. */
export function build(
  builder: RequestBuilder,
  input: FrozenInput,
  ctx: RequestContext,
): BuiltRequest | { error: string } {
  try {
    return builder(input, ctx);
  } catch (error) {
    return { error: `the request could not be built: ${String(error)}` };
  }
}

export function send(
  built: BuiltRequest,
  timeoutMs: number,
  signal: AbortSignal | null,
): Promise<Response> {
  const timeout = AbortSignal.timeout(timeoutMs);
  return fetch(built.url, {
    method: built.method,
    headers: built.headers,
    body: built.body,
    redirect: "manual",
    signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
  });
}

export function validateOutput(spec: ToolSpec, text: string): Observation {
  let parsed: unknown;
  try {
    parsed = text.length === 0 ? null : JSON.parse(text);
  } catch {
    return { kind: "invalid_output", detail: "response is not JSON" };
  }
  const problem = jsonTextProblem(text);
  if (problem) return { kind: "invalid_output", detail: `response is refused: ${problem}` };
  if (!spec.output) return { kind: "ok", result: parsed };
  const checked = spec.output.safeParse(parsed);
  return checked.success
    ? { kind: "ok", result: checked.data }
    : {
        kind: "invalid_output",
        detail: `response does not match the output schema: ${checked.error.issues.map((i) => i.message).join("; ")}`,
      };
}

export async function readCapped(response: Response): Promise<string | null> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_RESPONSE_BYTES) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

const SNIPPET_CHARS = 200;

/**
 * The start of an error body, for the model; the status alone decides, so an unreadable body is
 * fine. Secrets are scrubbed from the whole body first, and the cut never leaves the start of a
 * secret, of an argument the tool redacts (scrubbed by whole value later, in traces and the
 * console) or of "[redacted]": a prefix cut off at the boundary is a leak no later scrub can see.
 */
async function snippet(
  response: Response,
  secrets: Record<string, string>,
  redacted: readonly string[],
): Promise<string> {
  try {
    const values = Object.values(secrets);
    const text = scrubText((await readCapped(response)) ?? "", values);
    return cutClear(text, SNIPPET_CHARS, [...secretForms(values), ...redacted, REDACTED]);
  } catch {
    return "(the error body could not be read)";
  }
}

export const isTimeout = (error: unknown) =>
  error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
