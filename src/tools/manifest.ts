// JSON tool manifests (DESIGN.md "Tools") → ToolSpec. The manifest schema is the wire contract for
// PUT /v1/tools/{name}; compilation turns JSON Schema into zod (z.fromJSONSchema) and the URL
// template into a request builder whose scheme, host and port no argument can change.
import { z } from "zod";
import { DEFAULT_RETRY } from "../domain/retry.ts";
import { err, ok, type Result } from "../domain/result.ts";
import type { ApprovalRule, RequestBuilder, ToolSpec } from "./spec.ts";

const Comparison = z.object({ gt: z.number(), gte: z.number(), lt: z.number(), lte: z.number(), eq: z.unknown(), in: z.array(z.unknown()) }).partial();
const Approval = z.union([
  z.enum(["always", "never"]),
  z.object({ when: z.record(z.string(), Comparison) }),
  z.object({ mode: z.enum(["always", "never"]), when: z.record(z.string(), Comparison).optional(), expires_in_ms: z.number().int().positive().optional() }),
]);
const RequestTemplate = z.object({
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
  url: z.string().max(2048),
  headers: z.record(z.string(), z.string()).default({}),
});

export const Manifest = z.object({
  name: z.string().regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/, "tool names are 1-64 letters, digits, _ or -, starting with a letter"),
  description: z.string().min(1).max(4096),
  input_schema: z.record(z.string(), z.unknown()),
  output_schema: z.record(z.string(), z.unknown()).optional(),
  risk: z.enum(["read", "write", "irreversible_write"]),
  request: RequestTemplate,
  idempotency: z.discriminatedUnion("mode", [
    z.object({ mode: z.literal("header"), header: z.string().min(1).default("Idempotency-Key") }),
    z.object({ mode: z.literal("natural") }),
    z.object({ mode: z.literal("none") }),
  ]).default({ mode: "none" }),
  // settle_ms: how long after an ambiguous attempt's own timeout a 404 still only means "not yet".
  reconcile: RequestTemplate.partial({ method: true }).extend({ settle_ms: z.number().int().min(0).max(3_600_000).optional() }).optional(),
  operation_key: z.array(z.string()).default([]),
  operation_scope: z.enum(["run", "tenant"]).default("run"),
  resource: z.string().optional(),
  bind: z.record(z.string(), z.string().regex(/^context\.[a-zA-Z0-9_]+$/, "bind values look like context.field")).default({}),
  requires_scopes: z.array(z.string()).default([]),
  approval: Approval.optional(),
  limits: z.record(z.string(), z.object({ max: z.union([z.number(), z.string()]), min: z.union([z.number(), z.string()]), enum: z.array(z.unknown()) }).partial()).default({}),
  timeout_ms: z.number().int().min(1).max(120_000).default(10_000),
  max_attempts: z.number().int().min(1).max(20).default(DEFAULT_RETRY.maxAttempts),
  retry: z.object({
    min_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.minDelayMs),
    initial_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.initialDelayMs),
    max_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxDelayMs),
    max_elapsed_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxElapsedMs),
  }).default({ min_delay_ms: DEFAULT_RETRY.minDelayMs, initial_delay_ms: DEFAULT_RETRY.initialDelayMs, max_delay_ms: DEFAULT_RETRY.maxDelayMs, max_elapsed_ms: DEFAULT_RETRY.maxElapsedMs }),
  cost: z.number().min(0).default(1),
  redact: z.array(z.string()).default([]),
});
export type Manifest = z.infer<typeof Manifest>;

export type ManifestError = { code: "invalid_manifest"; detail: string } | { code: "upstream_not_allowed"; detail: string };

/** Hosts tools may target: the deployment allow-list (exact or `*.suffix`), plus loopback in development. */
export type HostPolicy = { allowlist: string[]; allowLoopback: boolean };

export function compileManifest(raw: unknown, hosts: HostPolicy): Result<ToolSpec, ManifestError> {
  const parsed = Manifest.safeParse(raw);
  if (!parsed.success) return err({ code: "invalid_manifest", detail: z.prettifyError(parsed.error) });
  const m = parsed.data;
  let input: z.ZodType;
  let output: z.ZodType | null = null;
  try {
    input = z.fromJSONSchema(m.input_schema as never);
    if (m.output_schema) output = z.fromJSONSchema(m.output_schema as never);
  } catch (error) {
    return err({ code: "invalid_manifest", detail: `schema could not be compiled: ${String(error)}` });
  }
  const templates = [m.request.url, ...(m.reconcile?.url ? [m.reconcile.url] : [])];
  for (const url of templates) {
    const checked = checkUrlTemplate(url, hosts);
    if (!checked.ok) return checked;
  }
  const approval: ApprovalRule = normalizeApproval(m);
  return ok({
    name: m.name,
    description: m.description,
    risk: m.risk,
    input,
    output,
    inputJsonSchema: m.input_schema,
    idempotency: m.idempotency.mode === "header" ? { mode: "header", header: m.idempotency.header } : { mode: m.idempotency.mode, header: null },
    buildRequest: requestBuilder(m.request.method, m.request.url, m.request.headers, true),
    buildReconcile: m.reconcile?.url ? requestBuilder(m.reconcile.method ?? "GET", m.reconcile.url, m.reconcile.headers ?? {}, false) : null,
    operationKey: m.operation_key,
    operationScope: m.operation_scope,
    resource: m.resource ?? null,
    bind: m.bind,
    requiresScopes: m.requires_scopes,
    approval,
    limits: m.limits,
    timeoutMs: m.timeout_ms,
    reconcileSettleMs: m.reconcile?.settle_ms ?? m.timeout_ms,
    retry: { maxAttempts: m.max_attempts, minDelayMs: m.retry.min_delay_ms, initialDelayMs: m.retry.initial_delay_ms, maxDelayMs: m.retry.max_delay_ms, maxElapsedMs: m.retry.max_elapsed_ms },
    cost: m.cost,
    redact: m.redact,
  });
}

function normalizeApproval(m: Manifest): ApprovalRule {
  const expiresInMs = 15 * 60_000;
  const a = m.approval;
  if (a === undefined) return { mode: m.risk === "irreversible_write" ? "always" : "never", when: null, expiresInMs };
  if (a === "always" || a === "never") return { mode: a, when: null, expiresInMs };
  if (!("mode" in a)) return { mode: "when", when: a.when, expiresInMs };
  return { mode: a.when ? "when" : a.mode, when: a.when ?? null, expiresInMs: a.expires_in_ms ?? expiresInMs };
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

function checkUrlTemplate(template: string, hosts: HostPolicy): Result<true, ManifestError> {
  // Placeholders may only appear after the authority: no argument can alter scheme, host or port.
  const authority = /^(https?):\/\/([^/?#]+)/.exec(template);
  if (!authority) return err({ code: "invalid_manifest", detail: `url must be absolute http(s): ${template}` });
  if (authority[2]!.includes("{")) return err({ code: "invalid_manifest", detail: "placeholders are not allowed in the scheme, host or port" });
  const host = new URL(`${authority[1]}://${authority[2]}`).hostname;
  const allowed =
    (hosts.allowLoopback && LOOPBACK.has(host)) ||
    hosts.allowlist.some((entry) => (entry.startsWith("*.") ? host.endsWith(entry.slice(1)) : host === entry));
  return allowed ? ok(true) : err({ code: "upstream_not_allowed", detail: `host ${host} is not on TOOLGATE_UPSTREAM_ALLOWLIST` });
}

/** `{field}` → the URL-encoded argument, `{idempotency_key}` → the key, `{secret:NAME}` → a binding (headers only). */
export function requestBuilder(method: string, urlTemplate: string, headerTemplates: Record<string, string>, sendsBody: boolean): RequestBuilder {
  return (input, canonicalInput, ctx) => {
    const url = urlTemplate.replace(/\{([a-zA-Z0-9_]+)\}/g, (_, field: string) =>
      encodeURIComponent(field === "idempotency_key" ? ctx.idempotencyKey : stringify(input[field])),
    );
    const headers: Record<string, string> = {};
    for (const [name, template] of Object.entries(headerTemplates)) {
      let missing: string | null = null;
      headers[name] = template
        .replace(/\{idempotency_key\}/g, ctx.idempotencyKey)
        .replace(/\{secret:([A-Za-z0-9_]+)\}/g, (_, secret: string) => {
          const value = ctx.secrets[secret];
          if (typeof value !== "string") missing = secret;
          return typeof value === "string" ? value : "";
        });
      if (missing) return { error: `secret ${missing} is not bound in this deployment` };
    }
    const body = sendsBody && method !== "GET" && method !== "DELETE" ? canonicalInput : null;
    if (body !== null) headers["Content-Type"] = "application/json";
    return { method, url, headers, body };
  };
}

const stringify = (value: unknown): string => (typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value));
