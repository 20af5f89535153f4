// Verification probes (POST /v1/tools/{name}/verify): one request sent through the executor's
// own request path (http-tool.ts), reported raw as an Exchange for the verification judges.
// Secret values are scrubbed from everything it reports, before any evidence is cut.
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import type { FrozenInput } from "../domain/identity.ts";
import { cutClear, REDACTED } from "../domain/redact.ts";
import type { Exchange, Received } from "../domain/verification.ts";
import {
  build,
  isTimeout,
  MAX_RESPONSE_BYTES,
  readCapped,
  send,
  validateOutput,
} from "./http-tool.ts";
import { insecureForSecrets, scrubSecrets, scrubText, secretForms } from "./secrets.ts";
import type { RequestContext, ToolSpec } from "./spec.ts";

/** How much of a verification answer's body is kept as evidence (the digest covers all of it). */
export const EVIDENCE_BYTES = 4096;

/**
 * One request of POST /v1/tools/{name}/verify, built and sent exactly as an attempt (or a status
 * lookup) is — same builder, secrets over https only, the key header, the timeout, no redirects,
 * the size cap — but reported raw: what was sent, the status, the whole body's digest and a capped
 * copy as evidence. Secret values are scrubbed from all of it.
 */
export async function sendProbe(
  spec: ToolSpec,
  which: "request" | "reconcile",
  input: FrozenInput,
  ctx: RequestContext,
): Promise<Exchange> {
  return scrubSecrets(await probeOnce(spec, which, input, ctx), Object.values(ctx.secrets));
}

async function probeOnce(
  spec: ToolSpec,
  which: "request" | "reconcile",
  input: FrozenInput,
  ctx: RequestContext,
): Promise<Exchange> {
  const key = ctx.idempotencyKey;
  const builder = which === "request" ? spec.buildRequest : spec.buildReconcile;
  const built = builder
    ? build(builder, input, ctx)
    : { error: "the tool has no reconcile request" };
  const unsent = (detail: string): Exchange => ({
    idempotency_key: key,
    sent: { method: "", url: "", headers: {}, body: null },
    received: { kind: "no_response", detail: `nothing was sent: ${detail}` },
  });
  if ("error" in built) return unsent(built.error);
  const insecure = insecureForSecrets(built.url, ctx);
  if (insecure) return unsent(insecure);
  if (which === "request" && spec.idempotency.mode === "header" && spec.idempotency.header)
    built.headers[spec.idempotency.header] = key;
  const sent = {
    method: built.method,
    url: built.url,
    headers: { ...built.headers },
    body: built.body === null ? null : parseOrText(built.body),
  };
  let received: Received;
  try {
    const response = await send(built, spec.timeoutMs, null);
    const text = await readCapped(response);
    if (text === null)
      received = {
        kind: "response",
        status: response.status,
        body: `(larger than ${MAX_RESPONSE_BYTES} bytes)`,
        digest: "oversized",
        truncated: true,
        valid_output: false,
      };
    else {
      const parsed = parseOrText(text);
      // Scrubbed before it is cut (and never cut inside a secret): see cutClear.
      const secrets = Object.values(ctx.secrets);
      received = {
        kind: "response",
        status: response.status,
        body:
          text.length <= EVIDENCE_BYTES
            ? parsed
            : cutClear(scrubText(text, secrets), EVIDENCE_BYTES, [
                ...secretForms(secrets),
                REDACTED,
              ]),
        digest: await sha256Hex(typeof parsed === "string" ? parsed : canonicalJson(parsed)),
        truncated: text.length > EVIDENCE_BYTES,
        valid_output: validateOutput(spec, text).kind === "ok",
      };
    }
  } catch (error) {
    received = {
      kind: "no_response",
      detail: isTimeout(error) ? `no complete response within ${spec.timeoutMs} ms` : String(error),
    };
  }
  return { idempotency_key: key, sent, received };
}

function parseOrText(text: string): unknown {
  try {
    return text.length === 0 ? "" : JSON.parse(text);
  } catch {
    return text;
  }
}
