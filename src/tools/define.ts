// defineTool: a ToolSpec from code, for tools whose request needs logic. The tool still only
// *builds* its request; toolgate's executor sends it, classifies it and owns every retry.
import { z } from "zod";
import { DEFAULT_RETRY, type RetryPolicy } from "../domain/retry.ts";
import type { IdempotencyMode } from "../domain/classify.ts";
import type { OperationScope, Risk } from "../domain/identity.ts";
import type { ApprovalRule, Limit, RequestBuilder, ToolSpec } from "./spec.ts";

export type ToolDefinition<I extends z.ZodObject> = {
  name: string;
  description: string;
  input: I;
  output?: z.ZodType;
  risk: Risk;
  idempotency?: { mode: IdempotencyMode; header?: string };
  request: (input: z.infer<I>, ctx: { idempotencyKey: string; secrets: Record<string, unknown> }) => ReturnType<RequestBuilder>;
  reconcile?: RequestBuilder;
  operationKey?: string[];
  operationScope?: OperationScope;
  resource?: string;
  bind?: Record<string, string>;
  requiresScopes?: string[];
  approval?: ApprovalRule;
  limits?: Record<string, Limit>;
  timeoutMs?: number;
  /** Settle window after an ambiguous attempt before a reconcile 404 is trusted; default timeoutMs. */
  reconcileSettleMs?: number;
  retry?: Partial<RetryPolicy>;
  cost?: number;
  redact?: string[];
};

export function defineTool<I extends z.ZodObject>(def: ToolDefinition<I>): ToolSpec {
  const mode = def.idempotency?.mode ?? "none";
  return {
    name: def.name,
    description: def.description,
    risk: def.risk,
    input: def.input,
    output: def.output ?? null,
    inputJsonSchema: z.toJSONSchema(def.input) as Record<string, unknown>,
    idempotency: { mode, header: mode === "header" ? (def.idempotency?.header ?? "Idempotency-Key") : null },
    buildRequest: (input, _canonical, ctx) => def.request(input as z.infer<I>, ctx),
    buildReconcile: def.reconcile ?? null,
    operationKey: def.operationKey ?? [],
    operationScope: def.operationScope ?? "run",
    resource: def.resource ?? null,
    bind: def.bind ?? {},
    requiresScopes: def.requiresScopes ?? [],
    approval: def.approval ?? { mode: def.risk === "irreversible_write" ? "always" : "never", when: null, expiresInMs: 15 * 60_000 },
    limits: def.limits ?? {},
    timeoutMs: def.timeoutMs ?? 10_000,
    reconcileSettleMs: def.reconcileSettleMs ?? def.timeoutMs ?? 10_000,
    retry: { ...DEFAULT_RETRY, ...def.retry },
    cost: def.cost ?? 1,
    redact: def.redact ?? [],
  };
}
