// ToolSpec: the one internal shape behind both ways of declaring a tool (a JSON manifest or
// defineTool in code). Everything the gate and the executor need is here as typed data; the
// request is built by `buildRequest`, so both kinds share one executor and one retry layer.
import type { z } from "zod";
import type { IdempotencyMode } from "../domain/classify.ts";
import type { OperationScope, Risk } from "../domain/identity.ts";
import type { RetryPolicy } from "../domain/retry.ts";

export type ApprovalRule = { mode: "always" | "never" | "when"; when: Record<string, Comparison> | null; expiresInMs: number };
export type Comparison = { gt?: number; gte?: number; lt?: number; lte?: number; eq?: unknown; in?: unknown[] };
export type Limit = { max?: number | string; min?: number | string; enum?: unknown[] };

export type BuiltRequest = { method: string; url: string; headers: Record<string, string>; body: string | null };
export type RequestContext = { idempotencyKey: string; secrets: Record<string, unknown> };
export type RequestBuilder = (input: Record<string, unknown>, canonicalInput: string, ctx: RequestContext) => BuiltRequest | { error: string };

export type ToolSpec = {
  name: string;
  description: string;
  risk: Risk;
  input: z.ZodType;
  output: z.ZodType | null;
  /** JSON Schema for export to models (bound fields are removed at export). */
  inputJsonSchema: Record<string, unknown>;
  idempotency: { mode: IdempotencyMode; header: string | null };
  buildRequest: RequestBuilder;
  buildReconcile: RequestBuilder | null;
  operationKey: string[];
  operationScope: OperationScope;
  resource: string | null;
  bind: Record<string, string>;
  requiresScopes: string[];
  approval: ApprovalRule;
  limits: Record<string, Limit>;
  timeoutMs: number;
  /** How long after an ambiguous attempt's timeout a status lookup's 404 is still "not yet" (DESIGN: settle window). */
  reconcileSettleMs: number;
  retry: RetryPolicy;
  cost: number;
  redact: string[];
};

/** How a tool travels inside toolgate: manifests as their JSON, code tools by catalog name. */
export type ToolSource = { kind: "manifest"; manifest: unknown } | { kind: "code"; name: string };

/** What a model is shown of a tool (plain data: it crosses Durable Object stubs). */
export type ToolDefinition = { name: string; description: string; inputJsonSchema: Record<string, unknown>; bound: string[] };
