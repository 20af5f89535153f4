// JSON tool manifests (DESIGN.md "Tools") → ToolSpec: the one compile. It parses the manifest
// (schema.ts), closes the input schema (domain/json-schema.ts) and turns it into zod
// (z.fromJSONSchema), checks every URL template against the host policy (url.ts) and what the tool
// reads from a run's context against the schema (context.ts), and builds the request, reconcile
// and preview builders.
import { z } from "zod";
import { DEFAULT_APPROVAL_TTL_MS } from "../../domain/operation/index.ts";
import { describeInvalid } from "../../domain/invalid-input.ts";
import { closeSchema, refProblem, type Schema } from "../../domain/json-schema.ts";
import { parsePointers } from "../../domain/redact.ts";
import { DEFAULT_KEY_TTL_MS } from "../../domain/retry-late.ts";
import { err, ok, type Result } from "../../domain/result.ts";
import { toStrictSchema } from "../../providers/strict-schema.ts";
import type { ApprovalRule, ToolSpec } from "../spec.ts";
import { Manifest, type HostPolicy, type ManifestError } from "./schema.ts";
import { checkContextUses } from "./context.ts";
import { compileAcrossRuns } from "./limits.ts";
import { compileSandbox } from "./sandbox.ts";
import { compileCompensate } from "./compensate.ts";
import { compilePayment } from "./payment.ts";
import { buildUrl, checkTemplate, requestBuilder, resourceKeyFor } from "./url.ts";
import { checkAuth } from "./auth.ts";

export function compileManifest(raw: unknown, hosts: HostPolicy): Result<ToolSpec, ManifestError> {
  const parsed = Manifest.safeParse(raw, { reportInput: true });
  if (!parsed.success)
    return err({ code: "invalid_manifest", detail: describeInvalid(parsed.error) });
  const m = parsed.data;
  const pointers = checkRedact(m.redact);
  if (pointers) return err(pointers);
  for (const [which, schema] of [
    ["input_schema", m.input_schema],
    ["output_schema", m.output_schema],
  ] as const) {
    const problem = schema ? refProblem(schema as Schema) : null;
    if (problem) return err({ code: "invalid_manifest", detail: `${which}: ${problem}` });
  }
  const inputJsonSchema = closeSchema(m.input_schema);
  let input: z.ZodType;
  let output: z.ZodType | null = null;
  try {
    input = z.fromJSONSchema(inputJsonSchema as never);
    if (m.output_schema) output = z.fromJSONSchema(m.output_schema as never);
  } catch (error) {
    return err({
      code: "invalid_manifest",
      detail: `schema could not be compiled: ${String(error)}`,
    });
  }
  const templates = [
    m.request,
    ...(m.reconcile
      ? [
          {
            method: m.reconcile.method ?? "GET",
            url: m.reconcile.url,
            headers: m.reconcile.headers,
          },
        ]
      : []),
    ...(m.preview ? [m.preview] : []),
  ];
  const secretNames = new Set<string>();
  for (const template of templates) {
    const checked = checkTemplate(template, hosts);
    if (!checked.ok) return checked;
    checked.value.forEach((name) => secretNames.add(name));
  }
  const auth = checkAuth(m.auth, templates);
  if (!auth.ok) return auth;
  const request = requestBuilder(m.request.method, m.request.url, m.request.headers, true);
  if (m.resource !== undefined && m.risk === "read")
    return err({
      code: "invalid_manifest",
      detail: "resource: only writes take a resource lock (reads never conflict)",
    });
  // Never accepted and ignored: only a write with a key or a status lookup is settled late.
  if (
    m.idempotency.key_ttl_ms !== undefined &&
    (m.risk === "read" || (m.idempotency.mode === "none" && !m.reconcile))
  )
    return err({
      code: "invalid_manifest",
      detail:
        "idempotency.key_ttl_ms: only a write with an idempotency key (mode header or natural) or a status lookup (reconcile) is settled late",
    });
  if (m.preview && normalizeApproval(m).mode === "never")
    return err({
      code: "invalid_manifest",
      detail: "preview: shown to an approver, so it needs an approval rule that can ask",
    });
  const context = checkContextUses(m.bind, m.limits, inputJsonSchema);
  if (!context.ok) return context;
  const acrossRuns = compileAcrossRuns(m.limits_across_runs, inputJsonSchema);
  if (!acrossRuns.ok) return acrossRuns;
  const sandbox = compileSandbox(m, output, hosts);
  if (!sandbox.ok) return sandbox;
  const compensate = compileCompensate(m);
  if (!compensate.ok) return compensate;
  const payment = compilePayment(m, hosts);
  if (!payment.ok) return payment;
  // The signer's secret is fetched with the tool's others (never sent to the tool: no header names it).
  if (payment.value) secretNames.add(payment.value.signer.secret);
  // `{payment_id}` names the payment in a paid tool's URLs: never an argument of the same name.
  if (payment.value && "payment_id" in ((inputJsonSchema.properties ?? {}) as object))
    return err({
      code: "invalid_manifest",
      detail: "input_schema: payment_id is the x402 payment's id in a paid tool's templates",
    });
  if (!payment.value && acrossRuns.value.some((limit) => limit.measure.kind === "payment"))
    return err({
      code: "invalid_manifest",
      detail: 'limits_across_runs: "payment": true counts x402 payments; declare payment',
    });
  const reconcile = m.reconcile
    ? requestBuilder(m.reconcile.method ?? "GET", m.reconcile.url, m.reconcile.headers, false)
    : null;
  const urls = templates.map((template) => template.url);
  return ok({
    name: m.name,
    description: m.description,
    risk: m.risk,
    input,
    output,
    inputJsonSchema,
    strictExport: toStrictSchema(inputJsonSchema, Object.keys(m.bind)).strict,
    checkArguments: (args) => {
      for (const url of urls) {
        const built = buildUrl(url, args, "k", m.payment ? "p" : undefined);
        if (!built.ok) return built.error;
      }
      return null;
    },
    describeTarget: (args) => {
      const built = buildUrl(m.request.url, args, "{idempotency_key}");
      return built.ok
        ? `${m.request.method} ${built.value}`
        : `${m.request.method} ${m.request.url}`;
    },
    secretNames: [...secretNames],
    auth: auth.value,
    configNames: [],
    idempotency:
      m.idempotency.mode === "header"
        ? { mode: "header", header: m.idempotency.header }
        : { mode: m.idempotency.mode, header: null },
    buildRequest: request,
    buildReconcile: reconcile,
    buildPreview: m.preview
      ? requestBuilder(m.preview.method, m.preview.url, m.preview.headers, true)
      : null,
    operationKey: m.operation_key,
    operationScope: m.operation_scope,
    resource: m.resource ?? null,
    resourceKey: resourceKeyFor(m.resource ?? null),
    bind: m.bind,
    requiresScopes: m.requires_scopes,
    approval: normalizeApproval(m),
    limits: m.limits,
    limitsAcrossRuns: acrossRuns.value,
    quota: m.quota ?? null,
    timeoutMs: m.timeout_ms,
    reconcileSettleMs: m.reconcile?.settle_ms ?? m.timeout_ms,
    keyTtlMs: m.idempotency.key_ttl_ms ?? DEFAULT_KEY_TTL_MS,
    retry: {
      maxAttempts: m.max_attempts,
      minDelayMs: m.retry.min_delay_ms,
      initialDelayMs: m.retry.initial_delay_ms,
      maxDelayMs: m.retry.max_delay_ms,
      maxElapsedMs: m.retry.max_elapsed_ms,
    },
    cost: m.cost,
    redact: m.redact,
    traceContent: m.trace,
    sandbox: sandbox.value,
    compensate: compensate.value,
    payment: payment.value,
  });
}

/** Every `redact` entry must be a JSON Pointer to a field: a malformed one would hide nothing. */
export function checkRedact(
  pointers: readonly string[],
): { code: "invalid_pointer"; detail: string } | null {
  const parsed = parsePointers(pointers);
  return parsed.ok
    ? null
    : {
        code: "invalid_pointer",
        detail: `redact: ${JSON.stringify(parsed.error.pointer)} is not a JSON Pointer to a field (${parsed.error.detail})`,
      };
}

/** `irreversible_write` asks a person by default; a `when` rule wins over a mode. */
export function normalizeApproval(m: Pick<Manifest, "risk" | "approval">): ApprovalRule {
  const expiresInMs = DEFAULT_APPROVAL_TTL_MS;
  const a = m.approval;
  if (a === undefined)
    return {
      mode: m.risk === "irreversible_write" ? "always" : "never",
      when: null,
      expiresInMs,
      fourEyes: true,
    };
  if (a === "always" || a === "never") return { mode: a, when: null, expiresInMs, fourEyes: true };
  return {
    mode: a.when ? "when" : a.mode!,
    when: a.when ?? null,
    expiresInMs: a.expires_in_ms ?? expiresInMs,
    fourEyes: a.four_eyes ?? true,
    ...(a.step_up ? { stepUp: a.step_up } : {}),
    ...(a.route
      ? {
          route: {
            quorum: a.quorum ?? 1,
            steps: a.route.map((step) => ({
              group: step.group,
              remindAfterMs: step.remind_after_ms ?? null,
              escalateAfterMs: step.escalate_after_ms ?? null,
            })),
          },
        }
      : {}),
  };
}
