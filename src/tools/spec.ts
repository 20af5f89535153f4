// ToolSpec: the one internal shape behind both ways of declaring a tool (a JSON manifest or
// defineTool in code). Everything the gate and the executor need is here as typed data; the
// request is built by `buildRequest`, so both kinds share one executor and one retry layer.
import type { QuotaNumbers } from "../domain/quota/definition.ts";
import type { z } from "zod";
import type { IdempotencyMode } from "../domain/classify.ts";
import type { FrozenInput, OperationScope, Risk } from "../domain/identity.ts";
import type { RetryPolicy } from "../domain/retry.ts";
import type { AcrossRunsLimit } from "../domain/limit/claims.ts";
import type { Compensation } from "../domain/compensation.ts";
import type { PaymentDeclaration } from "../domain/payment.ts";
import type { Route } from "../domain/operation/state.ts";

/** `fourEyes`: the approver must not be the run's own user (default). */
export type ApprovalRule = {
  mode: "always" | "never" | "when";
  when: Record<string, Comparison> | null;
  expiresInMs: number;
  fourEyes: boolean;
  /** "passkey": approving needs the approver's passkey, bound to the input hash (issue 35). */
  stepUp?: "passkey";
  /** Who votes and how many must (issue 35): frozen into each call's plan. Absent: one person decides. */
  route?: Route;
};
export type Comparison = {
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
  eq?: unknown;
  in?: unknown[];
};
export type Limit = { max?: number | string; min?: number | string; enum?: unknown[] };

export type BuiltRequest = {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | null;
};
/**
 * What a request may draw on besides the frozen input: the key, exactly the tenant secrets the tool
 * names (`secretNames`, decrypted for this attempt only) and, for code tools, exactly the deployment
 * variables they declare (`config`). Never the Worker's env.
 */
export type RequestContext = {
  idempotencyKey: string;
  /** A paid tool's stored x402 payment id (null: none yet), for `{payment_id}` (issue 37); absent: unpaid tool. */
  paymentId?: string | null;
  secrets: Record<string, string>;
  config: Record<string, string>;
};
/** Builds one request from the frozen input: its value for templates, its canonical text as the body. */
export type RequestBuilder = (
  input: FrozenInput,
  ctx: RequestContext,
) => BuiltRequest | { error: string };

/**
 * Where a shadow run's write goes instead of production (DESIGN "Shadow runs and undo"): another
 * base URL in place of the origin (path, headers and body stay) or a fixed answer, checked at PUT.
 */
export type ToolSandbox =
  { kind: "base_url"; baseUrl: string } | { kind: "result"; result: unknown };
/**
 * The route of one request, decided once from the operation's frozen plan (durable/operation/send.ts
 * `carried`): `production` for a live operation; a shadow operation's sandbox; `missing`: a shadow
 * operation whose tool declares none (never sent anywhere).
 */
export type SendRoute =
  { to: "production" } | { to: "sandbox"; sandbox: ToolSandbox } | { to: "missing" };

export type ToolSpec = {
  name: string;
  description: string;
  risk: Risk;
  input: z.ZodType;
  output: z.ZodType | null;
  /** The enforced JSON Schema (closed objects, see domain/json-schema.ts); exported minus bound fields. */
  inputJsonSchema: Record<string, unknown>;
  /** Exported in strict mode, so a null for an optional property means "absent". */
  strictExport: boolean;
  /** Why these arguments cannot form a request (a path segment of "", "." or ".."), or null. Pure. */
  checkArguments: (input: Record<string, unknown>) => string | null;
  /** What a person deciding on this call is told it will do, e.g. "POST https://…/refunds". */
  describeTarget: (input: Record<string, unknown>) => string;
  /** Tenant secrets the request references as {secret:NAME}. */
  secretNames: string[];
  /** Acting as the user (issue 36): the OAuth provider and scopes whose token `{credential}` is; null: none. */
  auth: { provider: string; scopes: string[] } | null;
  /** Deployment variables a code tool reads (never TOOLGATE_*). */
  configNames: string[];
  idempotency: { mode: IdempotencyMode; header: string | null };
  buildRequest: RequestBuilder;
  buildReconcile: RequestBuilder | null;
  /** Optional read shown to an approver (manifest `preview`); never sent for calls that need no approval. */
  buildPreview: RequestBuilder | null;
  operationKey: string[];
  operationScope: OperationScope;
  /** The tool's `resource` template (e.g. `order:{order_id}`), or null: no lock. */
  resource: string | null;
  /** The lock key for `input`: the template with URL-encoded argument values, or null for no lock. */
  resourceKey: (input: Record<string, unknown>) => string | null;
  bind: Record<string, string>;
  requiresScopes: string[];
  approval: ApprovalRule;
  limits: Record<string, Limit>;
  /** Windowed limits across runs (issue 21): reserved before the first attempt, per subject. */
  limitsAcrossRuns: AcrossRunsLimit[];
  /** Quota shaping per (user, this tool) from the manifest's `quota` (issue 34); null: none. */
  quota: QuotaNumbers | null;
  timeoutMs: number;
  /** How long after an ambiguous attempt's timeout a status lookup's 404 is still "not yet" (DESIGN: settle window). */
  reconcileSettleMs: number;
  /**
   * How long the upstream keeps an idempotency key (manifest `idempotency.key_ttl_ms`, default
   * 24 h): the window a late resend with the same key (or a late lookup) stays safe in.
   */
  keyTtlMs: number;
  retry: RetryPolicy;
  cost: number;
  /** JSON Pointers (RFC 6901) redacted from every copy outside the frozen input (domain/redact.ts). */
  redact: string[];
  /** Whether the trace and its export carry the (redacted) arguments and result. */
  traceContent: { arguments: boolean; result: boolean };
  /** A write's sandbox for shadow runs (null: none; a shadow run refuses its writes). */
  sandbox: ToolSandbox | null;
  /** Undo (issue 22): the declared compensating call (manifest `compensate`), or null: none. */
  compensate: Compensation | null;
  /** x402 pay-once (issue 37): what a 402 may be paid and who signs it (null: a 402 is an error). */
  payment: PaymentDeclaration | null;
};

/** How a tool travels inside toolgate: manifests as their JSON, code tools by catalog name. */
export type ToolSource = { kind: "manifest"; manifest: unknown } | { kind: "code"; name: string };

/** What a model is shown of a tool (plain data: it crosses Durable Object stubs). */
export type ToolDefinition = {
  name: string;
  description: string;
  inputJsonSchema: Record<string, unknown>;
  bound: string[];
  /** What calling it does (MCP exports it as annotations); `builtIn`: answered by toolgate itself. */
  risk: Risk;
  builtIn: boolean;
};
