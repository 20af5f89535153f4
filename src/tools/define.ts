// defineTool: a ToolSpec from code, for tools whose request needs logic. The tool still only
// *builds* its request; toolgate's executor sends it, classifies it and owns every retry. It sees
// only the tenant secrets and deployment variables it declares (`secrets`, `config`), and a field
// toolgate does not enforce yet fails at definition, like a manifest's `unsupported_field`.
import { z } from "zod";
import { DEFAULT_APPROVAL_TTL_MS } from "../domain/operation/index.ts";
import { closeSchema } from "../domain/json-schema.ts";
import { toStrictSchema } from "../providers/strict-schema.ts";
import { checkRedact } from "./manifest/compile.ts";
import { checkContextUses } from "./manifest/context.ts";
import { compileAcrossRuns, type AcrossRunsInput } from "./manifest/limits.ts";
import { resourceKeyFor } from "./manifest/url.ts";
import { DEFAULT_RETRY, type RetryPolicy } from "../domain/retry.ts";
import { DEFAULT_KEY_TTL_MS, MAX_KEY_TTL_MS, MIN_KEY_TTL_MS } from "../domain/retry-late.ts";
import type { IdempotencyMode } from "../domain/classify.ts";
import type { OperationScope, Risk } from "../domain/identity.ts";
import type { ApprovalRule, Limit, RequestBuilder, RequestContext, ToolSpec } from "./spec.ts";

export type ToolDefinition<I extends z.ZodObject> = {
  name: string;
  description: string;
  input: I;
  output?: z.ZodType;
  risk: Risk;
  /** `keyTtlMs`: how long the upstream keeps a key (default 24 h), the window of late settlement. */
  idempotency?: { mode: IdempotencyMode; header?: string; keyTtlMs?: number };
  request: (input: z.infer<I>, ctx: RequestContext) => ReturnType<RequestBuilder>;
  /** Tenant secrets the request uses (ctx.secrets). */
  secrets?: string[];
  /** Deployment variables the request reads (ctx.config); TOOLGATE_* are never readable. */
  config?: string[];
  reconcile?: RequestBuilder;
  operationKey?: string[];
  operationScope?: OperationScope;
  resource?: string;
  bind?: Record<string, string>;
  requiresScopes?: string[];
  approval?: ApprovalRule;
  limits?: Record<string, Limit>;
  /** Windowed limits across runs, as a manifest's `limits_across_runs` (checked at definition). */
  limitsAcrossRuns?: AcrossRunsInput;
  timeoutMs?: number;
  /** Settle window after an ambiguous attempt before a reconcile 404 is trusted; default timeoutMs. */
  reconcileSettleMs?: number;
  retry?: Partial<RetryPolicy>;
  cost?: number;
  /** JSON Pointers hidden from traces, logs, the console, the inbox and exports. */
  redact?: string[];
  /** Opt-in: the (redacted) arguments and result in the trace and its export. */
  traceContent?: { arguments: boolean; result: boolean };
};

export function defineTool<I extends z.ZodObject>(def: ToolDefinition<I>): ToolSpec {
  const mode = def.idempotency?.mode ?? "none";
  const approval = def.approval ?? {
    mode: def.risk === "irreversible_write" ? "always" : "never",
    when: null,
    expiresInMs: DEFAULT_APPROVAL_TTL_MS,
    fourEyes: true,
  };
  const pointers = checkRedact(def.redact ?? []);
  if (pointers) throw new Error(`defineTool ${def.name}: ${pointers.detail}`);
  const reserved = (def.config ?? []).filter((name) => name.startsWith("TOOLGATE_"));
  if (reserved.length > 0)
    throw new Error(
      `defineTool ${def.name}: deployment secrets are never readable by tools (${reserved.join(", ")})`,
    );
  const keyTtlMs = def.idempotency?.keyTtlMs;
  if (
    keyTtlMs !== undefined &&
    (!Number.isSafeInteger(keyTtlMs) || keyTtlMs < MIN_KEY_TTL_MS || keyTtlMs > MAX_KEY_TTL_MS)
  )
    throw new Error(
      `defineTool ${def.name}: idempotency.keyTtlMs must be a whole number of ms in [${MIN_KEY_TTL_MS}, ${MAX_KEY_TTL_MS}]`,
    );
  if (keyTtlMs !== undefined && (def.risk === "read" || (mode === "none" && !def.reconcile)))
    throw new Error(
      `defineTool ${def.name}: idempotency.keyTtlMs applies only to a write with an idempotency key or a status lookup (reconcile)`,
    );
  const inputJsonSchema = closeSchema(z.toJSONSchema(def.input) as Record<string, unknown>);
  const context = checkContextUses(def.bind ?? {}, def.limits ?? {}, inputJsonSchema);
  if (!context.ok) throw new Error(`defineTool ${def.name}: ${context.error.detail}`);
  const acrossRuns = compileAcrossRuns(def.limitsAcrossRuns ?? [], inputJsonSchema);
  if (!acrossRuns.ok) throw new Error(`defineTool ${def.name}: ${acrossRuns.error.detail}`);
  return {
    name: def.name,
    description: def.description,
    risk: def.risk,
    input: def.input,
    output: def.output ?? null,
    inputJsonSchema,
    strictExport: toStrictSchema(inputJsonSchema, Object.keys(def.bind ?? {})).strict,
    checkArguments: () => null,
    describeTarget: () => `code tool ${def.name}`,
    secretNames: def.secrets ?? [],
    // Code tools act with the tenant's own secrets; acting as the user is a manifest's `auth`.
    auth: null,
    configNames: def.config ?? [],
    idempotency: {
      mode,
      header: mode === "header" ? (def.idempotency?.header ?? "Idempotency-Key") : null,
    },
    buildRequest: (input, ctx) => def.request(input.value as z.infer<I>, ctx),
    buildReconcile: def.reconcile ?? null,
    buildPreview: null,
    operationKey: def.operationKey ?? [],
    operationScope: def.operationScope ?? "run",
    resource: def.resource ?? null,
    resourceKey: resourceKeyFor(def.resource ?? null),
    bind: def.bind ?? {},
    requiresScopes: def.requiresScopes ?? [],
    approval,
    limits: def.limits ?? {},
    limitsAcrossRuns: acrossRuns.value,
    quota: null,
    timeoutMs: def.timeoutMs ?? 10_000,
    reconcileSettleMs: def.reconcileSettleMs ?? def.timeoutMs ?? 10_000,
    keyTtlMs: keyTtlMs ?? DEFAULT_KEY_TTL_MS,
    retry: { ...DEFAULT_RETRY, ...def.retry },
    cost: def.cost ?? 1,
    redact: def.redact ?? [],
    traceContent: def.traceContent ?? { arguments: false, result: false },
    sandbox: null,
    // Undo is declared in manifests only (a code tool's compensation: a manifest tool of the same name).
    compensate: null,
    payment: null,
  };
}
