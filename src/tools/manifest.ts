// JSON tool manifests (DESIGN.md "Tools") → ToolSpec. The manifest schema is the wire contract for
// PUT /v1/tools/{name}: every object is strict (an unknown field is refused, never ignored), and a
// field toolgate does not enforce yet is refused as `unsupported_field`. Compilation closes the
// input schema (domain/json-schema.ts) and turns it into zod (z.fromJSONSchema); the URL template
// becomes a builder whose scheme, host, port and static path prefix no argument can change
// (encodeURIComponent keeps "." and the URL parser removes dot segments, so "", "." and ".." are
// refused outright and the parsed path is checked against the prefix). Secrets are the tenant's
// own, named in headers only, and travel only over https (plain http only to loopback in development).
import { z } from "zod";
import { DEFAULT_APPROVAL_TTL_MS } from "../domain/operation/index.ts";
import { closeSchema, refProblem, type Schema } from "../domain/json-schema.ts";
import { parsePointers } from "../domain/redact.ts";
import { DEFAULT_RETRY } from "../domain/retry.ts";
import { err, ok, type Result } from "../domain/result.ts";
import { toStrictSchema } from "../providers/strict-schema.ts";
import type { ApprovalRule, RequestBuilder, ToolSpec } from "./spec.ts";

const Comparison = z
  .strictObject({
    gt: z.number(),
    gte: z.number(),
    lt: z.number(),
    lte: z.number(),
    eq: z.unknown(),
    in: z.array(z.unknown()),
  })
  .partial();
const Approval = z.union([
  z.enum(["always", "never"]),
  z
    .strictObject({
      mode: z.enum(["always", "never"]).optional(),
      when: z.record(z.string(), Comparison).optional(),
      expires_in_ms: z
        .number()
        .int()
        .min(1_000)
        .max(7 * 24 * 60 * 60_000)
        .optional(),
      four_eyes: z.boolean().optional(),
    })
    .refine(
      (a) => a.mode !== undefined || a.when !== undefined,
      "approval needs a mode or a when rule",
    ),
]);
const RequestTemplate = z.strictObject({
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
  url: z.string().max(2048),
  headers: z.record(z.string(), z.string()).default({}),
});

export const Manifest = z.strictObject({
  name: z
    .string()
    .regex(
      /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/,
      "tool names are 1-64 letters, digits, _ or -, starting with a letter",
    )
    .refine(
      (name) => !name.toLowerCase().startsWith("toolgate_"),
      "names starting with toolgate_ are reserved for built-in tools",
    ),
  description: z.string().min(1).max(4096),
  input_schema: z.record(z.string(), z.unknown()),
  output_schema: z.record(z.string(), z.unknown()).optional(),
  risk: z.enum(["read", "write", "irreversible_write"]),
  request: RequestTemplate,
  idempotency: z
    .discriminatedUnion("mode", [
      z.strictObject({
        mode: z.literal("header"),
        header: z.string().min(1).default("Idempotency-Key"),
      }),
      z.strictObject({ mode: z.literal("natural") }),
      z.strictObject({ mode: z.literal("none") }),
    ])
    .default({ mode: "none" }),
  // settle_ms: how long after an ambiguous attempt's own timeout a 404 still only means "not yet".
  reconcile: RequestTemplate.partial({ method: true })
    .extend({ settle_ms: z.number().int().min(0).max(3_600_000).optional() })
    .optional(),
  /** A read the approver sees before deciding (a quote, a dry run): sent once, when approval is asked. */
  preview: RequestTemplate.extend({ method: z.enum(["GET", "POST"]).default("GET") }).optional(),
  operation_key: z.array(z.string()).default([]),
  operation_scope: z.enum(["run", "tenant"]).default("run"),
  resource: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[^{}]*(\{[a-zA-Z0-9_]+\}[^{}]*)*$/, "resource templates look like order:{order_id}")
    .optional(),
  bind: z
    .record(
      z.string(),
      z.string().regex(/^context\.[a-zA-Z0-9_]+$/, "bind values look like context.field"),
    )
    .default({}),
  requires_scopes: z.array(z.string()).default([]),
  approval: Approval.optional(),
  limits: z
    .record(
      z.string(),
      z
        .strictObject({
          max: z.union([z.number(), z.string()]),
          min: z.union([z.number(), z.string()]),
          enum: z.array(z.unknown()),
        })
        .partial(),
    )
    .default({}),
  timeout_ms: z.number().int().min(1).max(120_000).default(10_000),
  max_attempts: z.number().int().min(1).max(20).default(DEFAULT_RETRY.maxAttempts),
  retry: z
    .strictObject({
      min_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.minDelayMs),
      initial_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.initialDelayMs),
      max_delay_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxDelayMs),
      max_elapsed_ms: z.number().int().min(0).default(DEFAULT_RETRY.maxElapsedMs),
    })
    .default({
      min_delay_ms: DEFAULT_RETRY.minDelayMs,
      initial_delay_ms: DEFAULT_RETRY.initialDelayMs,
      max_delay_ms: DEFAULT_RETRY.maxDelayMs,
      max_elapsed_ms: DEFAULT_RETRY.maxElapsedMs,
    }),
  cost: z.number().min(0).default(1),
  /** JSON Pointers (RFC 6901) hidden from traces, logs, the console, the inbox and exports. */
  redact: z.array(z.string().max(512)).max(64).default([]),
  /** Opt-in: the (redacted) arguments and result in the trace and its OTLP export (gen_ai.tool.call.*). */
  trace: z
    .strictObject({ arguments: z.boolean().default(false), result: z.boolean().default(false) })
    .default({ arguments: false, result: false }),
});
export type Manifest = z.infer<typeof Manifest>;

export type ManifestError =
  | { code: "invalid_manifest"; detail: string }
  | { code: "upstream_not_allowed"; detail: string }
  | { code: "unsupported_field"; detail: string }
  | { code: "invalid_pointer"; detail: string };

/**
 * Hosts tools may target: the deployment allow-list — `host`, `*.suffix`, either with `:port` to
 * pin a port (without one, only the scheme's default port) — plus loopback on any port in development.
 */
export type HostPolicy = { allowlist: string[]; allowLoopback: boolean };

const SECRET_REF = /\{secret:([A-Za-z0-9_]+)\}/g;

export function compileManifest(raw: unknown, hosts: HostPolicy): Result<ToolSpec, ManifestError> {
  const parsed = Manifest.safeParse(raw);
  if (!parsed.success)
    return err({ code: "invalid_manifest", detail: z.prettifyError(parsed.error) });
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
  const request = requestBuilder(m.request.method, m.request.url, m.request.headers, true);
  if (m.resource !== undefined && m.risk === "read")
    return err({
      code: "invalid_manifest",
      detail: "resource: only writes take a resource lock (reads never conflict)",
    });
  if (m.preview && normalizeApproval(m).mode === "never")
    return err({
      code: "invalid_manifest",
      detail: "preview: shown to an approver, so it needs an approval rule that can ask",
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
        const built = buildUrl(url, args, "k");
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
    timeoutMs: m.timeout_ms,
    reconcileSettleMs: m.reconcile?.settle_ms ?? m.timeout_ms,
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
  };
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);
export const isLoopback = (hostname: string) => LOOPBACK.has(hostname);

/** Checks one request template; returns the tenant secrets its headers name. */
function checkTemplate(
  template: { url: string; headers: Record<string, string> },
  hosts: HostPolicy,
): Result<string[], ManifestError> {
  // Placeholders may only appear after the authority: no argument can alter scheme, host or port.
  const authority = /^(https?):\/\/([^/?#]+)/.exec(template.url);
  if (!authority)
    return err({
      code: "invalid_manifest",
      detail: `url must be absolute http(s): ${template.url}`,
    });
  if (authority[2]!.includes("{"))
    return err({
      code: "invalid_manifest",
      detail: "placeholders are not allowed in the scheme, host or port",
    });
  if (template.url.includes("{secret:"))
    return err({
      code: "invalid_manifest",
      detail: "secrets may be referenced in headers only, never in a url",
    });
  let origin: URL;
  try {
    origin = new URL(`${authority[1]}://${authority[2]}`);
    buildUrl(template.url, {}, "k");
  } catch {
    return err({
      code: "invalid_manifest",
      detail: `url is not a valid URL template: ${template.url}`,
    });
  }
  const port = Number(origin.port || (origin.protocol === "https:" ? 443 : 80));
  const host = origin.hostname;
  const loopback = hosts.allowLoopback && isLoopback(host);
  if (!loopback && !hosts.allowlist.some((entry) => allows(entry, host, port, origin.protocol))) {
    return err({
      code: "upstream_not_allowed",
      detail: `${host}:${port} is not on TOOLGATE_UPSTREAM_ALLOWLIST`,
    });
  }
  const names: string[] = [];
  for (const [header, value] of Object.entries(template.headers)) {
    const refs = [...value.matchAll(SECRET_REF)].map((match) => match[1]!);
    if (value.replace(SECRET_REF, "").includes("{secret:"))
      return err({
        code: "invalid_manifest",
        detail: `header ${header}: secret names are letters, digits and _`,
      });
    names.push(...refs);
  }
  if (names.length > 0 && origin.protocol !== "https:" && !loopback) {
    return err({
      code: "invalid_manifest",
      detail: `secrets are sent only over https; ${template.url} is plain http`,
    });
  }
  return ok(names);
}

function allows(entry: string, host: string, port: number, protocol: string): boolean {
  const pinned = /^(.*):(\d{1,5})$/.exec(entry);
  const pattern = pinned ? pinned[1]! : entry;
  const allowedPort = pinned ? Number(pinned[2]) : protocol === "https:" ? 443 : 80;
  const hostMatches = pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;
  return hostMatches && port === allowedPort;
}

/**
 * The URL for `input`: `{field}` → the URL-encoded argument, `{idempotency_key}` → the key. A path
 * value of "", "." or ".." is refused, and the parsed URL must keep the template's origin and its
 * static path prefix (everything before the first placeholder).
 */
export function buildUrl(
  template: string,
  input: Record<string, unknown>,
  idempotencyKey: string,
): Result<string, string> {
  const queryAt = template.search(/[?#]/);
  const pathEnd = queryAt === -1 ? template.length : queryAt;
  const firstPlaceholder = template.indexOf("{");
  const prefix = new URL(
    template.slice(
      0,
      firstPlaceholder === -1 || firstPlaceholder > pathEnd ? pathEnd : firstPlaceholder,
    ),
  );
  let problem: string | null = null;
  const url = template.replace(/\{([a-zA-Z0-9_]+)\}/g, (_, field: string, offset: number) => {
    const value = field === "idempotency_key" ? idempotencyKey : stringify(input[field]);
    if (offset < pathEnd && (value === "" || value === "." || value === ".."))
      problem ??= `${field} cannot be ${JSON.stringify(value)}: it is a segment of the tool's URL path`;
    return encodeURIComponent(value);
  });
  if (problem) return err(problem);
  const built = new URL(url);
  if (built.origin !== prefix.origin || !built.pathname.startsWith(prefix.pathname))
    return err(`the arguments would move the request outside ${prefix.origin}${prefix.pathname}`);
  return ok(built.toString());
}

/** `{secret:NAME}` → the tenant's secret (headers only), `{idempotency_key}` → the key; the body is the frozen input. */
export function requestBuilder(
  method: string,
  urlTemplate: string,
  headerTemplates: Record<string, string>,
  sendsBody: boolean,
): RequestBuilder {
  return (input, ctx) => {
    const url = buildUrl(urlTemplate, input.value, ctx.idempotencyKey);
    if (!url.ok) return { error: url.error };
    const headers: Record<string, string> = {};
    for (const [name, template] of Object.entries(headerTemplates)) {
      let missing: string | null = null;
      headers[name] = template
        .replace(/\{idempotency_key\}/g, ctx.idempotencyKey)
        .replace(SECRET_REF, (_, secret: string) => {
          const value = ctx.secrets[secret];
          if (value === undefined) missing = secret;
          return value ?? "";
        });
      if (missing)
        return { error: `the tenant secret ${missing} is not defined (was it deleted?)` };
    }
    const body = sendsBody && method !== "GET" && method !== "DELETE" ? input.canonical : null;
    if (body !== null) headers["Content-Type"] = "application/json";
    return { method, url: url.value, headers, body };
  };
}

/**
 * `order:{order_id}` → `order:ord%2F1`: argument values URL-encoded into the lock key, so no value
 * can make two different resources share a key (or one resource have two).
 */
export function resourceKeyFor(
  template: string | null,
): (input: Record<string, unknown>) => string | null {
  if (template === null) return () => null;
  return (input) =>
    template.replace(/\{([a-zA-Z0-9_]+)\}/g, (_, field: string) =>
      encodeURIComponent(stringify(input[field])),
    );
}

const stringify = (value: unknown): string =>
  typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
