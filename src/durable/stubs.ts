// Typed stubs. workers-types maps RPC return types through Rpc.Serializable, which erases any
// branch holding `unknown` (our envelopes carry untrusted tool output typed as unknown); the
// values cross the stub as structured clones, so the declared method types are the honest ones.
import type { Env } from "./env.ts";
import type { IndexObject } from "./index/object.ts";
import type { OperationObject } from "./operation/object.ts";
import type { ResourceLockObject } from "./resource-lock-object.ts";
import type { RetryBudgetObject } from "./retry-budget-object.ts";
import type { RunObject } from "./run/object.ts";
import type { TenantObject } from "./tenant/object.ts";

type Methods<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R>
    ? (...args: A) => Promise<R>
    : never;
};

export const operationStub = (env: Env, operationId: string) =>
  env.OPERATIONS.get(env.OPERATIONS.idFromName(operationId)) as unknown as Methods<OperationObject>;
export const runStub = (env: Env, runId: string) =>
  env.RUNS.get(env.RUNS.idFromName(runId)) as unknown as Methods<RunObject>;
export const tenantStub = (env: Env, tenantId: string) =>
  env.TENANTS.get(env.TENANTS.idFromName(tenantId)) as unknown as Methods<TenantObject>;
/** One lock object per tenant + resource key (e.g. `order:ord_1`): tenants never share a lock. */
export const lockStub = (env: Env, tenantId: string, resource: string) =>
  env.LOCKS.get(
    env.LOCKS.idFromName(`${tenantId}:${resource}`),
  ) as unknown as Methods<ResourceLockObject>;
/** One retry budget per tenant + upstream origin (domain/retry-budget.ts budgetKey). */
export const budgetStub = (env: Env, key: string) =>
  env.BUDGETS.get(env.BUDGETS.idFromName(key)) as unknown as Methods<RetryBudgetObject>;
/** One tenant index per tenant (issue 20): fed by the EVENTS consumer, read by the list routes and the console. */
export const indexStub = (env: Env, tenantId: string) =>
  env.INDEX.get(env.INDEX.idFromName(tenantId)) as unknown as Methods<IndexObject>;
